#!/usr/bin/env bash
# Encrypted against clear socket traffic between two "hosts": network
# namespaces joined by a veth pair (no rate limit), one rank in each, the
# host-memory AllReduce benchmark run with GYRE_ENCRYPT=off and then with the
# default GYRE_ENCRYPT=auto (which encrypts connections between hosts),
# alternating REPEATS times. The benchmark meets at MASTER_ADDR:MASTER_PORT
# as NCCL_COMM_ID does, so its id has no random secret: the encrypted runs
# get a key file (GYRE_ENCRYPT_KEY_FILE), as such a job would. Both "hosts"
# share this machine's cores: the veth is a memory copy, so the run is bound
# by the CPU, which the cipher shares with everything else. Prints, per size, the median out-of-place busbw
# of each mode and their ratio: the table bench/perf_report reads (kind
# `encrypt`). Needs root and iproute2.
#
# usage: bench/encrypt_netns.sh BUILD_DIR [REPEATS] [extra all_reduce_perf args]
set -uo pipefail
build=${1:?usage: encrypt_netns.sh BUILD_DIR [REPEATS]}
repeats=${2:-3}
shift $(( $# >= 2 ? 2 : 1 ))
[ "$(id -u)" = 0 ] || { echo "needs root to create network namespaces" >&2; exit 77; }
tag=gyenc$$
ns_a=${tag}a ns_b=${tag}b
addr_a=10.232.$(( $$ % 200 )).1 addr_b=10.232.$(( $$ % 200 )).2
work=$(mktemp -d)
cleanup() {
  for ns in "$ns_a" "$ns_b"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null; done
  ip netns del "$ns_a" 2>/dev/null; ip netns del "$ns_b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns_a" && ip netns add "$ns_b" || exit 1
ip link add "${tag}x" type veth peer name "${tag}y" || exit 1
ip link set "${tag}x" netns "$ns_a" && ip link set "${tag}y" netns "$ns_b" || exit 1
ip -n "$ns_a" addr add "$addr_a/24" dev "${tag}x" && ip -n "$ns_b" addr add "$addr_b/24" dev "${tag}y" || exit 1
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "${tag}x" up && ip -n "$ns_b" link set "${tag}y" up || exit 1

head -c 32 /dev/urandom >"$work/key"
port=$(( 10000 + $$ % 19000 ))
args=(-b 1M -e 64M -f 2 -n 10 -w 3 -c 1 "$@")
# run MODE N: one AllReduce sweep, rank 0's output in $work/MODE.N
run() {
  port=$(( port + 1 ))
  local mode=(GYRE_ENCRYPT=off)
  [ "$1" = auto ] && mode=(GYRE_ENCRYPT=auto GYRE_ENCRYPT_KEY_FILE="$work/key")
  local common=(env NCCL_SOCKET_IFNAME="$tag" MASTER_ADDR="$addr_a" MASTER_PORT="$port" WORLD_SIZE=2
                "${mode[@]}" GYRE_INIT_TIMEOUT=30 GYRE_TIMEOUT=60 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT)
  ip netns exec "$ns_b" timeout 300 "${common[@]}" NCCL_HOSTID=hostb RANK=1 LOCAL_RANK=0 \
    "$build/bench/all_reduce_perf" "${args[@]}" >"$work/$1.$2.r1" 2>&1 &
  local pid=$!
  ip netns exec "$ns_a" timeout 300 "${common[@]}" NCCL_HOSTID=hosta RANK=0 LOCAL_RANK=0 \
    "$build/bench/all_reduce_perf" "${args[@]}" >"$work/$1.$2" 2>&1
  local rc=$?
  wait $pid
  if [ $rc -ne 0 ] || ! grep -q "Wrong elements       : 0 OK" "$work/$1.$2"; then
    echo "FAIL: GYRE_ENCRYPT=$1 run $2" >&2; tail -20 "$work/$1.$2" "$work/$1.$2.r1" >&2; exit 1
  fi
}
for (( i = 0; i < repeats; i++ )); do run off $i; run auto $i; done
if ! grep -q "encrypted and authenticated" "$work/auto.0"; then
  echo "FAIL: GYRE_ENCRYPT=auto did not encrypt the connection between the namespaces" >&2; exit 1
fi
python3 - "$work" "$repeats" <<'PY'
import re, statistics, sys
work, repeats = sys.argv[1], int(sys.argv[2])
def busbw(mode):
    per = {}
    for i in range(repeats):
        for line in open(f"{work}/{mode}.{i}"):
            f = line.split()
            # nccl-tests columns: size count type redop root time algbw busbw #wrong (out-of-place) ...
            if len(f) >= 9 and f[0].isdigit() and f[2] == "float":
                per.setdefault(int(f[0]), []).append(float(f[7]))
    return {s: statistics.median(v) for s, v in per.items()}
clear, enc = busbw("off"), busbw("auto")
print("# size_bytes clear_busbw_GBs encrypted_busbw_GBs encrypted/clear (medians of %d runs each)" % repeats)
for s in sorted(clear):
    print("%d %.3f %.3f %.2f" % (s, clear[s], enc[s], enc[s] / clear[s]))
PY
