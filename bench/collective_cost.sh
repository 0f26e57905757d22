#!/usr/bin/env bash
# The cost of `vitsim collective` (issue 39 item 2; sim/src/predict/collective_bench.cpp kBytesPerFlow and
# kCpuSecondsPerFlowSquared): peak resident memory and user CPU time of one alltoall size (1 MiB) on NODES
# nodes of 8 H100s (NDR NICs), per transfer in flight (ranks x (ranks - 1)), beside the estimate vitsim
# refuses by (--max-memory). Needs GNU time (/usr/bin/time).
# Usage: bench/collective_cost.sh [path/to/vitsim] [nodes..., default 8 16 32]
# VITSIM_BENCH_SMOKE=1: seconds (bench/lib.sh): 2 nodes.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
vitsim=$(realpath "${1:-$here/build/app/vitsim}")
shift $(($# < 1 ? $# : 1))
nodes_list=("$@")
[ ${#nodes_list[@]} -gt 0 ] || nodes_list=(8 16 32)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$here/bench/lib.sh"
if [ "$smoke" = 1 ]; then nodes_list=(2); fi

echo "vitsim collective cost: $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "binary: $vitsim"
smoke_note "2 nodes"
for nodes in "${nodes_list[@]}"; do
  "$vitsim" platform --nodes "$nodes" --gpus-per-node 8 --gpu h100-sxm --nic-speed ndr --out "$tmp/p$nodes.xml"
  /usr/bin/time -f '%M %U' -o "$tmp/t" "$vitsim" collective "$tmp/p$nodes.xml" --func alltoall -b 1M -e 1M -q \
    --max-memory 1TiB >/dev/null
  read -r rss_kib user_s <"$tmp/t"
  ranks=$((nodes * 8))
  flows=$((ranks * (ranks - 1)))
  printf '%4d ranks: %8d flows, peak memory %.1f MB (%.0f B a flow), CPU %.2f s (%.3g s per flow^2)\n' \
    "$ranks" "$flows" "$(echo "$rss_kib / 1000" | bc -l)" "$(echo "$rss_kib * 1024 / $flows" | bc -l)" \
    "$user_s" "$(echo "$user_s / ($flows * $flows)" | bc -l)"
done
