#!/usr/bin/env bash
# N "hosts" of 2 ranks each (network namespaces on one bridge, tests/netns/
# hostnet.sh), the perf binaries launched in them the way torchrun would.
# Checks, for N = 2, 3 (not a power of two) or 4:
#   - every collective's result is exact (-c 1: "Wrong elements : 0 OK"),
#     AllReduce with both the ring and the tree;
#   - init sees N hosts; a ring hop between hosts goes over the socket
#     transport and one inside a host over shared memory;
#   - each channel's ring enters and leaves every host exactly once (the ring
#     crosses N host boundaries, the fewest possible), read from the
#     NCCL_DEBUG=INFO "channel C ring:" lines;
#   - each tree spans the hosts with N-1 links between hosts and a chain of
#     1 link inside each host, read from every rank's "tree T: parent P,
#     children [...]" line.
# Sizes are small: this runs on a 2-core CI machine.
#
# With PLACEMENT cyclic, rank r runs on host r % NHOSTS (as a launcher that
# deals ranks round robin would place them), so a ring in rank order would
# cross a host boundary at every hop.
#
# usage: hosts.sh BUILD_DIR NHOSTS [block|cyclic]   (exit 77 = skipped: not root / no netns)
set -uo pipefail
build=${1:?usage: hosts.sh BUILD_DIR NHOSTS [block|cyclic]}
nhosts=${2:?usage: hosts.sh BUILD_DIR NHOSTS [block|cyclic]}
export HN_PLACE=${3:-block}
per=2
world=$(( nhosts * per ))
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hostnet.sh
. "$here/hostnet.sh"
hostnet_check
hostnet_up "$nhosts" || { echo "FAIL: could not build $nhosts hosts"; exit 1; }

export GYRE_INIT_TIMEOUT=30 GYRE_TIMEOUT=30
failures=0
# Below the ephemeral range (32768+): an outgoing connection of an earlier run
# in the namespace, in TIME_WAIT, held a port there ("Address already in use").
port=$(( 11000 + $$ % 19000 ))
fail() { echo "FAIL: $*"; failures=$(( failures + 1 )); }

# run NAME CMD...: every rank must exit 0 and rank 0 must report 0 wrong elements.
run() {
  local name=$1; shift
  port=$(( port + 1 ))
  hostnet_launch "$name" "$nhosts" "$per" 120 "$port" "$@"
  local codes bad=0 c
  hostnet_wait; codes=$HN_CODES
  for c in $codes; do [ "$c" = 0 ] || bad=1; done
  if [ $bad = 1 ] || ! grep -q "Wrong elements *: 0 OK" "$HN_WORK/$name.0"; then
    fail "$name: exit codes by rank: $codes"
    tail -n 8 "$HN_WORK/$name".*
    return 1
  fi
  echo "ok: $name ($world ranks on $nhosts hosts, $HN_PLACE placement): $(grep -E '^ +[0-9]+ ' "$HN_WORK/$name.0" | tail -1 | awk '{print $1 " B, busbw " $8 " GB/s"}')"
}

bench=$build/bench
sizes=(-b 8 -e 256K -f 32 -n 2 -w 1 -c 1)
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH run allreduce_ring "$bench/all_reduce_perf" "${sizes[@]}"
NCCL_ALGO=Tree NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT run allreduce_tree "$bench/all_reduce_perf" "${sizes[@]}"
run allgather "$bench/all_gather_perf" "${sizes[@]}"
run reduce_scatter "$bench/reduce_scatter_perf" "${sizes[@]}"
run broadcast "$bench/broadcast_perf" "${sizes[@]}" -r $(( world - 1 ))
run reduce "$bench/reduce_perf" "${sizes[@]}" -r 1 -o max -d int32
run sendrecv "$bench/sendrecv_perf" "${sizes[@]}"
run alltoall "$bench/alltoall_perf" -b 1K -e 64K -f 64 -n 2 -w 1 -c 1

# ---- Where the ring and the tree cross host boundaries ----------------------
# The host of rank r, as hostnet_launch placed it.
host_of() { if [ "$HN_PLACE" = cyclic ]; then echo $(( $1 % nhosts )); else echo $(( $1 / per )); fi; }
log0=$HN_WORK/allreduce_ring.0
if [ -f "$log0" ]; then
  grep -q "over $nhosts host(s)" "$log0" || fail "init did not plan $nhosts hosts: $(grep 'host(s)' "$log0" | head -1)"
  rings=$(grep -oE 'channel [0-9]+ ring:[ 0-9]+' "$log0" | sort -u)
  [ -n "$rings" ] || fail "no 'channel C ring:' lines in rank 0's NCCL_DEBUG=INFO output"
  while read -r _ ch _ order; do
    [ -n "$ch" ] || continue
    read -ra ranks <<<"$order"
    crossings=0
    for (( i = 0; i < ${#ranks[@]}; i++ )); do
      a=${ranks[i]} b=${ranks[(i + 1) % ${#ranks[@]}]}
      [ "$(host_of "$a")" != "$(host_of "$b")" ] && crossings=$(( crossings + 1 ))
    done
    # A cycle through N groups that keeps each group together crosses exactly
    # N boundaries; any more means some host is entered twice.
    if [ ${#ranks[@]} != $world ] || [ $crossings != "$nhosts" ]; then
      fail "channel $ch ring [$order] crosses host boundaries $crossings times (want $nhosts, once into and out of each host)"
    else
      echo "ok: channel $ch ring [$order] enters and leaves each of the $nhosts hosts once:" \
           "$(grep -m1 -oE "channel $ch ring:.*" "$log0" | sed 's/.*(by host: /by host /; s/)$//')"
    fi
  done <<<"$rings"
  # Each rank's hop to its ring successor: socket between hosts, shm inside.
  for (( r = 0; r < world; r++ )); do
    while read -r ch prev me next transport; do
      want=shm
      [ "$(host_of "$me")" != "$(host_of "$next")" ] && want=socket
      [ "$transport" = "$want" ] || fail "rank $me channel $ch: hop to rank $next is over $transport, want $want"
    done < <(sed -nE 's/.*ring channel ([0-9]+): ([0-9]+) -> ([0-9]+) -> ([0-9]+) over ([a-z]+).*/\1 \2 \3 \4 \5/p' \
               "$HN_WORK/allreduce_ring.$r")
  done
fi
if [ -f "$HN_WORK/allreduce_tree.0" ]; then
  for t in 0 1; do
    inter=0 intra=0 roots=0
    for (( r = 0; r < world; r++ )); do
      parent=$(sed -nE "s/.*tree $t: parent (-?[0-9]+),.*/\1/p" "$HN_WORK/allreduce_tree.$r" | head -1)
      [ -n "$parent" ] || { fail "rank $r printed no 'tree $t' line"; continue; }
      if [ "$parent" = -1 ]; then roots=$(( roots + 1 ))
      elif [ "$(host_of "$parent")" = "$(host_of "$r")" ]; then intra=$(( intra + 1 ))
      else inter=$(( inter + 1 )); fi
    done
    # A tree over N hosts of `per` ranks: one root, N-1 links between hosts
    # (host heads), per-1 links inside each host (the chain).
    if [ $roots = 1 ] && [ $inter = $(( nhosts - 1 )) ] && [ $intra = $(( nhosts * (per - 1) )) ]; then
      echo "ok: tree $t spans $nhosts hosts: $inter links between hosts, $intra inside them, 1 root"
    else
      fail "tree $t: $roots root(s), $inter links between hosts (want $(( nhosts - 1 ))), $intra inside (want $(( nhosts * (per - 1) )))"
      grep -h "tree $t:" "$HN_WORK"/allreduce_tree.* | sed 's/^/  /'
    fi
  done
fi

[ $failures -eq 0 ] && echo "PASS: $world ranks on $nhosts hosts" || echo "FAILED: $failures check(s)"
exit $(( failures > 0 ))
