#!/usr/bin/env bash
# The cost of `vitsim fit` (issue 26 item 4, docs/fit.md) on simulated measurements: the shipped H100 example
# (scenarios/examples/vit-l16-384.xml on platforms/h100-16x8-ndr.xml) measured on a "true" copy of its platform
# whose assumed per-op costs differ from the stated ones (host_op_overhead 6us for 10us, gpu_kernel_overhead
# 3.5us for 2us, gpu_sync_overhead 25us for 10us: all within their ranges), then fitted from the stated
# platform. Prints per case the N configurations, the K figures fitted, the simulations, wall and CPU time
# (medians of RUNS), the rms error before and after and the leave-one-out rms; and the time of `predict` on the
# same N points as the yardstick.
# Usage: bench/fit_cost.sh [path/to/vitsim] [runs, default 1]
# VITSIM_BENCH_SMOKE=1: seconds (bench/lib.sh): one case of 2 configurations, one run.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
vitsim=$(realpath "${1:-$here/build/app/vitsim}")
runs=${2:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$here/bench/lib.sh"

scenario=$here/scenarios/examples/vit-l16-384.xml
sed 's/host_op_overhead" value="10us"/host_op_overhead" value="6us"/; s/gpu_kernel_overhead" value="2us"/gpu_kernel_overhead" value="3.5us"/; s/gpu_sync_overhead" value="10us"/gpu_sync_overhead" value="25us"/' \
  "$here/platforms/h100-16x8-ndr.xml" >"$tmp/true.xml"

# measured NODES MICRO_BATCHES: a CSV of the true platform's step times at those points.
measured() {
  "$vitsim" predict "$scenario" -q --set cluster.platform="$tmp/true.xml" --set cluster.nodes="$1" \
    --set training.micro_batch="$2" --format csv |
    python3 -c '
import csv, sys
rows = list(csv.DictReader(sys.stdin))
print("cluster.nodes,training.micro_batch,step_time_s")
for r in rows: print(r["cluster.nodes"] + "," + r["training.micro_batch"] + "," + r["step_mean_s"])'
}

echo "vitsim fit cost: $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "binary: $vitsim ($(git -C "$here" rev-parse --short HEAD))"
printf '%-3s %-38s %-3s %6s %9s %9s %9s %9s %9s %11s\n' N free K sims wall_s cpu_s predict_s stated fitted left-out
case_line() {  # NODES MBS FREE
  local nodes=$1 mbs=$2 free=$3 n k sims rms
  measured "$nodes" "$mbs" >"$tmp/m.csv"
  n=$(($(wc -l <"$tmp/m.csv") - 1))
  time_runs "$runs" "$vitsim" predict "$scenario" -q --set cluster.nodes="$nodes" --set training.micro_batch="$mbs"
  local predict_wall
  predict_wall=$(printf '%s\n' "${walls[@]}" | median)
  local args=(fit "$scenario" --measured "$tmp/m.csv" --out "$tmp/fitted.xml" -q --format json)
  if [ "$free" != default ]; then args+=(--free "$free"); fi
  time_runs "$runs" "$vitsim" "${args[@]}"
  "$vitsim" "${args[@]}" >"$tmp/r.json"
  read -r k sims rms < <(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
loo = j["rms_left_out"]
print(len(j["figures"]), j["simulations"],
      "%.2f%% %.2f%% %s" % (100 * j["rms_stated"], 100 * j["rms_fitted"], "-" if loo is None else "%.2f%%" % (100 * loo)))' "$tmp/r.json")
  printf '%-3s %-38s %-3s %6s %9.2f %9.2f %9.2f %s\n' "$n" "$free" "$k" "$sims" \
    "$(printf '%s\n' "${walls[@]}" | median)" "$(printf '%s\n' "${cpus[@]}" | median)" "$predict_wall" "$rms"
}
if [ "$smoke" = 1 ]; then
  smoke_note "one case: 2 configurations (1 node; micro-batch 8, 32), one run"
  case_line 1 8,32 default
  exit 0
fi
case_line 1 8,32,128 default
case_line 1,2 8,32,128 default
case_line 1,2 8,32,128 host_op_overhead,gpu_gemm_efficiency
case_line 1,2,4 8,16,32,64,128 default
