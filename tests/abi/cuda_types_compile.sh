#!/usr/bin/env bash
# Builds and runs tests/abi/cuda_types_program.cc (and cuda_types_c.c) the
# ways a program written for NCCL is built against gyre's nccl.h:
#   - nvcc: nccl.h brings half, __nv_bfloat16 and the CUDA runtime;
#   - g++ -I<cuda include>: the same from a plain C++ compiler;
#   - g++ without the CUDA include folder: a host-only program, cudaStream_t
#     declared by nccl.h itself;
#   - gcc (C) without the CUDA include folder.
# A toolchain that is absent (no nvcc, no CUDA headers) is reported and left out.
#
# usage: cuda_types_compile.sh SRC_DIR INCLUDE_DIR LIB_DIR WORK_DIR NVCC CUDA_INCLUDE_DIR MIN_BUILDS
# (MIN_BUILDS: how many builds must run; 5 where meson found nvcc and the
# CUDA headers, so none of them is left out silently)
set -uo pipefail
src=${1:?} inc=${2:?} lib=${3:?} work=${4:?} nvcc=${5:-} cudainc=${6:-} minimum=${7:-2}
mkdir -p "$work"
failures=0 ran=0
build_and_run() {  # name, compiler, arguments...
  local name=$1 compiler=$2; shift 2
  # gyre's include folder first: the CUDA toolkit's folder may hold NVIDIA's nccl.h.
  local rpath=-Wl,-rpath,"$lib"
  case "$compiler" in *nvcc) rpath=-Xlinker=-rpath,"$lib" ;; esac
  if ! "$compiler" -I"$inc" "$@" -o "$work/$name" -L"$lib" -lnccl "$rpath" 2>"$work/$name.log"; then
    echo "FAIL: $name does not build:"; cat "$work/$name.log"; failures=$((failures + 1)); return
  fi
  if ! "$work/$name"; then echo "FAIL: $name ran and failed"; failures=$((failures + 1)); return; fi
  echo "ok: $name"; ran=$((ran + 1))
}
# Host-only: the CUDA include folder is not on the path (and not in the
# compiler's default path, or the program would see it anyway).
if echo '#include <cuda_runtime.h>' | g++ -x c++ -fsyntax-only - 2>/dev/null; then
  echo "note: cuda_runtime.h is on g++'s default include path; the host-only builds see it"
  build_and_run gxx_default g++ -std=c++17 -DEXPECT_CUDA_TYPES "$src/cuda_types_program.cc"
else
  build_and_run gxx_host_only g++ -std=c++17 "$src/cuda_types_program.cc"
  build_and_run gcc_host_only gcc -std=c11 "$src/cuda_types_c.c"
fi
if [ -n "$cudainc" ] && [ -f "$cudainc/cuda_runtime.h" ]; then
  build_and_run gxx_with_cuda g++ -std=c++17 -DEXPECT_CUDA_TYPES -I"$cudainc" "$src/cuda_types_program.cc"
  build_and_run gcc_with_cuda gcc -std=c11 -I"$cudainc" "$src/cuda_types_c.c"
else
  echo "note: no CUDA include folder: the g++ -I<cuda> build is left out"
fi
if [ -n "$nvcc" ] && command -v "$nvcc" >/dev/null; then
  build_and_run nvcc "$nvcc" -std=c++17 -DEXPECT_CUDA_TYPES -x cu "$src/cuda_types_program.cc"
else
  echo "note: no nvcc: the nvcc build is left out"
fi
echo "$ran builds ran, $failures failed"
[ $ran -ge "$minimum" ] || echo "FAIL: only $ran of the $minimum expected builds ran"
[ $failures -eq 0 ] && [ $ran -ge "$minimum" ] && echo PASS
exit $(( failures > 0 || ran < minimum ))
