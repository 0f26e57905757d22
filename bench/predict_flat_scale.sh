#!/usr/bin/env bash
# Cost of one predicted point against GPU count on flat-star platforms (issue 14, item 3): ViT-B/16,
# micro-batch 64, fp32, ring all-reduce, 8 T4s per node with Vector's figures (host-staged GPU<->GPU, one
# 25 GbE NIC over NCCL sockets), 20 simulated steps (2 warm-up), one process (-j1), at 512, 4,096, 16,384,
# 65,536 and 131,072 GPUs. Each size's platform is written by `vitsim platform --layout flat-star`.
# Usage: bench/predict_flat_scale.sh [path/to/vitsim] [runs per point, default 3] [largest node count, default 16384]
# Prints per size the median wall time, the median user+system CPU time, the largest peak RSS, the platform
# file's size, and the load average before the size's runs (the machine is shared).
# VITSIM_BENCH_SMOKE=1: seconds (bench/lib.sh): 1 run of the smallest size (512 GPUs).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
vitsim=$(realpath "${1:-$here/build/app/vitsim}")
runs=${2:-3}
largest=${3:-16384}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$here/bench/lib.sh"
if [ "$smoke" = 1 ]; then runs=1 largest=64; fi

echo "vitsim predict flat-star scaling: $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
echo "binary: $vitsim${VITSIM_BENCH_FLOWS:+ (simulation.flows=$VITSIM_BENCH_FLOWS)}"
# VITSIM_BENCH_MAX_MEMORY=SIZE raises the size guard (simulation.max_memory) where it refuses a point.
extra=()
[[ -n "${VITSIM_BENCH_MAX_MEMORY:-}" ]] && extra=(--set "simulation.max_memory=$VITSIM_BENCH_MAX_MEMORY")
# VITSIM_BENCH_FLOWS=always makes every transfer a SimGrid flow (simulation.flows; default auto: a lone ring
# is computed without them).
[[ -n "${VITSIM_BENCH_FLOWS:-}" ]] && extra+=(--set "simulation.flows=$VITSIM_BENCH_FLOWS")
# VITSIM_BENCH_NODE=h100 makes each node 8 H100 SXM with 8 NDR NICs (issue 25's realistic node) instead of
# Vector's T4s; VITSIM_BENCH_COLLECTIVE=auto runs NCCL's choice instead of the flat ring.
echo "node: ${VITSIM_BENCH_NODE:-t4}, collective: ${VITSIM_BENCH_COLLECTIVE:-ring}"
smoke_note "1 run of 512 GPUs"
for nodes in 64 512 2048 8192 16384; do
  ((nodes > largest)) && break
  if [[ "${VITSIM_BENCH_NODE:-t4}" == h100 ]]; then
    "$vitsim" platform --id "bench$nodes" --nodes "$nodes" --gpus-per-node 8 --gpu h100-sxm --precision fp32 \
      --nics 8 --nic-speed ndr --layout flat-star --out "$tmp/p$nodes.xml"
  else
    "$vitsim" platform --id "bench$nodes" --nodes "$nodes" --gpus-per-node 8 --gpu t4 --precision fp32 \
      --intranode pcie_host --nic-speed 25gbe --cpu-cores 32 --layout flat-star --out "$tmp/p$nodes.xml"
  fi
  # 131,072 GPUs x 64 x 20 steps = 168 M samples: the synthetic set holds 200 M.
  scale_point "$tmp/s$nodes.xml" "$nodes" 200000000
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  time_runs "$runs" "$vitsim" predict "$tmp/s$nodes.xml" -q -j1 "${extra[@]}"
  printf '%6d GPUs (%5d nodes): wall median %7.2f s (runs: %s), CPU median %7.2f s, peak RSS %6.0f MiB, file %5.1f MiB, load %s\n' \
    "$((nodes * 8))" "$nodes" "$(printf '%s\n' "${walls[@]}" | median)" "${walls[*]}" \
    "$(printf '%s\n' "${cpus[@]}" | median)" "$((rss / 1024))" "$(echo "scale=1; $(stat -c %s "$tmp/p$nodes.xml") / 1048576" | bc)" "$load"
done
