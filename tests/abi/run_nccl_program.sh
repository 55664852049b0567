#!/usr/bin/env bash
# Runs tests/abi/nccl_program (built against NVIDIA's nccl.h and libnccl.so.2)
# with gyre's libnccl.so.2 in NCCL's place, and checks that every nccl*
# function NVIDIA's library exports is exported by gyre too, except the few
# listed below.
#
# usage: run_nccl_program.sh PROGRAM GYRE_LIBNCCL NCCL_LIBRARY
set -uo pipefail
program=${1:?} libgyre=${2:?} libnccl=${3:?}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
ln -s "$(readlink -f "$libgyre")" "$dir/libnccl.so.2"
failures=0

# Which library the program really loads.
loaded=$(LD_LIBRARY_PATH="$dir" ldd "$program" | awk '/libnccl.so.2/ {print $3}')
if [ "$(readlink -f "$loaded")" != "$(readlink -f "$libgyre")" ]; then
  echo "FAIL: the program would load $loaded, not gyre"; exit 1
fi
if ! LD_LIBRARY_PATH="$dir" GYRE_FAKE_CUDA=1 NCCL_SOCKET_IFNAME=lo GYRE_TIMEOUT=20 timeout 60 "$program"; then
  echo "FAIL: the NCCL-built program did not pass on gyre"; failures=$((failures + 1))
fi

# What gyre leaves out: GIN's barrier requirement (gyre has no GIN) and a
# debug internal.
allowed="ncclGinBarrierCreateRequirement ncclResetDebugInitInternal"
symbols() { nm -D --defined-only "$1" | awk '{print $3}' | sed 's/@.*//' | grep -E '^p?nccl' | sort -u; }
missing=$(comm -23 <(symbols "$libnccl") <(symbols "$libgyre"))
for name in $missing; do
  base=${name#p}
  if ! grep -qw -- "$base" <<<"$allowed"; then
    echo "FAIL: NCCL exports $name, gyre does not"; failures=$((failures + 1))
  fi
done
[ $failures -eq 0 ] && echo "PASS: $(symbols "$libnccl" | wc -l) NCCL symbols checked, program ran"
exit $(( failures > 0 ))
