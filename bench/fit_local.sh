#!/usr/bin/env bash
# `vitsim fit` on the one set where the whole loop runs here (issue 26 item 5): the local validation set's
# measured step times (bench/data/local/validate_local_D.csv: 1 and 2 CPU ranks x micro-batch 64 and 256,
# 3 runs each, from repeat D of docs/benchmarks.md "Validation on this machine"), fitted on two configurations
# and predicted on the other two, from the uncalibrated platform platforms/local/this-machine.xml (its
# figures are ASSUMPTIONs: 50 GFLOP/s at efficiency 0.5, no per-op host cost). The fitted platform is a copy
# with ranges beside the figures (written below, each an ASSUMPTION: the fit needs a range to move a figure)
# and host_op_overhead stated at 10 us (the ASSUMPTION the catalogue's GPUs carry). gpu_efficiency gets no range:
# it multiplies the peak, so no measurement tells the two apart (fit would leave it, collinear); the peak's
# range carries that uncertainty.
# Prints per split the figure the fit chose, its value and 1-sigma, the fitted configurations' residuals and
# the held-out configurations' errors (against the mean of their 3 runs), and the held-out MAPE; and
# whether each measured mean lies inside the p10-p90 interval `predict --interval` gives on the fitted platform
# (its range: the fit's 2-sigma span).
# Usage: bench/fit_local.sh [path/to/vitsim]
# VITSIM_BENCH_SMOKE=1 (bench/lib.sh): the same (it takes about a second).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
vitsim=$(realpath "${1:-$here/build/app/vitsim}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/bench/lib.sh"
smoke_note "the whole script (one second)"

scenario=$here/scenarios/local/validate-homog.xml
data=$here/bench/data/local/validate_local_D.csv
ranges='      <prop id="host_op_overhead" value="10us"/>\
      <prop id="gpu_flops_fp32.range" value="20Gf..4Tf; ASSUMPTION: unknown (the op-level model lumps what a CPU rank reaches into this figure), a span wide enough for the fit to find it; vitsim calibrate replaces it"/>\
      <prop id="gpu_mem_bw.range" value="5GBps..50GBps; ASSUMPTION: a share of a socket DRAM bandwidth; vitsim calibrate replaces it"/>\
      <prop id="host_op_overhead.range" value="1us..50us; ASSUMPTION: LibTorch dispatch per op on this CPU; vitsim calibrate replaces it"/>'
sed "s|      <prop id=\"device_kind\" value=\"cpu\"/>|&\n$ranges|" "$here/platforms/local/this-machine.xml" >"$tmp/p.xml"

# The measured means, one row per configuration: ranks,micro_batch,step_time_s.
python3 - "$data" >"$tmp/means.csv" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if not l.startswith("#"))][1:]
runs = {}
for ranks, mb, _, t in rows:
    runs.setdefault((int(ranks), int(mb)), []).append(float(t))
for (ranks, mb), ts in sorted(runs.items()):
    print(f"{ranks},{mb},{statistics.mean(ts):.9f}")
PY

echo "vitsim fit on the local set: $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "binary: $vitsim ($(git -C "$here" rev-parse --short HEAD)); measured: ${data#"$here"/}"
"$vitsim" predict "$scenario" -q --set cluster.platform="$tmp/p.xml" --format csv >"$tmp/stated.csv"

# split NAME "R,MB R,MB": fit on those two configurations, predict all four.
split() {
  local name=$1 fitted=$2
  python3 - "$tmp/means.csv" "$fitted" >"$tmp/$name.csv" <<'PY'
import sys
keep = set(sys.argv[2].split())
print("cluster.gpus_per_node,training.micro_batch,step_time_s")
for line in open(sys.argv[1]):
    r, mb, t = line.strip().split(",")
    if f"{r},{mb}" in keep:
        print(f"{r},{mb},{t}")
PY
  "$vitsim" fit "$scenario" --set cluster.platform="$tmp/p.xml" --measured "$tmp/$name.csv" \
    --out "$tmp/$name.xml" -q --format json >"$tmp/$name.json"
  "$vitsim" predict "$scenario" -q --set cluster.platform="$tmp/$name.xml" --interval --format csv \
    >"$tmp/$name.pred.csv"
  python3 - "$tmp/means.csv" "$fitted" "$tmp/$name.json" "$tmp/$name.pred.csv" "$tmp/stated.csv" <<'PY'
import csv, json, sys
means = {}
for line in open(sys.argv[1]):
    r, mb, t = line.strip().split(",")
    means[(int(r), int(mb))] = float(t)
keep = {tuple(int(x) for x in c.split(",")) for c in sys.argv[2].split()}
fit = json.load(open(sys.argv[3]))
def predicted(path, col="step_mean_s"):
    return {(int(r["cluster.gpus_per_node"]), int(r["training.micro_batch"])): float(r[col])
            for r in csv.DictReader(open(path))}
pred, stated = predicted(sys.argv[4]), predicted(sys.argv[5])
low, high = predicted(sys.argv[4], "step_low_s"), predicted(sys.argv[4], "step_high_s")
for f in fit["figures"]:
    print(f"  fitted {f['figure']} = {f['value']:.4g} (1-sigma {f['sigma_low']:.4g}..{f['sigma_high']:.4g}; stated {f['stated']:.4g})")
held = []
for k in sorted(means):
    e = pred[k] / means[k] - 1
    role = "fitted  " if k in keep else "held out"
    if k not in keep:
        held.append(abs(e))
    print(f"  {role} {k[0]} rank(s), micro-batch {k[1]:3d}: measured {1e3 * means[k]:6.2f} ms, "
          f"stated {1e3 * stated[k]:7.2f} ms, fitted {1e3 * pred[k]:6.2f} ms ({100 * e:+.1f}%), "
          f"p10-p90 {1e3 * low[k]:.2f}-{1e3 * high[k]:.2f} ms: measured {'inside' if low[k] <= means[k] <= high[k] else 'outside'}")
inside = sum(1 for k in means if k not in keep and low[k] <= means[k] <= high[k])
print(f"  held-out step-time MAPE {100 * sum(held) / len(held):.1f}%; {inside} of {len(held)} held-out measured "
      f"means inside the fitted platform's p10-p90")
PY
}

echo "split A: fit on 2 ranks (64, 256), predict 1 rank"
split A "2,64 2,256"
echo "split B: fit on 1 rank at 64 and 2 ranks at 256, predict the others"
split B "1,64 2,256"
echo "split C: fit on 1 rank (64, 256), predict 2 ranks"
split C "1,64 1,256"
