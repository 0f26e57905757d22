#!/usr/bin/env bash
# The cost of a prediction interval (issue 26 item 3, docs/predict.md "Intervals and sensitivity"): wall time
# of `vitsim predict` on one point with and without `--interval`, and their ratio (issue 37's target: at most
# 2x). A binary that has `--interval-mode` (issue 37) is also timed with `--interval-mode sampled` (every
# sample simulated, the interval before issue 37), on a second line. The point: bench/lib.sh's scaling point (ViT-B/16, micro-batch 64, fp32, ring, 20 steps) on
# NODES nodes of 8 T4s that `vitsim platform` writes from the catalogue (with its ranges).
# Usage: bench/interval_cost.sh [path/to/vitsim] [runs, default 3] [nodes..., default 1]
# VITSIM_BENCH_SMOKE=1: seconds (bench/lib.sh): 1 run of 1 node.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
vitsim=$(realpath "${1:-$here/build/app/vitsim}")
runs=${2:-3}
shift $(($# < 2 ? $# : 2))
nodes_list=("${@:-1}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$here/bench/lib.sh"
if [ "$smoke" = 1 ]; then runs=1 nodes_list=(1); fi

echo "vitsim predict --interval cost: $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "binary: $vitsim"
smoke_note "1 run of 1 node"
for nodes in "${nodes_list[@]}"; do
  "$vitsim" platform --id "bench$nodes" --nodes "$nodes" --gpus-per-node 8 --gpu t4 --precision fp32 \
    --intranode pcie_host --nic-speed 25gbe --cpu-cores 32 --out "$tmp/p$nodes.xml"
  scale_point "$tmp/s$nodes.xml" "$nodes" $((nodes * 8 * 64 * 20))
  figures=$(grep -c '\.range"' "$tmp/p$nodes.xml" || true)
  time_runs "$runs" "$vitsim" predict "$tmp/s$nodes.xml" -q
  plain=$(printf '%s\n' "${walls[@]}" | median)
  plain_cpu=$(printf '%s\n' "${cpus[@]}" | median)
  time_runs "$runs" "$vitsim" predict "$tmp/s$nodes.xml" -q --interval
  interval=$(printf '%s\n' "${walls[@]}" | median)
  interval_cpu=$(printf '%s\n' "${cpus[@]}" | median)
  printf '%4d nodes: %s range props; point %.2f s (cpu %.2f s), with --interval %.2f s (cpu %.2f s): %.1fx wall, %.1fx cpu\n' \
    "$nodes" "$figures" "$plain" "$plain_cpu" "$interval" "$interval_cpu" \
    "$(echo "$interval / $plain" | bc -l)" "$(echo "$interval_cpu / $plain_cpu" | bc -l)"
  if "$vitsim" predict --help | grep -q -- --interval-mode; then
    time_runs "$runs" "$vitsim" predict "$tmp/s$nodes.xml" -q --interval-mode sampled
    sampled=$(printf '%s\n' "${walls[@]}" | median)
    sampled_cpu=$(printf '%s\n' "${cpus[@]}" | median)
    printf '%4d nodes: with --interval-mode sampled %.2f s (cpu %.2f s): %.1fx wall, %.1fx cpu\n' \
      "$nodes" "$sampled" "$sampled_cpu" \
      "$(echo "$sampled / $plain" | bc -l)" "$(echo "$sampled_cpu / $plain_cpu" | bc -l)"
  fi
done
