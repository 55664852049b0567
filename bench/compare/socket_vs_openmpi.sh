#!/usr/bin/env bash
# Runs gyre's all_reduce_perf (2 forked ranks, socket transport over loopback)
# and Open MPI's MPI_Allreduce (2 ranks, TCP BTL over loopback) on the same
# message sizes, then prints one side-by-side table.
#
#   bench/compare/socket_vs_openmpi.sh [BUILD_DIR]        (default ./build)
#
# Environment knobs (defaults in brackets): MIN_BYTES [8], MAX_BYTES [64M],
# STEP_FACTOR [2], ITERS [20], WARMUP [5], CHECK [1], TIMEOUT [900 s per run],
# LOG_DIR [a new temporary directory; both raw tables are kept there].
#
# Both tables use the out-of-place columns. The ratio is gyre busbw / Open MPI
# busbw; with the same bytes and the same 2(n-1)/n factor on both sides that
# equals Open MPI time / gyre time, which is computed from the times so that
# small messages (busbw printed as 0.00) still get a ratio.
set -euo pipefail

BUILD_DIR=${1:-./build}
MIN_BYTES=${MIN_BYTES:-8}
MAX_BYTES=${MAX_BYTES:-64M}
STEP_FACTOR=${STEP_FACTOR:-2}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
CHECK=${CHECK:-1}
TIMEOUT=${TIMEOUT:-900}
LOG_DIR=${LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/gyre-vs-ompi.XXXXXX")}
mkdir -p "$LOG_DIR"

GYRE_BIN=$BUILD_DIR/bench/all_reduce_perf
MPI_BIN=$BUILD_DIR/bench/mpi_allreduce_perf
for bin in "$GYRE_BIN" "$MPI_BIN"; do
  if [[ ! -x $bin ]]; then
    echo "socket_vs_openmpi.sh: $bin not found; build first (ninja -C $BUILD_DIR)." >&2
    [[ $bin == "$MPI_BIN" ]] && echo "  mpi_allreduce_perf is built only when meson finds MPI (libopenmpi-dev)." >&2
    exit 2
  fi
done
command -v mpirun >/dev/null || { echo "socket_vs_openmpi.sh: mpirun not in PATH" >&2; exit 2; }

SIZES=(-b "$MIN_BYTES" -e "$MAX_BYTES" -f "$STEP_FACTOR" -n "$ITERS" -w "$WARMUP" -c "$CHECK")

echo "# gyre all_reduce_perf -p 2 (NCCL_SOCKET_IFNAME=lo) -> $LOG_DIR/gyre.txt" >&2
# -T bounds the forked ranks; timeout(1) bounds the launcher itself. A run
# that fails part-way still has its finished rows, so the table is printed
# from what there is and the failure is reported and returned at the end.
gyre_rc=0
NCCL_SOCKET_IFNAME=lo timeout "$TIMEOUT" \
  "$GYRE_BIN" -p 2 -d float -o sum "${SIZES[@]}" -T "$TIMEOUT" >"$LOG_DIR/gyre.txt" \
  2>"$LOG_DIR/gyre.err" || gyre_rc=$?

echo "# Open MPI mpi_allreduce_perf -np 2 (btl tcp,self on lo) -> $LOG_DIR/openmpi.txt" >&2
ompi_rc=0
timeout "$TIMEOUT" mpirun --allow-run-as-root --oversubscribe -np 2 \
  --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
  "$MPI_BIN" -d float "${SIZES[@]}" >"$LOG_DIR/openmpi.txt" 2>"$LOG_DIR/openmpi.err" || ompi_rc=$?

# Table rows are the lines that do not start with '#': $1 size, $6 out-of-place
# time (us), $8 out-of-place busbw (GB/s), $9 #wrong.
awk '
  FNR == 1 { file++ }
  /^#/ || NF < 13 { next }
  !($1 in seen) { seen[$1] = 1; order[++n] = $1 }  # sizes in either table, first seen first
  file == 1 { gt[$1] = $6; gb[$1] = $8; gw[$1] = $9 }
  file == 2 { mt[$1] = $6; mb[$1] = $8; mw[$1] = $9 }
  END {
    printf "# gyre (socket, 2 ranks, loopback) vs Open MPI (TCP BTL, 2 ranks, loopback): float sum, out-of-place\n"
    printf "%12s  %11s  %11s  %11s  %11s  %9s\n", "size(B)", "gyre(us)", "gyre(GB/s)", "ompi(us)", "ompi(GB/s)", "gyre/ompi"
    for (i = 1; i <= n; i++) {
      s = order[i]
      if (!(s in gt)) { gt[s] = "-"; gb[s] = "-" }
      if (!(s in mt)) { mt[s] = "-"; mb[s] = "-" }
      ratio = (gt[s] != "-" && mt[s] != "-" && gt[s] > 0) ? sprintf("%.2f", mt[s] / gt[s]) : "-"
      printf "%12s  %11s  %11s  %11s  %11s  %9s\n", s, gt[s], gb[s], mt[s], mb[s], ratio
      if ((s in gw) && gw[s] != "0" && gw[s] != "N/A") bad = bad " gyre@" s
      if ((s in mw) && mw[s] != "0" && mw[s] != "N/A") bad = bad " ompi@" s
    }
    if (bad != "") printf "# WRONG RESULTS:%s\n", bad
  }
' "$LOG_DIR/gyre.txt" "$LOG_DIR/openmpi.txt"
# (A run that failed before its footer has no average line.)
sed -n 's/^# Avg bus bandwidth/# gyre: avg bus bandwidth/p' "$LOG_DIR/gyre.txt"
sed -n 's/^# Avg bus bandwidth/# ompi: avg bus bandwidth/p' "$LOG_DIR/openmpi.txt"
echo "# raw tables and stderr: $LOG_DIR" >&2
status=0
for side in gyre:$gyre_rc openmpi:$ompi_rc; do
  name=${side%%:*} rc=${side##*:}
  if [[ $rc != 0 ]]; then
    echo "# $name run failed (exit $rc); its stderr ($LOG_DIR/$name.err) ends with:" >&2
    tail -n 5 "$LOG_DIR/$name.err" | sed 's/^/#   /' >&2
    status=1
  fi
done
exit $status
