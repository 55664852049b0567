"""Prints what meson needs to build torch_gyre against the interpreter's torch.

One `key=value` line each; exits non-zero (so meson treats torch as absent)
when torch cannot be imported.
"""
import sys
import sysconfig

try:
    import torch
    from torch.utils import cpp_extension
except Exception as e:  # any failure to import means: no usable torch
    print("torch not importable: %s" % e, file=sys.stderr)
    sys.exit(1)

prefix = sys.argv[1] if len(sys.argv) > 1 else ""
# Where `meson install` should put the package for this interpreter to find
# it. Debian's python looks in /usr/local/lib/python3.X/dist-packages for
# /usr/local, which meson's default (lib/python3/dist-packages under the
# prefix, right for /usr) misses; elsewhere meson's own choice stands ("").
site = ""
if prefix == "/usr/local" and "posix_local" in sysconfig.get_scheme_names():
    site = sysconfig.get_path("platlib", "posix_local", vars={"base": "/usr", "platbase": "/usr"})
print("site=%s" % site)

major, minor = (int(x) for x in torch.__version__.split(".")[:2])
print("version=%s" % torch.__version__)
print("major=%d" % major)
print("minor=%d" % minor)
print("cxx11_abi=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI))
print("include_dirs=%s" % ";".join(cpp_extension.include_paths()))
print("library_dirs=%s" % ";".join(cpp_extension.library_paths()))
print("cuda=%d" % int(torch.version.cuda is not None))
# pybind11 shares its type registry between modules only when these three
# agree; torch says what it was built with (as cpp_extension passes them).
for name in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI"):
    print("pybind11_%s=%s" % (name.lower(), getattr(torch._C, "_PYBIND11_" + name, "")))
