#!/usr/bin/env bash
# Wall time and peak memory of `vitsim predict` for one point at 8, 64, 256, 1024 and 4096 GPUs
# (8 T4s per node, Vector's figures), 20 simulated steps (2 warm-up), and for every shipped study scenario.
# Usage: bench/predict_scale.sh [path/to/vitsim] [runs per point, default 3]
# Prints one line per case: the median wall time over the runs and the largest peak RSS seen.
# VITSIM_BENCH_SMOKE=1: seconds (bench/lib.sh): 1 run, 8 GPUs and one study scenario.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
vitsim=$(realpath "${1:-$here/build/app/vitsim}")
runs=${2:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$here/bench/lib.sh"
sizes=(1 8 32 128 512)
studies=("$here"/scenarios/study/*.xml)
if [ "$smoke" = 1 ]; then runs=1 sizes=(1) studies=("${studies[0]}"); fi

# measure LABEL CMD...: runs CMD `runs` times under /usr/bin/time.
measure() {
  local label=$1
  shift
  time_runs "$runs" "$@"
  printf '%-40s median %6.2f s  (runs: %s)  peak RSS %6.0f MiB\n' "$label" \
    "$(printf '%s\n' "${walls[@]}" | median)" "${walls[*]}" "$((rss / 1024))"
}

echo "vitsim predict scaling benchmark: $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname), $(nproc) cores"
echo "binary: $vitsim"
smoke_note "1 run, 8 GPUs, one study scenario"
for nodes in "${sizes[@]}"; do
  # Vector's nodes (8 T4s, host-staged, 25 GbE over NCCL sockets), $nodes of them.
  "$vitsim" platform --id "bench$nodes" --nodes "$nodes" --gpus-per-node 8 --gpu t4 --precision fp32 \
    --intranode pcie_host --nic-speed 25gbe --cpu-cores 32 --out "$tmp/p$nodes.xml"
  # A synthetic set large enough that every size runs 20 steps (4096 GPUs x 64 x 20 = 5.2 M samples).
  scale_point "$tmp/s$nodes.xml" "$nodes" 30000000
  measure "$((nodes * 8)) GPUs ($nodes nodes), 20 steps" "$vitsim" predict "$tmp/s$nodes.xml" -q -j1
done
for s in "${studies[@]}"; do
  measure "study/$(basename "$s")" "$vitsim" predict "$s" -q
done
