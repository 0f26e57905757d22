#!/usr/bin/env bash
# The local validation, namespaced network (scenarios/local/validate-netns.xml): builds the network with
# scripts/netns_local.sh (skipped, exit 0, with its reason where namespaces cannot be made), calibrates
# one rank per namespace, writes the platform into OUT (calibrated.xml, used through --set cluster.platform),
# trains the held-out points REPS times and compares each run with the prediction; tears the network down on
# exit. SAVE=1 also copies the platform and the calibration onto platforms/local/calibrated-netns.*.
# usage: bench/validate_netns.sh [BUILD_DIR] [REPS] [CALIB_MICRO_BATCHES]
# VITSIM_BENCH_SMOKE=1: seconds (bench/lib.sh): 1 run, calibrated at 48,96 (3 iterations, no op model, the
#   all-reduce at 1, 4 and 16 MiB), micro-batch 64 only, 8 steps.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
build=${1:-build}
reps=${2:-3}
calib_mbs=${3:-48,96,192,384}
calib_flags=(--iters 20 --no-op-model)  # the points are the calibrated shape: the op model (other shapes) is unused
train_sets=()
if [ "$smoke" = 1 ]; then
  # the all-reduce at 1-16 MiB: 8-134 ms over the 1 Gbit/s link, so a scheduling stall of a loaded machine
  # (10 ms) cannot make the times stop growing with the size (the fit refuses that)
  reps=1 calib_mbs=48,96 calib_flags=(--iters 3 --warmup 1 --no-op-model --sizes 1MiB,4MiB,16MiB)
  train_sets=(--set training.micro_batch=64 --set run.max_steps=8 --set simulation.warmup=2)
fi
scenario=scenarios/local/validate-netns.xml
vitsim="$(cd "$build" && pwd)/app/vitsim"
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
own_session "$0" "$@"  # the ranks' priority (bench/lib.sh)
# A network of this run's own (names and subnet from the process id), so that a second copy of the suite or
# of this bench running beside it builds another instead of tearing this one down (issue 35 item 8).
export NETNS_PREFIX=${NETNS_PREFIX:-vn$(($$ % 100000))} NETNS_SUBNET=${NETNS_SUBNET:-10.$((100 + $$ / 256 % 100)).$(($$ % 256))}
if ! net=$(scripts/netns_local.sh up); then echo "validate_netns: skipped (see the line above)"; exit 0; fi
trap 'scripts/netns_local.sh down >/dev/null' EXIT
# mpirun's PMIx server must accept the namespaces' connections on the bridge; MPI itself over TCP only
# (no shared memory between the "nodes").
export PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=$NETNS_SUBNET.0/24
flags=$(mpirun_flags --bind-to none --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include "$NETNS_SUBNET.0/24" \
  --mca oob_tcp_if_include "$NETNS_SUBNET.0/24")
placed() {
  nice -n "$nice_level" mpirun $flags -np 1 ip netns exec "$NETNS_PREFIX-a" "$vitsim" "$@" : \
    -np 1 ip netns exec "$NETNS_PREFIX-b" "$vitsim" "$@"
}

run_header
smoke_note "1 run, calibrated at $calib_mbs (3 iterations, no op model), micro-batch 64, 8 steps"
echo "# $net"
echo "# scenario $scenario, calibrated at micro-batches $calib_mbs through the same network, $reps runs per point; files in $out"
platform="$(cd "$out" && pwd)/calibrated.xml"
placed calibrate --scenario "$scenario" --out "$out/calib.json" --force --micro-batches "$calib_mbs" "${calib_flags[@]}" \
  --link-class inter_node --details "$out/calib-details.json" --emit-platform "$platform" \
  >"$out/calibrate.log"
calibration_summary "$out/calibrate.log" "^fit|^occupancy|^sync|^peak"
sets=(--set "cluster.platform=$platform" "${train_sets[@]}")
sed -n '/^all-reduce/,/^fit/p' "$out/calibrate.log" | grep -E "^ +[0-9]+ +[0-9.e+-]+ " | sed 's/^/# all-reduce: /' || true
for r in $(seq 1 "$reps"); do
  placed train "$scenario" "${sets[@]}" --quiet --out "$out/measured-$r-2.json" >/dev/null
  "$vitsim" validate "$scenario" --calibration "$out/calib.json" "${sets[@]}" -q --measured "$out/measured-$r-2.json" \
    --format json --out "$out/validation-$r-2.json" || [ $? = 4 ]
done
/usr/bin/python3 "$(dirname "$0")/validation_table.py" "$out" "$reps" 2
if [ "${SAVE:-0}" = 1 ]; then
  cp "$platform" platforms/local/calibrated-netns.xml
  cp "$out/calib.json" platforms/local/calibrated-netns.json
  echo "# SAVE=1: wrote platforms/local/calibrated-netns.xml and .json"
fi
