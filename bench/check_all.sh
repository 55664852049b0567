#!/usr/bin/env bash
# Runs every *_perf binary with -c 1 over 2, 3 and 4 forked ranks, every data
# type and op the library takes (-d all -o all: rows the library refuses are
# printed as "# skipping ..."), odd sizes (-i 7777 and -f 3) and a non-zero
# root, and says which runs reported wrong elements or failed.
#
#   bench/check_all.sh [BUILD_DIR]          (default ./build)
#
# Environment: RANKS ["2 3 4"], PROGRAMS [all seven], LOG_DIR [a new temporary
# directory, removed again when every run passed; one log per run], TIMEOUT [300 s per run], EXTRA [more flags for
# every run, e.g. "-G 1" for device memory on a GPU]. Sizes stay below
# 256 KiB, so this is a correctness run, not a benchmark.
set -uo pipefail

BUILD_DIR=${1:-./build}
RANKS=${RANKS:-"2 3 4"}
PROGRAMS=${PROGRAMS:-"all_reduce_perf all_gather_perf broadcast_perf reduce_perf reduce_scatter_perf sendrecv_perf alltoall_perf"}
TIMEOUT=${TIMEOUT:-300}
OWN_LOG_DIR=0
if [[ -z ${LOG_DIR:-} ]]; then
  LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/gyre-bench-check.XXXXXX")
  OWN_LOG_DIR=1  # removed again when every run passed
fi
mkdir -p "$LOG_DIR"

rooted() { [[ $1 == broadcast_perf || $1 == reduce_perf ]]; }
reduces() { [[ $1 == all_reduce_perf || $1 == reduce_perf || $1 == reduce_scatter_perf ]]; }

failed=0 runs=0
for prog in $PROGRAMS; do
  bin=$BUILD_DIR/bench/$prog
  [[ -x $bin ]] || { echo "check_all: $bin not found; build first" >&2; exit 2; }
  for np in $RANKS; do
    # Step sizes that are not multiples of any element size or rank count.
    variants=("-b 7 -e 70K -i 7777" "-b 5 -e 200K -f 3")
    for i in "${!variants[@]}"; do
      v=${variants[$i]}
      extra=()
      # The last rank as root in the first variant, rank 0 in the second.
      if rooted "$prog"; then extra+=(-r $(( i == 0 ? np - 1 : 0 ))); fi
      if reduces "$prog"; then extra+=(-o all); fi
      log=$LOG_DIR/${prog}_np${np}_$(echo "$v" | tr -c 'A-Za-z0-9' '_').log
      # shellcheck disable=SC2086  # $v is a list of flags
      # shellcheck disable=SC2206  # EXTRA is a list of flags
      cmd=("$bin" -p "$np" $v -d all -n 1 -w 1 -c 1 -T "$TIMEOUT" "${extra[@]}" ${EXTRA:-})
      runs=$((runs + 1))
      rc=0
      NCCL_SOCKET_IFNAME=lo timeout $((TIMEOUT + 60)) "${cmd[@]}" >"$log" 2>&1 || rc=$?
      verdict=$(sed -n 's/^# Wrong elements *: *//p' "$log")
      skipped=$(grep -c '^# skipping' "$log")
      if [[ $rc != 0 || $verdict != "0 OK" ]]; then
        failed=$((failed + 1))
        echo "FAIL  ${cmd[*]}  (exit $rc, wrong: ${verdict:-none}) -> $log"
        grep -v '^#' "$log" | awk '$9 != "0" && $9 != "N/A" || $13 != "0" && $13 != "N/A"' | head -n 5 | sed 's/^/      /'
        grep -iE 'failed|error|killed|timed out' "$log" | head -n 5 | sed 's/^/      /'
      else
        echo "ok    ${cmd[*]}  ($skipped type/op pairs skipped)"
      fi
    done
  done
done
if [[ $failed == 0 && $OWN_LOG_DIR == 1 ]]; then
  rm -rf "$LOG_DIR"
  echo "check_all: $runs runs, 0 failed"
else
  echo "check_all: $runs runs, $failed failed; logs in $LOG_DIR"
fi
[[ $failed == 0 ]]
