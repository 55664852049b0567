#!/usr/bin/env bash
# run_on_gpu.sh PROBE COMMAND...: runs COMMAND when PROBE (gpu_probe) finds a
# usable CUDA GPU; otherwise exits 77, which meson reports as SKIP, by name,
# so a machine without a GPU never counts these tests as passed.
set -uo pipefail
probe=$1
shift
if [[ ! -x $probe ]]; then
  echo "SKIP: this build has no CUDA runtime (no gpu_probe)"
  exit 77
fi
"$probe"
rc=$?
if [[ $rc != 0 ]]; then
  echo "SKIP: no GPU here"
  exit 77
fi
exec "$@"
