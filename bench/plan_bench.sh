#!/usr/bin/env bash
# Wall time of `vitsim plan` over the whole of Vector (scenarios/whatif/vector-54x8.xml: 13 node counts up to
# 54 x 4 GPUs per node up to 8 x 5 micro-batches x 4 ZeRO stages = 1,040 points), with 2 processes:
#  - every point simulated (--allow-oom: no point excluded before simulating);
#  - the plan as a user runs it (points that do not fit in memory excluded before simulating);
#  - the same split in two shards run one after the other, then merged (what two mpirun ranks would each do).
# Usage: bench/plan_bench.sh [path/to/vitsim] [runs, default 3]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
vitsim=$(realpath "${1:-$here/build/app/vitsim}")
runs=${2:-3}
scen="$here/scenarios/whatif/vector-54x8.xml"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

measure() {
  local label=$1; shift
  local walls=() rss=0
  for _ in $(seq "$runs"); do
    /usr/bin/time -f "%e %M" -o "$tmp/t" "$@" >/dev/null
    read -r w m <"$tmp/t"
    walls+=("$w")
    ((m > rss)) && rss=$m
  done
  printf '%-52s median %7.2f s  (runs: %s)  peak RSS %5.0f MiB\n' "$label" \
    "$(printf '%s\n' "${walls[@]}" | median)" "${walls[*]}" "$((rss / 1024))"
}

echo "vitsim plan benchmark: $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "binary: $vitsim"
"$vitsim" plan "$scen" --allow-oom -j 2 -q --format json --out "$tmp/all.json"
python3 - "$tmp/all.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
sim = sum(1 for x in p["points"] if x["simulated"])
print(f"space: {p['space_size']} points; simulated with --allow-oom: {sim}")
PY
"$vitsim" plan "$scen" -j 2 -q --format json --out "$tmp/fit.json"
python3 - "$tmp/fit.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
sim = sum(1 for x in p["points"] if x["simulated"])
print(f"plan as run: {sim} simulated, {p['space_size'] - sim} excluded before simulating (memory)")
PY
measure "1,040 points, all simulated, -j 2" "$vitsim" plan "$scen" --allow-oom -j 2 -q --format json --out "$tmp/a.json"
measure "1,040 points, memory pre-check, -j 2" "$vitsim" plan "$scen" -j 2 -q --format json --out "$tmp/b.json"
measure "shard 0/2 (-j 1), all simulated" "$vitsim" plan "$scen" --allow-oom -j 1 -q --shard 0/2 --format json --out "$tmp/s0.json"
"$vitsim" plan "$scen" --allow-oom -j 1 -q --shard 1/2 --format json --out "$tmp/s1.json"
measure "merge of the two shards" "$vitsim" plan --merge "$tmp/s0.json" "$tmp/s1.json" --format json --out "$tmp/m.json"
cmp "$tmp/m.json" "$tmp/a.json" && echo "merged shards == one-piece plan (byte-identical JSON)"
