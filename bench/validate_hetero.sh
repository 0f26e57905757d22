#!/usr/bin/env bash
# The local validation, heterogeneous group (scenarios/local/validate-hetero.xml): three ranks on two
# cores, rank 0 alone on core 0, ranks 1 and 2 sharing core 1. Calibrates with that placement
# (--device-type cpu,cpu-half,cpu-half), writes platforms/local/calibrated-hetero.xml, trains the held-out
# points REPS times with the same placement and compares each run with the prediction.
# usage: bench/validate_hetero.sh [BUILD_DIR] [REPS] [CALIB_MICRO_BATCHES]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
reps=${2:-3}
calib_mbs=${3:-48,96,192,384}
scenario=scenarios/local/validate-hetero.xml
vitsim="$build/app/vitsim"
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
if [ "$(nproc)" -lt 2 ]; then echo "validate_hetero: needs 2 cores, this machine has $(nproc): skipped"; exit 0; fi
. bench/lib.sh
own_session "$0" "$@"  # the ranks' priority (bench/lib.sh)
flags=$(mpirun_flags --bind-to none --oversubscribe)
# MPMD: rank 0 on core 0, ranks 1-2 on core 1 (taskset pins every thread of the process).
placed() { nice -n "$nice_level" mpirun $flags -np 1 taskset -c 0 "$vitsim" "$@" : -np 2 taskset -c 1 "$vitsim" "$@"; }

run_header
echo "# scenario $scenario, calibrated at micro-batches $calib_mbs with the same placement, $reps runs per point; files in $out"
placed calibrate --scenario "$scenario" --out "$out/calib.json" --force --micro-batches "$calib_mbs" --iters 20 \
  --device-type cpu,cpu-half,cpu-half --details "$out/calib-details.json" \
  --emit-platform platforms/local/calibrated-hetero.xml >"$out/calibrate.log"
calibration_summary "$out/calibrate.log"
for r in $(seq 1 "$reps"); do
  placed train "$scenario" --quiet --out "$out/measured-raw-$r.json" >/dev/null
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
  "$vitsim" validate "$scenario" --calibration "$out/calib.json" -q --measured "$out/measured-$r-3.json" \
    --format json --out "$out/validation-$r-3.json" || true
done
/usr/bin/python3 "$(dirname "$0")/validation_table.py" "$out" "$reps" 3
