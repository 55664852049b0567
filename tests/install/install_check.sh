#!/usr/bin/env bash
# `meson install` as a user would run it, into a temporary DESTDIR:
#   - the tree holds both headers, both libraries with their links, gyre.pc
#     and nccl.pc, gyre-info and every perf binary;
#   - a C program built with `pkg-config --cflags --libs nccl` (NCCL calls
#     only) and one built with `... gyre` (host-memory communicators) run two
#     ranks each and load the installed libraries, not another libnccl.so.2
#     (the CUDA toolkit's may be in the loader's cache);
#   - an installed perf binary runs from the tree with no LD_LIBRARY_PATH.
#
# usage: install_check.sh BUILD_DIR SOURCE_DIR PREFIX LIBDIR BINDIR INCLUDEDIR
set -uo pipefail
build=${1:?} src=${2:?} prefix=${3:?} libdir=${4:?} bindir=${5:?} includedir=${6:?}
# meson's options are relative to the prefix unless given absolute.
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
case $bindir in /*) ;; *) bindir=$prefix/$bindir ;; esac
case $includedir in /*) ;; *) includedir=$prefix/$includedir ;; esac
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

if ! timeout 120 "${MESON:-meson}" install -C "$build" --no-rebuild --destdir "$dest" >"$dest/install.log" 2>&1; then
  cat "$dest/install.log"; echo "FAIL: meson install"; exit 1
fi
echo "installed tree (DESTDIR=$dest):"
(cd "$dest" && find . -type f -o -type l | sort | sed 's/^\.//')

api=$(awk '/#define NCCL_(MAJOR|MINOR|PATCH) /{v[$2]=$3} END{print v["NCCL_MAJOR"]"."v["NCCL_MINOR"]"."v["NCCL_PATCH"]}' "$src/include/gyre.h")
for f in "$includedir/nccl.h" "$includedir/nccl_device.h" "$includedir/gyre.h" "$libdir/libgyre.so" "$libdir/libnccl.so" \
         "$libdir/libnccl.so.2" "$libdir/libnccl.so.$api" "$libdir/pkgconfig/gyre.pc" "$libdir/pkgconfig/nccl.pc" \
         "$bindir/gyre-info" "$bindir/all_reduce_perf" "$bindir/all_gather_perf" "$bindir/broadcast_perf" \
         "$bindir/reduce_perf" "$bindir/reduce_scatter_perf" "$bindir/sendrecv_perf" "$bindir/alltoall_perf"; do
  [ -e "$dest$f" ] || fail "$f was not installed"
done
[ "$(readlink "$dest$libdir/libnccl.so.2")" = "libnccl.so.$api" ] || fail "libnccl.so.2 does not point at libnccl.so.$api"

# Every header nccl_device.h includes is installed: a C++ program using the
# device API's types builds from the installed tree alone.
printf '#include <nccl_device.h>\nint main() { ncclSymPtr<float> p; ncclCoopAny any = ncclCoopCta(); return int(p.offset) + any.size() - 1; }\n' \
  >"$dest/device_header.cc"
c++ -std=c++17 -fsyntax-only -I"$dest$includedir" "$dest/device_header.cc" ||
  fail "nccl_device.h does not build from the installed headers"

# pkg-config prefixes -I and -L with the sysroot: the .pc files name the real prefix.
export PKG_CONFIG_PATH=$dest$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest
[ "$(pkg-config --modversion nccl)" = "$api" ] || fail "nccl.pc says version $(pkg-config --modversion nccl), not $api"
for pc in nccl gyre; do
  flags=$(pkg-config --cflags --libs $pc) || { fail "pkg-config $pc"; continue; }
  echo "pkg-config --cflags --libs $pc: $flags"
  # shellcheck disable=SC2086
  if ! cc -std=gnu11 -Wall -Werror -o "$dest/${pc}_program" "$src/tests/install/${pc}_program.c" $flags; then
    fail "$pc: the program did not build with pkg-config's flags"; continue
  fi
  lib=libnccl.so.2; [ $pc = gyre ] && lib=libgyre.so.0
  needed=$(readelf -d "$dest/${pc}_program" | sed -n 's/.*(NEEDED).*\[\(libnccl[^]]*\|libgyre[^]]*\)\]/\1/p')
  [ "$needed" = "$lib" ] || fail "$pc: the program needs '$needed', not $lib"
  out=$(LD_LIBRARY_PATH=$dest$libdir GYRE_FAKE_CUDA=1 NCCL_SOCKET_IFNAME=lo GYRE_INIT_TIMEOUT=30 GYRE_TIMEOUT=30 \
        timeout 90 "$dest/${pc}_program" 2>&1)
  rc=$?
  echo "$out" | sed "s/^/  $pc: /"
  [ $rc -eq 0 ] && grep -q '^PASSED' <<<"$out" || fail "$pc: the program failed (exit $rc)"
  loaded=$(sed -n 's/^library: //p' <<<"$out")
  [ "$(readlink -f "$loaded")" = "$(readlink -f "$dest$libdir/$lib")" ] || fail "$pc: loaded $loaded, not the installed $lib"
done

# Installed binaries find libgyre.so through their rpath, from any prefix.
out=$(env -u LD_LIBRARY_PATH NCCL_SOCKET_IFNAME=lo GYRE_TIMEOUT=30 timeout 90 "$dest$bindir/all_reduce_perf" -p 2 -b 8 -e 4K -f 8 -c 1 2>&1)
rc=$?
grep -q '^# Wrong elements *: 0' <<<"$out" && [ $rc -eq 0 ] || { echo "$out"; fail "installed all_reduce_perf (exit $rc)"; }
gyre_lib=$(env -u LD_LIBRARY_PATH ldd "$dest$bindir/all_reduce_perf" | awk '/libgyre/ {print $3}')
[ "$(readlink -f "$gyre_lib")" = "$(readlink -f "$dest$libdir/libgyre.so.0")" ] || fail "installed all_reduce_perf loads '$gyre_lib'"
env -u LD_LIBRARY_PATH timeout 30 "$dest$bindir/gyre-info" --help >/dev/null || fail "installed gyre-info --help"

[ $failures -eq 0 ] && echo PASS
exit $(( failures > 0 ))
