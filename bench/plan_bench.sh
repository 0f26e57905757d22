#!/usr/bin/env bash
# Wall time of `vitsim plan` over the whole of Vector (scenarios/whatif/vector-54x8.xml: 13 node counts up to
# 54 x 4 GPUs per node up to 8 x 5 micro-batches x 4 ZeRO stages = 1,040 points), with 2 processes:
#  - every point simulated (--allow-oom: no point excluded before simulating);
#  - the plan as a user runs it (points that do not fit in memory excluded before simulating);
#  - the same under `mpirun -np 2 vitsim-plan-mpi` (one shard per rank, -j 1 each), when it was built;
#  - the plan as a user runs it with --interval (the top 3 candidates' p10-p90 and sensitivity), and what its
#    explanation says of them.
# Each line: median wall time, and median CPU time (user + sys of the process tree), which depends less on
# what else the machine runs.
# Usage: bench/plan_bench.sh [path/to/vitsim] [runs, default 3]
# VITSIM_BENCH_SMOKE=1: seconds (bench/lib.sh): 1 run of 1 and 2 nodes x 1 and 2 GPUs per node (80 points).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
vitsim=$(realpath "${1:-$here/build/app/vitsim}")
runs=${2:-3}
scen="$here/scenarios/whatif/vector-54x8.xml"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$here/bench/lib.sh"
space=()
points="1,040 points"
if [ "$smoke" = 1 ]; then runs=1 space=(--set cluster.nodes=1,2 --set cluster.gpus_per_node=1,2) points="80 points"; fi

measure() {
  local label=$1; shift
  local walls=() cpus=() rss=0
  for _ in $(seq "$runs"); do
    /usr/bin/time -f "%e %U %S %M" -o "$tmp/t" "$@" >/dev/null
    read -r w u s m <"$tmp/t"
    walls+=("$w")
    cpus+=("$(echo "$u + $s" | bc)")
    ((m > rss)) && rss=$m
  done
  printf '%-44s wall median %7.2f s (runs: %s)  CPU median %6.2f s  peak RSS %4.0f MiB  load %s\n' "$label" \
    "$(printf '%s\n' "${walls[@]}" | median)" "${walls[*]}" "$(printf '%s\n' "${cpus[@]}" | median)" \
    "$((rss / 1024))" "$(cut -d' ' -f1 /proc/loadavg)"
}

echo "vitsim plan benchmark: $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "binary: $vitsim${VITSIM_BENCH_FLOWS:+ (simulation.flows=$VITSIM_BENCH_FLOWS)}"
# VITSIM_BENCH_FLOWS=always makes every transfer a SimGrid flow (simulation.flows; default auto: a lone ring and
# any collective's calls where nothing else sends are computed without them).
[[ -n "${VITSIM_BENCH_FLOWS:-}" ]] && space+=(--set "simulation.flows=$VITSIM_BENCH_FLOWS")
smoke_note "1 run of 80 points (1-2 nodes x 1-2 GPUs per node)"
"$vitsim" plan "$scen" "${space[@]}" --allow-oom -j 2 -q --format json --out "$tmp/all.json"
python3 - "$tmp/all.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
sim = sum(1 for x in p["points"] if x["simulated"])
print(f"space: {p['space_size']} points; simulated with --allow-oom: {sim}")
PY
"$vitsim" plan "$scen" "${space[@]}" -j 2 -q --format json --out "$tmp/fit.json"
python3 - "$tmp/fit.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
sim = sum(1 for x in p["points"] if x["simulated"])
print(f"plan as run: {sim} simulated, {p['space_size'] - sim} excluded before simulating (memory)")
PY
measure "$points, all simulated, -j 2" "$vitsim" plan "$scen" "${space[@]}" --allow-oom -j 2 -q --format json --out "$tmp/a.json"
measure "$points, memory pre-check, -j 2" "$vitsim" plan "$scen" "${space[@]}" -j 2 -q --format json --out "$tmp/b.json"
measure "$points, memory pre-check, --interval" "$vitsim" plan "$scen" "${space[@]}" -j 2 -q --interval --format json \
  --out "$tmp/i.json"
python3 - "$tmp/i.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
with_interval = [x for x in p["points"] if x["simulated"] and "interval" in x["result"]]
print(f"--interval: {len(with_interval)} points with an interval (ranks "
      f"{', '.join(str(x['rank']) for x in with_interval)})")
for line in p["explanation"]:
    if line.startswith(("Intervals", "The pick")):
        print("  " + line)
PY
mpi="$(dirname "$vitsim")/vitsim-plan-mpi"
if [[ -x "$mpi" ]] && command -v mpirun >/dev/null; then
  measure "mpirun -np 2 vitsim-plan-mpi, all simulated" mpirun --allow-run-as-root --oversubscribe -np 2 "$mpi" "$scen" "${space[@]}" \
    --allow-oom -j 1 -q --format json --out "$tmp/m.json"
  cmp "$tmp/m.json" "$tmp/a.json" && echo "mpirun plan == one-machine plan (byte-identical JSON)"
else
  echo "vitsim-plan-mpi not built (no MPI): mpirun line skipped"
fi
