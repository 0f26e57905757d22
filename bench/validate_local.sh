#!/usr/bin/env bash
# The local validation (docs/benchmarks.md "Validation on this machine"): calibrate this machine on 2 ranks at
# the calibration micro-batches, write platforms/local/calibrated.xml, then train every point of the
# validation scenario REPS times and compare each run with the prediction. Prints per point: predicted,
# each run's measured step time, the run-to-run spread, the error of the mean and the MAPE.
# usage: bench/validate_local.sh [BUILD_DIR] [REPS] [SCENARIO] [CALIB_MICRO_BATCHES]
# NICE (default -20 as root): the ranks' priority (bench/lib.sh); this machine's 2 cores are shared with builds.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
reps=${2:-3}
scenario=${3:-scenarios/local/validate-homog.xml}
calib_mbs=${4:-48,96,192,384}
vitsim="$build/app/vitsim"
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
. bench/lib.sh
own_session "$0" "$@"  # the ranks' priority (bench/lib.sh)
mpirun_flags=$(mpirun_flags --oversubscribe)
run() { nice -n "$nice_level" "$@"; }

run_header
echo "# scenario $scenario, calibrated at micro-batches $calib_mbs on 2 ranks, $reps training runs per point; files in $out"
platform=$(sed -n 's/.*<cluster platform="\([^"]*\)".*/\1/p' "$scenario")
platform="$(dirname "$scenario")/$platform"
run mpirun $mpirun_flags -np 2 "$vitsim" calibrate --scenario "$scenario" --out "$out/calib.json" --force \
  --micro-batches "$calib_mbs" --iters 20 --details "$out/calib-details.json" --emit-platform "$platform" >"$out/calibrate.log"
calibration_summary "$out/calibrate.log" "^fit|^host|^loader|^occupancy"
ranks=$(sed -n 's/.*param="cluster.gpus_per_node" values="\([^"]*\)".*/\1/p' "$scenario")
for r in $(seq 1 "$reps"); do
  for n in ${ranks//,/ }; do
    run mpirun $mpirun_flags -np "$n" "$vitsim" train "$scenario" --set "cluster.gpus_per_node=$n" --quiet \
      --out "$out/measured-$r-$n.json" >/dev/null
    "$vitsim" validate "$scenario" --calibration "$out/calib.json" --set "cluster.gpus_per_node=$n" -q \
      --measured "$out/measured-$r-$n.json" --format json --out "$out/validation-$r-$n.json" || true
  done
done
/usr/bin/python3 "$(dirname "$0")/validation_table.py" "$out" "$reps" "$ranks"
