#!/usr/bin/env bash
# Checks that libnccl.so.2 exports, and include/gyre.h declares, every
# function of a list kept in the repository (one name a line, # comments),
# each with its pnccl* profiling alias: a function of a newer NCCL that gyre
# lacks fails here by name, whether or not NVIDIA's header is installed.
#
# usage: exports_cover_list.sh LIBNCCL GYRE_H LIST
set -uo pipefail
libnccl=${1:?} gyre_h=${2:?} list=${3:?}
here=$(dirname "$0")
exported=$(nm -D --defined-only "$libnccl" | awk '{print $3}' | sed 's/@.*//' | sort -u)
declared=$(python3 "$here/header_functions.py" "$gyre_h" --no-profiling)
failures=0 count=0
while read -r name; do
  case "$name" in ''|'#'*) continue ;; esac
  count=$((count + 1))
  grep -qx "$name" <<<"$exported" || { echo "FAIL: libnccl.so.2 does not export $name"; failures=$((failures + 1)); }
  grep -qx "p$name" <<<"$exported" || { echo "FAIL: libnccl.so.2 does not export p$name"; failures=$((failures + 1)); }
  grep -qx "$name" <<<"$declared" || { echo "FAIL: include/gyre.h does not declare $name"; failures=$((failures + 1)); }
done < "$list"
echo "$count functions of $(basename "$list") checked, $failures missing"
[ $count -ge 70 ] || { echo "FAIL: the list has only $count names"; failures=$((failures + 1)); }
[ $failures -eq 0 ] && echo PASS
exit $(( failures > 0 ))
