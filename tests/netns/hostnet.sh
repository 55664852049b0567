# hostnet.sh — sourced by the multi-host scripts: N "hosts" as network
# namespaces on one bridge, and a torchrun-style launcher for ranks in them.
#
# The bridge lives in a namespace of its own (the "switch"), so nothing is
# added to the machine's own namespace and all traffic stays inside the
# namespaces made here. Each host namespace has one veth, "eth0", whose other
# end is a port of the bridge. Every namespace, and with it every veth and the
# bridge, is deleted by hostnet_cleanup (installed as an EXIT trap), even when
# the script fails half way.
#
# After hostnet_up N:
#   HN_NS[h]     namespace of host h        HN_ADDR[h]  its address on the bridge
#   HN_SWITCH    the switch namespace        HN_WORK     a scratch folder
# The hosts are told apart by NCCL_HOSTID=host<h> (namespaces share the
# machine's hostname and boot id, which gyre would otherwise treat as one host).

HN_TAG=gy$(( $$ % 100000 ))
HN_SWITCH=${HN_TAG}sw
HN_NS=()
HN_ADDR=()
HN_WORK=$(mktemp -d)
HN_PIDS=()

hostnet_skip() { echo "SKIP: $*"; exit 77; }

hostnet_cleanup() {
  local ns
  for ns in "${HN_NS[@]}" "$HN_SWITCH"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
  done
  for ns in "${HN_NS[@]}" "$HN_SWITCH"; do
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$HN_WORK"
}

# hostnet_check: exits 77 unless this process may make namespaces.
hostnet_check() {
  [ "$(id -u)" = 0 ] || hostnet_skip "needs root to create network namespaces"
  command -v ip >/dev/null || hostnet_skip "needs iproute2 (ip)"
}

# hostnet_up N: makes N host namespaces on a bridge; exits 77 if the kernel
# or container refuses namespaces, veths or bridges.
hostnet_up() {
  local n=$1 h net=$(( 1 + $$ % 250 ))
  trap hostnet_cleanup EXIT
  ip netns add "$HN_SWITCH" 2>/dev/null || hostnet_skip "ip netns add failed (no permission in this container?)"
  ip -n "$HN_SWITCH" link add br0 type bridge || hostnet_skip "cannot create a bridge"
  ip -n "$HN_SWITCH" link set br0 up
  for (( h = 0; h < n; h++ )); do
    HN_NS[h]=${HN_TAG}h$h
    HN_ADDR[h]=10.233.$net.$(( h + 1 ))
    ip netns add "${HN_NS[h]}" || return 1
    # Made in the switch namespace, then one end moved into the host.
    ip -n "$HN_SWITCH" link add "p$h" type veth peer name "e$h" || hostnet_skip "cannot create a veth pair"
    ip -n "$HN_SWITCH" link set "e$h" netns "${HN_NS[h]}" || return 1
    ip -n "${HN_NS[h]}" link set "e$h" name eth0 || return 1
    ip -n "$HN_SWITCH" link set "p$h" master br0 up || return 1
    ip -n "${HN_NS[h]}" addr add "${HN_ADDR[h]}/24" dev eth0 || return 1
    ip -n "${HN_NS[h]}" link set lo up
    ip -n "${HN_NS[h]}" link set eth0 up || return 1
  done
  # A bridge port forwards once it leaves the learning state (immediately
  # with STP off, the default); wait for every port, bounded at 5 s. (ping
  # is not installed everywhere, so the port state is what is read.)
  local tries
  for (( h = 0; h < n; h++ )); do
    tries=0
    until ip -n "$HN_SWITCH" -d link show dev "p$h" | grep -q "state forwarding"; do
      tries=$(( tries + 1 ))
      [ $tries -ge 50 ] && { echo "bridge port of host $h never forwards"; return 1; }
      sleep 0.1
    done
  done
}

# hostnet_launch NAME NHOSTS PER_HOST TIMEOUT_S PORT CMD...: starts PER_HOST
# ranks in each host namespace the way torchrun would (RANK, WORLD_SIZE,
# LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), rank r's output in
# $HN_WORK/NAME.r, each bounded by `timeout`. Extra variables come from the
# caller's environment (export them before). Sets HN_PIDS (by rank).
# Ranks go to hosts in blocks (host h: ranks h*PER ...), or round robin
# (host h: ranks h, h+N, ...) with HN_PLACE=cyclic: then rank order says
# nothing about hosts, and only gyre's host-aware ring search keeps each
# host's ranks together in a ring.
hostnet_launch() {
  local name=$1 nhosts=$2 per=$3 limit=$4 port=$5; shift 5
  local world=$(( nhosts * per )) h l r
  HN_PIDS=()
  for (( h = 0; h < nhosts; h++ )); do
    for (( l = 0; l < per; l++ )); do
      r=$(( h * per + l ))
      [ "${HN_PLACE:-block}" = cyclic ] && r=$(( l * nhosts + h ))
      # The rank's exit time goes to NAME.r.end (for the time to an error).
      ( ip netns exec "${HN_NS[h]}" timeout -s KILL "$limit" env NCCL_HOSTID="host$h" NCCL_SOCKET_IFNAME=eth0 \
          MASTER_ADDR="${HN_ADDR[0]}" MASTER_PORT="$port" WORLD_SIZE="$world" RANK="$r" \
          LOCAL_RANK="$l" LOCAL_WORLD_SIZE="$per" "$@" >"$HN_WORK/$name.$r" 2>&1
        rc=$?; date +%s.%N >"$HN_WORK/$name.$r.end"; exit $rc ) &
      HN_PIDS[r]=$!
    done
  done
}

# hostnet_wait: waits for the ranks of the last launch and sets HN_CODES to
# their exit codes (by rank, space-separated). Not to be called in $(...): a
# subshell cannot wait for the script's children.
hostnet_wait() {
  local codes=() r
  for r in "${!HN_PIDS[@]}"; do
    wait "${HN_PIDS[r]}"
    codes[r]=$?
  done
  HN_CODES="${codes[*]}"
}
