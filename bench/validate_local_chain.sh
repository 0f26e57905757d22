#!/usr/bin/env bash
# Intervals stated before their runs, over time (issue 26 item 5: intervals that contain the measured times at
# their stated rate; docs/predict.md "Measured runs"): bench/validate_local.sh LINKS times in a row, each link
# predicting its interval with the validations of every earlier link (and of the folders in RUNS_FROM) through
# `predict --runs`, then training and holding its runs against it. Prints each link's table and, at the end,
# the runs inside their interval over the chain against the stated rate. Every link calibrates afresh: the
# earlier runs' ratios are each against its own calibration's prediction, the procedure's error.
# usage: bench/validate_local_chain.sh [BUILD_DIR] [LINKS] [REPS]
# OUT: the folder (default a new temporary one): link-1, link-2, ..., each a bench/validate_local.sh OUT, and
#   link-N.log, its output.
# RUNS_FROM="DIR...": earlier bench/validate_local.sh folders the first link already takes in; without it the
#   first link has no earlier runs (the calibration's spans alone) and is left out of the count.
# APPEND=1: each link after the first calibrates `--append` onto the previous link's calib.json (validate_local.sh
#   CALIB_FROM), so its compute span takes in how the machine's speed moved between the calibrations.
# VITSIM_BENCH_SMOKE=1: 2 links of validate_local.sh's smoke mode (bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
build=${1:-build}
links=${2:-4}
reps=${3:-3}
[ "$smoke" = 1 ] && links=2
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
run_header
smoke_note "$links links of bench/validate_local.sh's smoke mode"
earlier=${RUNS_FROM:-}
inside=0 total=0 per_link=()
for i in $(seq 1 "$links"); do
  dir="$out/link-$i"
  echo "# link $i of $links: $dir; earlier runs from: ${earlier:-none}"
  from=""
  [ "${APPEND:-0}" = 1 ] && [ "$i" -gt 1 ] && from="$out/link-$((i - 1))"
  status=0
  RUNS_FROM="$earlier" CALIB_FROM="$from" OUT="$dir" bash bench/validate_local.sh "$build" "$reps" >"$out/link-$i.log" 2>&1 ||
    status=$?
  cat "$out/link-$i.log"
  [ "$status" = 0 ] || { echo "validate_local_chain: link $i failed (exit $status); its output is above" >&2; exit 1; }
  line=$(grep -E "^runs inside their point's interval: [0-9]+ of [0-9]+" "$out/link-$i.log" || true)
  if [ -n "$earlier" ] && [ -n "$line" ]; then
    read -r a b < <(sed -E 's/^runs inside their point.s interval: ([0-9]+) of ([0-9]+).*/\1 \2/' <<<"$line")
    inside=$((inside + a)) total=$((total + b)) per_link+=("$a/$b")
  fi
  earlier="$earlier $dir"
done
[ "$total" -gt 0 ] || { echo "validate_local_chain: no link had earlier runs to state its interval with" >&2; exit 1; }
echo "chain: $inside of $total runs inside their interval ($((100 * inside / total))%; stated rate 80%, p10-p90) over ${#per_link[@]} links with earlier runs: ${per_link[*]}"
