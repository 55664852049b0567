#!/usr/bin/env bash
# AllReduce busbw between namespaced hosts (tests/netns/hostnet.sh), 2 ranks
# per host, with and without a token-bucket (tbf) rate limit on every host's
# link, and with added delay where the kernel has a delay qdisc (netem).
# A measurement, not a test: it prints a table and asserts nothing (every
# run still checks its results, -c 1).
#
# usage: busbw.sh BUILD_DIR [NHOSTS...] [RATE]     e.g. busbw.sh build 2 4
#   RATE: the tbf rate (default 1gbit); sizes 64 KiB .. 16 MiB.
set -uo pipefail
build=${1:?usage: busbw.sh BUILD_DIR [NHOSTS...]}
shift
hosts_list=("${@:-2 4}")
read -ra hosts_list <<<"${hosts_list[*]}"
rate=${RATE:-1gbit}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hostnet.sh
. "$here/hostnet.sh"
hostnet_check
max=0
for n in "${hosts_list[@]}"; do [ "$n" -gt $max ] && max=$n; done
hostnet_up "$max" || { echo "could not build $max hosts"; exit 1; }
export GYRE_INIT_TIMEOUT=30 GYRE_TIMEOUT=60
port=$(( 13000 + $$ % 19000 ))  # below the ephemeral range (32768+): see hosts.sh

# shape MODE: none | tbf | delay, on every host's eth0 (egress, so each
# direction of a link is shaped once, by its sender).
shape() {
  local h
  for (( h = 0; h < max; h++ )); do
    tc -n "${HN_NS[h]}" qdisc del dev eth0 root 2>/dev/null
    case $1 in
      tbf) tc -n "${HN_NS[h]}" qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 50ms || return 1 ;;
      delay) tc -n "${HN_NS[h]}" qdisc add dev eth0 root netem delay 1ms 2>/dev/null || return 1 ;;
    esac
  done
}

# run NHOSTS: prints "size busbw" lines of the out-of-place AllReduce.
run() {
  port=$(( port + 1 ))
  hostnet_launch bw "$1" 2 300 $port "$build/bench/all_reduce_perf" -b 64K -e 16M -f 4 -n 5 -w 2 -c 1
  hostnet_wait
  [ "$HN_CODES" = "$(printf '0 %.0s' $(seq 1 $(( $1 * 2 ))) | sed 's/ $//')" ] || { echo "  run failed: $HN_CODES"; tail -3 "$HN_WORK/bw.0"; return 1; }
  grep -E '^ +[0-9]+ ' "$HN_WORK/bw.0" | awk '{ printf "%10s %8s\n", $1, $8 }'
}

echo "# AllReduce busbw (GB/s, out-of-place), 2 ranks per host; intra-host: shm, between hosts: socket over veth + bridge"
echo "# command: tests/netns/busbw.sh $build ${hosts_list[*]}  (RATE=$rate)"
for n in "${hosts_list[@]}"; do
  for mode in none tbf delay; do
    if ! shape $mode; then
      echo "== $n hosts x 2 ranks, $mode: no such qdisc on this kernel ($(uname -r)); not measured"
      continue
    fi
    label=$mode
    [ $mode = tbf ] && label="tbf rate $rate per host link"
    [ $mode = delay ] && label="netem delay 1 ms"
    echo "== $n hosts x 2 ranks, $label"
    echo "      size    busbw"
    run "$n"
  done
  shape none
done
