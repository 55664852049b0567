#!/usr/bin/env bash
# Two "hosts" (network namespaces joined by a veth pair) whose ranks share a
# unique id from ncclGetUniqueId: with no setting at all (GYRE_ENCRYPT=auto),
# their connections are encrypted (the INFO line says so on both), and the
# AllReduce is exact. Skipped (exit 77) without root or iproute2.
#
# usage: encrypted_hosts.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: encrypted_hosts.sh BUILD_DIR}
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "needs iproute2 (ip)"
tag=gyen$$
ns_a=${tag}a ns_b=${tag}b
addr_a=10.235.$(( $$ % 200 )).1 addr_b=10.235.$(( $$ % 200 )).2
work=$(mktemp -d)
cleanup() {
  for ns in "$ns_a" "$ns_b"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null; done
  ip netns del "$ns_a" 2>/dev/null; ip netns del "$ns_b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns_a" && ip netns add "$ns_b" || skip "ip netns add failed (no permission in this container?)"
ip link add "${tag}x" type veth peer name "${tag}y" || skip "cannot create a veth pair"
ip link set "${tag}x" netns "$ns_a" && ip link set "${tag}y" netns "$ns_b" || exit 1
ip -n "$ns_a" addr add "$addr_a/24" dev "${tag}x" && ip -n "$ns_b" addr add "$addr_b/24" dev "${tag}y" || exit 1
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "${tag}x" up && ip -n "$ns_b" link set "${tag}y" up || exit 1

common=(env -u GYRE_ENCRYPT -u GYRE_ENCRYPT_KEY_FILE NCCL_SOCKET_IFNAME="$tag" GYRE_INIT_TIMEOUT=20
        GYRE_TIMEOUT=20 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT)
ip netns exec "$ns_a" timeout 60 "${common[@]}" NCCL_HOSTID=hosta "$build/tests/id_file_allreduce" 0 \
  "$work/id" >"$work/r0" 2>&1 &
pid=$!
ip netns exec "$ns_b" timeout 60 "${common[@]}" NCCL_HOSTID=hostb "$build/tests/id_file_allreduce" 1 \
  "$work/id" >"$work/r1" 2>&1
rc1=$?
wait $pid
rc0=$?
failed=0
for r in 0 1; do
  if ! grep -q "rank $r: 0 wrong" "$work/r$r"; then echo "FAIL: rank $r was not exact"; failed=1; fi
  if ! grep -q "GYRE_ENCRYPT=auto: socket connections between hosts are encrypted" "$work/r$r"; then
    echo "FAIL: rank $r did not encrypt its connections to the other host"; failed=1
  fi
done
if [ $failed -ne 0 ] || [ $rc0 -ne 0 ] || [ $rc1 -ne 0 ]; then
  echo "exit codes $rc0 / $rc1"; tail -n 20 "$work/r0" "$work/r1"; exit 1
fi
echo "ok: two hosts encrypted by default, AllReduce exact"
