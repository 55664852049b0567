#!/usr/bin/env bash
# Checks what gyre's libnccl.so.2 and libgyre.so export against the headers:
#   - libnccl.so.2's soname is libnccl.so.2 and its file is libnccl.so.2.X.Y.Z
#     for the NCCL API version gyre.h declares;
#   - every function NCCL's nccl.h declares (nccl* and pnccl*) is exported;
#   - nothing else is, but the functions gyre.h declares (gyre* extensions,
#     NCCL functions of other NCCL headers such as ncclDevCommCreate) and the
#     pnccl* aliases of its nccl* ones: no C++ or runtime internals;
#   - libgyre.so exports the same list.
#
# usage: exports_match_header.sh LIBNCCL LIBGYRE NCCL_H GYRE_H
set -uo pipefail
libnccl=${1:?} libgyre=${2:?} nccl_h=${3:?} gyre_h=${4:?}
here=$(dirname "$0")
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

soname=$(readelf -d "$libnccl" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libnccl.so.2 ] || fail "soname is '$soname', not libnccl.so.2"
api=$(awk '/#define NCCL_(MAJOR|MINOR|PATCH) /{v[$2]=$3} END{print v["NCCL_MAJOR"]"."v["NCCL_MINOR"]"."v["NCCL_PATCH"]}' "$gyre_h")
real=$(basename "$(readlink -f "$libnccl")")
[ "$real" = "libnccl.so.$api" ] || fail "the library file is $real, not libnccl.so.$api"

exported() { nm -D --defined-only "$1" | awk '{print $3}' | sed 's/@.*//' | sort -u; }
declared=$(python3 "$here/header_functions.py" "$nccl_h") || { fail "cannot read $nccl_h"; exit 1; }
documented=$(python3 "$here/header_functions.py" "$gyre_h" --no-profiling) || { fail "cannot read $gyre_h"; exit 1; }
allowed=$( { echo "$declared"; echo "$documented"; grep '^nccl' <<<"$documented" | sed 's/^/p/'; } | sort -u)
ours=$(exported "$libnccl")

missing=$(comm -23 <(echo "$declared") <(echo "$ours"))
for name in $missing; do fail "NCCL's nccl.h declares $name, libnccl.so.2 does not export it"; done
unexpected=$(comm -13 <(echo "$allowed") <(echo "$ours"))
for name in $unexpected; do fail "libnccl.so.2 exports $name, which no header declares"; done
if [ "$(exported "$libgyre")" != "$ours" ]; then
  fail "libgyre.so and libnccl.so.2 export different lists:"
  diff <(exported "$libgyre") <(echo "$ours")
fi

extras=$(comm -13 <(echo "$declared") <(echo "$ours") | tr '\n' ' ')
echo "libnccl.so.2 ($real): $(wc -l <<<"$ours") symbols exported; $(wc -l <<<"$declared") declared by $nccl_h, all present"
echo "exported beyond NCCL's nccl.h (declared in gyre.h): ${extras:-none}"
[ $failures -eq 0 ] && echo PASS
exit $(( failures > 0 ))
