#!/usr/bin/env bash
# Cross-shape validation of the operator-level compute model (docs/benchmarks.md "Cross-shape validation",
# issue 11 item 5): calibrate this machine once on one ViT shape (scenarios/local/shapes.xml), then, for
# each shape below, predict with that calibration (op-class efficiencies only: the shape itself was never
# measured) and train it for real (`vitsim train`, 1 rank x THREADS threads, synthetic data), and print the
# per-shape step-time error, its mean and its maximum.
# usage: bench/validate_shapes.sh [BUILD_DIR] [REPS]
# NICE (default -20 as root): priority of the measurements; this machine's 2 cores are shared.
# OMP_WAIT_POLICY (default PASSIVE): LibTorch's OpenMP threads and Debian's pthread OpenBLAS each take
# run.threads; with OpenMP's default policy its idle threads spin after every parallel region while
# OpenBLAS's spin after every GEMM, and on 2 cores the pools take turns at the scheduler tick (a step of
# the calibration shape: 0.99 s spinning, 0.42 s passive; spread over iterations 20-90% against 3-5%),
# which no op model follows (docs/calibrate-validate.md). ACTIVE measures that default.
# THREADS (default 1): intra-op threads of the one rank, for calibrate, train and predict alike. With 2
# threads on this 2-core machine every parallel region waits for a worker thread that shares its core
# with whatever else runs (other engineers' builds): the same shape measured 544 and 917 ms a step
# minutes apart (2026-12-01), against 747-849 ms with one thread.
# VITSIM_BENCH_SMOKE=1: seconds (bench/lib.sh): the first shape only, calibrated at 8,16 (3 iterations, no op
#   model: its shape then predicts from the platform's figures), 5 steps.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
build=${1:-build}
reps=${2:-1}
calib_flags=(--micro-batches 16,64,128)
smoke_sets=()
if [ "$smoke" = 1 ]; then
  reps=1 calib_flags=(--micro-batches 8,16 --iters 3 --warmup 1 --no-op-model)
  smoke_sets=(--set run.max_steps=5 --set simulation.steps=5 --set simulation.warmup=2)
fi
vitsim="$build/app/vitsim"
scenario=scenarios/local/shapes.xml
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
nice_level=${NICE:-$([ "$(id -u)" = 0 ] && echo -20 || echo 0)}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
threads=${THREADS:-1}
# Own session so that the autogroup's priority applies (see bench/validate_local.sh).
if [ "$nice_level" != 0 ] && [ -w /proc/self/autogroup ] && [ -z "${VITSIM_OWN_SESSION:-}" ]; then
  VITSIM_OWN_SESSION=1 exec setsid -w "$0" "$@"
fi
[ -n "${VITSIM_OWN_SESSION:-}" ] && echo "$nice_level" >/proc/self/autogroup
mpirun_flags="--bind-to none"
[ "$(id -u)" = 0 ] && mpirun_flags="--allow-run-as-root $mpirun_flags"
# Thread-pool settings of the environment, passed to calibrate and train alike when set.
for v in OMP_WAIT_POLICY GOMP_SPINCOUNT OPENBLAS_NUM_THREADS; do [ -n "${!v:-}" ] && mpirun_flags="$mpirun_flags -x $v"; done
run() { nice -n "$nice_level" "$@"; }

# name | --set assignments (model shape and micro-batch); the calibration shape is the scenario's own.
shapes=(
  "w64-d2-p7-28px-b256|model.image_size=28 model.patch=7 model.channels=1 model.width=64 model.depth=2 model.heads=2 model.mlp_ratio=2 training.micro_batch=256"
  "w128-d4-p4-28px-b64|model.image_size=28 model.patch=4 model.channels=1 model.width=128 model.depth=4 model.heads=4 model.mlp_ratio=4 training.micro_batch=64"
  "w256-d6-p4-32px-b32|model.image_size=32 model.patch=4 model.width=256 model.depth=6 model.heads=4 model.mlp_ratio=2 training.micro_batch=32"
  "w512-d4-p8-32px-b128|model.image_size=32 model.patch=8 model.width=512 model.depth=4 model.heads=8 model.mlp_ratio=4 model.classes=100 training.micro_batch=128"
  "w384-d8-p8-64px-b16|model.image_size=64 model.patch=8 model.width=384 model.depth=8 model.heads=6 model.mlp_ratio=4 training.micro_batch=16"
  "w192-d12-p16-96px-b64|model.image_size=96 model.patch=16 model.width=192 model.depth=12 model.heads=3 model.mlp_ratio=4 model.classes=1000 training.micro_batch=64"
  "w384-d4-p16-224px-b8|model.image_size=224 model.patch=16 model.width=384 model.depth=4 model.heads=6 model.mlp_ratio=4 model.classes=1000 training.micro_batch=8"
  "w64-d12-p16-224px-b32|model.image_size=224 model.patch=16 model.width=64 model.depth=12 model.heads=2 model.mlp_ratio=4 model.classes=1000 training.micro_batch=32"
  "w128-d3-p8-128px-b16|model.image_size=128 model.patch=8 model.width=128 model.depth=3 model.heads=4 model.mlp_ratio=4 training.micro_batch=16"
)
[ "$smoke" = 1 ] && shapes=("${shapes[0]}")

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(hostname) cores=$(nproc) $(lscpu | sed -n 's/^Model name: *//p'); load: $(cut -d' ' -f1-3 /proc/loadavg); nice $nice_level; OMP_WAIT_POLICY=$OMP_WAIT_POLICY; threads $threads; files in $out"
smoke_note "the first shape, calibrated at 8,16 (3 iterations, no op model), 5 steps"
run mpirun $mpirun_flags -np 1 "$vitsim" calibrate "$scenario" --set run.threads="$threads" "${smoke_sets[@]}" \
  --out "$out/calib.json" --force "${calib_flags[@]}" --details "$out/calib-details.json" >"$out/calibrate.log" 2>&1
sed -n '/op model/,$p' "$out/calibrate.log" | head -18 | sed 's/^/# calibrate: /'
for r in $(seq 1 "$reps"); do
  for entry in "${shapes[@]}"; do
    name=${entry%%|*}
    sets=(--set run.threads="$threads" "${smoke_sets[@]}")
    for a in ${entry#*|}; do sets+=(--set "$a"); done
    run mpirun $mpirun_flags -np 1 "$vitsim" train "$scenario" "${sets[@]}" --quiet --out "$out/measured-$r-$name.json" >/dev/null
    [ "$r" = 1 ] && "$vitsim" predict "$scenario" --calibration "$out/calib.json" "${sets[@]}" -q --format json \
      --out "$out/predicted-$name.json"
    echo "# done $r $name (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  done
done
/usr/bin/python3 "$(dirname "$0")/shapes_table.py" "$out" "$reps" "${shapes[@]%%|*}"
