#!/usr/bin/env bash
# Two "hosts" on one machine: network namespaces joined by a veth pair, with
# netem adding latency and a rate limit, and the perf binaries launched in each
# the way torchrun would (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). Checks
# that init finds two hosts (so the ranks talk over the socket transport, not
# shared memory), that every collective's result is right (-c 1: 0 wrong), and
# that a rank whose peer's link disappears fails with an error instead of hanging.
#
# Needs root and iproute2 (ip netns, tc); without them it reports itself skipped
# (exit 77, which meson shows as SKIP).
#
# usage: two_hosts.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: two_hosts.sh BUILD_DIR}
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null && command -v tc >/dev/null || skip "needs iproute2 (ip, tc)"

tag=gyre$$
ns_a=${tag}a ns_b=${tag}b
addr_a=10.231.$(( $$ % 200 )).1 addr_b=10.231.$(( $$ % 200 )).2
work=$(mktemp -d)
cleanup() {
  ip netns pids "$ns_a" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns pids "$ns_b" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$ns_a" && ip netns add "$ns_b" || skip "ip netns add failed (no permission in this container?)"
ip link add "${tag}x" type veth peer name "${tag}y" || skip "cannot create a veth pair"
ip link set "${tag}x" netns "$ns_a" && ip link set "${tag}y" netns "$ns_b" || exit 1
ip -n "$ns_a" addr add "$addr_a/24" dev "${tag}x" && ip -n "$ns_b" addr add "$addr_b/24" dev "${tag}y" || exit 1
for ns in "$ns_a" "$ns_b"; do
  ip -n "$ns" link set lo up
done
ip -n "$ns_a" link set "${tag}x" up && ip -n "$ns_b" link set "${tag}y" up || exit 1
# 1 ms each way and 1 Gbit/s: a slow network, so the planner's two hosts are real.
tc -n "$ns_a" qdisc add dev "${tag}x" root netem delay 1ms rate 1gbit 2>/dev/null ||
  echo "note: tc netem unavailable, running without latency"
tc -n "$ns_b" qdisc add dev "${tag}y" root netem delay 1ms rate 1gbit 2>/dev/null || true

failures=0
port=$(( 10000 + $$ % 19000 ))  # below the ephemeral range (32768+): see hosts.sh
# run_pair NAME BINARY ARGS...: rank 0 in ns_a, rank 1 in ns_b; both must exit 0
# within the time limit with "# Wrong elements       : 0 OK".
run_pair() {
  local name=$1; shift
  port=$(( port + 1 ))
  local common=(env NCCL_SOCKET_IFNAME="$tag" MASTER_ADDR="$addr_a" MASTER_PORT="$port" WORLD_SIZE=2
                GYRE_INIT_TIMEOUT=20 GYRE_TIMEOUT=20 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH)
  ip netns exec "$ns_a" timeout 60 "${common[@]}" RANK=0 LOCAL_RANK=0 "$@" >"$work/$name.0" 2>&1 &
  local pid_a=$!
  ip netns exec "$ns_b" timeout 60 "${common[@]}" RANK=1 LOCAL_RANK=0 "$@" >"$work/$name.1" 2>&1
  local rc_b=$?
  wait "$pid_a"
  local rc_a=$?
  if [ $rc_a -ne 0 ] || [ $rc_b -ne 0 ] || ! grep -q "Wrong elements       : 0 OK" "$work/$name.0"; then
    echo "FAIL: $name (exit $rc_a / $rc_b)"; tail -n 20 "$work/$name.0" "$work/$name.1"; failures=$((failures + 1))
    return
  fi
  if ! grep -q "over 2 host(s)" "$work/$name.0" || ! grep -q "over socket" "$work/$name.0"; then
    echo "FAIL: $name did not plan two hosts over the socket transport"; grep -E "GRAPH|ring channel" "$work/$name.0"
    failures=$((failures + 1))
    return
  fi
  echo "ok: $name"; grep -E "^ +[0-9]+ " "$work/$name.0" | tail -3
}

run_pair allreduce "$build/bench/all_reduce_perf" -b 8 -e 4M -f 8 -n 5 -w 1 -c 1
run_pair allgather "$build/bench/all_gather_perf" -b 8 -e 1M -f 16 -n 3 -w 1 -c 1
run_pair reduce_scatter "$build/bench/reduce_scatter_perf" -b 8 -e 1M -f 16 -n 3 -w 1 -c 1
run_pair broadcast "$build/bench/broadcast_perf" -b 8 -e 1M -f 16 -n 3 -w 1 -c 1 -r 1
NCCL_SOCKET_NTHREADS=2 NCCL_NSOCKS_PERTHREAD=2 run_pair allreduce_4sockets "$build/bench/all_reduce_perf" -b 1M -e 8M -f 8 -n 3 -w 1 -c 1

# A peer that vanishes: rank 1's link goes down mid-run; rank 0 must fail with
# an error naming its peer within GYRE_TIMEOUT, not hang.
port=$(( port + 1 ))
ip netns exec "$ns_a" timeout 90 env NCCL_SOCKET_IFNAME="$tag" MASTER_ADDR="$addr_a" MASTER_PORT="$port" \
  WORLD_SIZE=2 RANK=0 GYRE_TIMEOUT=5 "$build/bench/all_reduce_perf" -b 64M -e 64M -n 100000 -w 0 -c 0 \
  >"$work/cut.0" 2>&1 &
pid_a=$!
ip netns exec "$ns_b" timeout 90 env NCCL_SOCKET_IFNAME="$tag" MASTER_ADDR="$addr_a" MASTER_PORT="$port" \
  WORLD_SIZE=2 RANK=1 GYRE_TIMEOUT=5 "$build/bench/all_reduce_perf" -b 64M -e 64M -n 100000 -w 0 -c 0 \
  >"$work/cut.1" 2>&1 &
pid_b=$!
sleep 3
ip -n "$ns_b" link set "${tag}y" down
start=$(date +%s)
wait "$pid_a"; rc_a=$?
elapsed=$(( $(date +%s) - start ))
kill -9 "$pid_b" 2>/dev/null; wait "$pid_b" 2>/dev/null
if [ $rc_a -eq 0 ] || [ $rc_a -eq 124 ] || ! grep -qi "rank 1" "$work/cut.0"; then
  echo "FAIL: link cut: rank 0 exit $rc_a after ${elapsed}s"; tail -n 5 "$work/cut.0"; failures=$((failures + 1))
else
  echo "ok: link cut fails rank 0 in ${elapsed}s: $(grep -i "rank 1" "$work/cut.0" | head -1)"
fi

[ $failures -eq 0 ] && echo "PASS: two network namespaces" || echo "FAILED: $failures check(s)"
exit $(( failures > 0 ))
