#!/usr/bin/env bash
# The local validation, heterogeneous group (scenarios/local/validate-hetero.xml): three ranks on two
# cores, rank 0 alone on core 0, ranks 1 and 2 sharing core 1. Calibrates with that placement
# (--device-type cpu,cpu-half,cpu-half), writes the platform into OUT (calibrated.xml, used through --set
# cluster.platform), trains the held-out points REPS times with the same placement and compares each run with
# the prediction. SAVE=1 also copies the platform and the calibration onto platforms/local/calibrated-hetero.*.
# usage: bench/validate_hetero.sh [BUILD_DIR] [REPS] [CALIB_MICRO_BATCHES]
# VITSIM_BENCH_SMOKE=1: seconds (bench/lib.sh): 1 run, calibrated at 48,96 (3 iterations, no op model),
#   micro-batch 64 only, 8 steps.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
build=${1:-build}
reps=${2:-3}
calib_mbs=${3:-48,96,192,384}
calib_flags=(--iters 20 --no-op-model)  # the points are the calibrated shape: the op model (other shapes) is unused
train_sets=()
if [ "$smoke" = 1 ]; then
  reps=1 calib_mbs=48,96 calib_flags=(--iters 3 --warmup 1 --no-op-model)
  train_sets=(--set training.micro_batch=64 --set run.max_steps=8 --set simulation.warmup=2)
fi
scenario=scenarios/local/validate-hetero.xml
vitsim="$build/app/vitsim"
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
if [ "$(nproc)" -lt 2 ]; then echo "validate_hetero: needs 2 cores, this machine has $(nproc): skipped"; exit 0; fi
own_session "$0" "$@"  # the ranks' priority (bench/lib.sh)
flags=$(mpirun_flags --bind-to none --oversubscribe)
# MPMD: rank 0 on core 0, ranks 1-2 on core 1 (taskset pins every thread of the process).
placed() { nice -n "$nice_level" mpirun $flags -np 1 taskset -c 0 "$vitsim" "$@" : -np 2 taskset -c 1 "$vitsim" "$@"; }

run_header
smoke_note "1 run, calibrated at $calib_mbs (3 iterations, no op model), micro-batch 64, 8 steps"
echo "# scenario $scenario, calibrated at micro-batches $calib_mbs with the same placement, $reps runs per point; files in $out"
platform="$(cd "$out" && pwd)/calibrated.xml"
placed calibrate --scenario "$scenario" --out "$out/calib.json" --force --micro-batches "$calib_mbs" "${calib_flags[@]}" \
  --device-type cpu,cpu-half,cpu-half --details "$out/calib-details.json" \
  --emit-platform "$platform" >"$out/calibrate.log"
calibration_summary "$out/calibrate.log" "^fit|^occupancy|^sync|^peak"
sets=(--set "cluster.platform=$platform" "${train_sets[@]}")
for r in $(seq 1 "$reps"); do
  placed train "$scenario" "${sets[@]}" --quiet --out "$out/measured-raw-$r.json" >/dev/null
  # The trainer counts nodes by host name: here 1. The platform describes each rank as a node of its own
  # (a <cluster> holds one device type), so the points are relabelled nodes = 3 to match the prediction;
  # no measured value changes.
  /usr/bin/python3 - "$out/measured-raw-$r.json" "$out/measured-$r-3.json" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
for p in rep["points"]:
    p["nodes"] = 3
    p["params"]["nodes"] = "3"
    p.setdefault("notes", []).append("relabelled nodes = 3 by bench/validate_hetero.sh: 3 ranks of one host, one platform node each")
json.dump(rep, open(sys.argv[2], "w"), indent=1)
PY
  "$vitsim" validate "$scenario" --calibration "$out/calib.json" "${sets[@]}" -q --measured "$out/measured-$r-3.json" \
    --format json --out "$out/validation-$r-3.json" || [ $? = 4 ]
done
/usr/bin/python3 "$(dirname "$0")/validation_table.py" "$out" "$reps" 3
if [ "${SAVE:-0}" = 1 ]; then
  cp "$platform" platforms/local/calibrated-hetero.xml
  cp "$out/calib.json" platforms/local/calibrated-hetero.json
  echo "# SAVE=1: wrote platforms/local/calibrated-hetero.xml and .json"
fi
