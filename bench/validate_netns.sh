#!/usr/bin/env bash
# The local validation, namespaced network (scenarios/local/validate-netns.xml): builds the network with
# scripts/netns_local.sh (skipped, exit 0, with its reason where namespaces cannot be made), calibrates
# one rank per namespace, writes platforms/local/calibrated-netns.xml, trains the held-out points REPS
# times and compares each run with the prediction; tears the network down on exit.
# usage: bench/validate_netns.sh [BUILD_DIR] [REPS] [CALIB_MICRO_BATCHES]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
reps=${2:-3}
calib_mbs=${3:-48,96,192,384}
scenario=scenarios/local/validate-netns.xml
vitsim="$(pwd)/$build/app/vitsim"
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
. bench/lib.sh
own_session "$0" "$@"  # the ranks' priority (bench/lib.sh)
if ! net=$(scripts/netns_local.sh up); then echo "validate_netns: skipped (see the line above)"; exit 0; fi
trap 'scripts/netns_local.sh down >/dev/null' EXIT
# mpirun's PMIx server must accept the namespaces' connections on the bridge; MPI itself over TCP only
# (no shared memory between the "nodes").
export PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=10.77.0.0/24
flags=$(mpirun_flags --bind-to none --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 \
  --mca oob_tcp_if_include 10.77.0.0/24)
placed() {
  nice -n "$nice_level" mpirun $flags -np 1 ip netns exec vitsim-a "$vitsim" "$@" : -np 1 ip netns exec vitsim-b "$vitsim" "$@"
}

run_header
echo "# $net"
echo "# scenario $scenario, calibrated at micro-batches $calib_mbs through the same network, $reps runs per point; files in $out"
placed calibrate --scenario "$scenario" --out "$out/calib.json" --force --micro-batches "$calib_mbs" --iters 20 \
  --link-class inter_node --details "$out/calib-details.json" --emit-platform platforms/local/calibrated-netns.xml \
  >"$out/calibrate.log"
calibration_summary "$out/calibrate.log"
grep -E "^ +[0-9]+ +[0-9.e+-]+ " "$out/calibrate.log" | grep -vE "^ +[0-9]+ +[0-9]+ +0\." | sed 's/^/# all-reduce: /' || true
for r in $(seq 1 "$reps"); do
  placed train "$scenario" --quiet --out "$out/measured-$r-2.json" >/dev/null
  "$vitsim" validate "$scenario" --calibration "$out/calib.json" -q --measured "$out/measured-$r-2.json" \
    --format json --out "$out/validation-$r-2.json" || true
done
/usr/bin/python3 "$(dirname "$0")/validation_table.py" "$out" "$reps" 2
