#!/usr/bin/env bash
# The local validation (docs/benchmarks.md "Validation on this machine"): calibrate this machine on 2 ranks at
# the calibration micro-batches (the trainer's own steps among them: calibrate's step phase), then train every
# point of the validation scenario REPS times and compare each run with the prediction. Prints per point:
# predicted, each run's measured step time, the run-to-run spread, the error of the mean and the MAPE; the
# prediction's p10-p90 interval (predict --interval over the calibration's spans) and the runs inside it.
# usage: bench/validate_local.sh [BUILD_DIR] [REPS] [SCENARIO] [CALIB_MICRO_BATCHES] [RUNS]
# RUNS (default 1): the whole validation (a calibration, then REPS training runs per point) RUNS times, each in
#   OUT/run-K with its log OUT/run-K.log, then the step-time MAPE's distribution over them: "step-time MAPE
#   over N runs: min, median, max". One run's MAPE depends on the spell its calibration landed in (issue 37:
#   9.2% and 16.2% in two runs on a quiet machine), so the record is a distribution (>= 10 runs), not a best
#   run. SAVE=1 then saves the last run's files.
# OUT: the folder for the files (default: a new temporary one): calib.json, calibrated.xml (calibrate's
#   platform, which the runs use through --set cluster.platform: calibrate writes no file the scenario reads),
#   each run's report and validation. SAVE=1 also copies calib.json and calibrated.xml onto the scenario's
#   committed platform and the calibration beside it (platforms/local/calibrated.{xml,json}).
# RUNS_FROM="DIR..." (default none): earlier OUT folders of this script; their validations (validation-*.json:
#   each run's measured step against the prediction of its own calibration) go to predict --runs, so the
#   interval also takes in the central value times their split-conformal ends (docs/predict.md "Measured
#   runs"). The runs here are later than every one of them: the interval is stated before its runs.
# NICE (default -20 as root): the ranks' priority (bench/lib.sh); this machine's 2 cores are shared with builds.
# VITSIM_BENCH_SMOKE=1: seconds, not minutes (bench/lib.sh): 1 run, calibrated at 48,96 with 3 iterations and
#   no op model, the points at micro-batch 64 only, 8 steps.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
build=${1:-build}
reps=${2:-3}
scenario=${3:-scenarios/local/validate-homog.xml}
calib_mbs=${4:-48,96,192,384}
runs_n=${5:-1}
calib_flags=(--iters 20 --no-op-model)  # the points are the calibrated shape: the op model (other shapes) is unused
train_sets=()
if [ "$smoke" = 1 ]; then
  reps=1 calib_mbs=48,96 calib_flags=(--iters 3 --warmup 1 --no-op-model)
  train_sets=(--set training.micro_batch=64 --set run.max_steps=8 --set simulation.warmup=2)
fi
vitsim="$build/app/vitsim"
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
own_session "$0" "$@"  # the ranks' priority (bench/lib.sh)
mpirun_flags=$(mpirun_flags --oversubscribe)
run() { nice -n "$nice_level" "$@"; }

run_header
if [ "$runs_n" -gt 1 ]; then
  mapes=() inside=()
  for k in $(seq 1 "$runs_n"); do
    echo "# run $k of $runs_n: $out/run-$k"
    OUT="$out/run-$k" bash "$0" "$build" "$reps" "$scenario" "$calib_mbs" 1 | tee "$out/run-$k.log"
    mapes+=("$(sed -n 's/^step-time MAPE: \([0-9.]*\)%.*/\1/p' "$out/run-$k.log")")
    inside+=("$(sed -n "s/^runs inside their point's interval: \([0-9]*\) of \([0-9]*\).*/\1\/\2/p" "$out/run-$k.log")")
  done
  /usr/bin/python3 - "${#mapes[@]}" "${mapes[@]}" "${inside[@]}" <<'PY'
import statistics as st, sys
n = int(sys.argv[1])
v = [float(x) for x in sys.argv[2:2 + n]]
each = ", ".join(f"{x:.1f}%" for x in v)
print(f"step-time MAPE over {len(v)} runs: min {min(v):.1f}%, median {st.median(v):.1f}%, max {max(v):.1f}% "
      f"(each run a calibration and its training runs: {each})")
# Each run's training runs inside the interval its own calibration stated (validation_table.py's line).
pairs = [tuple(int(x) for x in f.split("/")) for f in sys.argv[2 + n:] if "/" in f]
if pairs:
    a, b = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
    print(f"runs inside their point's interval over {len(pairs)} runs: {a} of {b} ({100 * a / b:.0f}%; each run: "
          + ", ".join(f"{p[0]}/{p[1]}" for p in pairs) + ")")
PY
  exit 0
fi
smoke_note "1 run, calibrated at $calib_mbs (3 iterations, no op model), micro-batch 64, 8 steps"
echo "# scenario $scenario, calibrated at micro-batches $calib_mbs on 2 ranks, $reps training runs per point; files in $out"
platform="$(cd "$out" && pwd)/calibrated.xml"
# CALIB_FROM=DIR (default none): start from an earlier OUT's calib.json and calibrate `--append` onto it (the
# same device measured again: its compute span takes in how the earlier figures differ, calibrations repeated
# over time, docs/calibrate-validate.md "Measured spans").
append=(--force)
if [ -n "${CALIB_FROM:-}" ]; then
  cp "$CALIB_FROM/calib.json" "$out/calib.json"
  append=(--append --force)
  echo "# calibrate --append onto $CALIB_FROM/calib.json"
fi
run mpirun $mpirun_flags -np 2 "$vitsim" calibrate --scenario "$scenario" --out "$out/calib.json" "${append[@]}" \
  --micro-batches "$calib_mbs" "${calib_flags[@]}" --details "$out/calib-details.json" --emit-platform "$platform" \
  >"$out/calibrate.log"
# CALIBRATIONS=N (default 1): N - 1 more calibrations, each `--append` (the same device measured again: the
# compute span takes in how the earlier figures differ, docs/calibrate-validate.md "Measured spans").
for i in $(seq 2 "${CALIBRATIONS:-1}"); do
  run mpirun $mpirun_flags -np 2 "$vitsim" calibrate --scenario "$scenario" --out "$out/calib.json" --append \
    --micro-batches "$calib_mbs" "${calib_flags[@]}" --emit-platform "$platform" --force >"$out/calibrate-$i.log"
done
calibration_summary "$out/calibrate.log" "^fit|^host|^loader|^occupancy|^sync|^peak"
sets=(--set "cluster.platform=$platform" "${train_sets[@]}")
# Every point's p10-p90 interval over the calibration's measured spans (calibrate's rounds), which the table
# holds each run against (issue 26: intervals that contain the measured times at their stated rate).
runs=()
for dir in ${RUNS_FROM:-}; do
  for v in "$dir"/validation-*.json; do [ -e "$v" ] && runs+=("$v"); done
done
if [ -n "${RUNS_FROM:-}" ] && [ ${#runs[@]} = 0 ]; then echo "RUNS_FROM=$RUNS_FROM: no validation-*.json there" >&2; exit 2; fi
[ ${#runs[@]} -gt 0 ] && echo "# interval: the calibration's spans and ${#runs[@]} earlier validated runs (predict --runs) from $RUNS_FROM"
"$vitsim" predict "$scenario" --calibration "$out/calib.json" "${sets[@]}" --interval -q --format json \
  --out "$out/interval.json" ${runs[@]+--runs "${runs[@]}"}
ranks=$(sed -n 's/.*param="cluster.gpus_per_node" values="\([^"]*\)".*/\1/p' "$scenario")
for r in $(seq 1 "$reps"); do
  for n in ${ranks//,/ }; do
    run mpirun $mpirun_flags -np "$n" "$vitsim" train "$scenario" --set "cluster.gpus_per_node=$n" "${sets[@]}" \
      --quiet --out "$out/measured-$r-$n.json" >/dev/null
    "$vitsim" validate "$scenario" --calibration "$out/calib.json" --set "cluster.gpus_per_node=$n" "${sets[@]}" \
      -q --measured "$out/measured-$r-$n.json" --format json --out "$out/validation-$r-$n.json" || [ $? = 4 ]
  done
done
/usr/bin/python3 "$(dirname "$0")/validation_table.py" "$out" "$reps" "$ranks"
if [ "${SAVE:-0}" = 1 ]; then
  committed="$(dirname "$scenario")/$(sed -n 's/.*<cluster platform="\([^"]*\)".*/\1/p' "$scenario")"
  cp "$platform" "$committed"
  cp "$out/calib.json" "${committed%.xml}.json"
  echo "# SAVE=1: wrote $committed and ${committed%.xml}.json"
fi
