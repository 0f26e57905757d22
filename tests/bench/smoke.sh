#!/usr/bin/env bash
# ctest's bench smoke tests (tests/CMakeLists.txt: one bench_smoke_<name> per bench/*.sh): runs the script in
# its smoke mode (VITSIM_BENCH_SMOKE=1, bench/lib.sh: its smallest case, in seconds) and fails when it exits
# non-zero or its output lacks the line it prints when it works, so that no bench script rots unseen.
# usage: tests/bench/smoke.sh NAME BUILD_DIR        (NAME: bench/NAME.sh)
set -euo pipefail
name=$1
build=$(cd "$2" && pwd)
cd "$(dirname "$0")/../.."
vitsim="$build/app/vitsim"
# Per script: its arguments, and a line (extended regex) its output has when it worked.
case "$name" in
  predict_scale) args=("$vitsim") want='^8 GPUs \(1 nodes\), 20 steps +median +[0-9.]+ s' ;;
  predict_flat_scale) args=("$vitsim") want='^ +512 GPUs \( +64 nodes\): wall median +[0-9.]+ s' ;;
  interval_cost) args=("$vitsim") want='^ +1 nodes: .* with --interval [0-9.]+ s' ;;
  collective_cost) args=("$vitsim") want='^ +16 ranks: +240 flows, peak memory [0-9.]+ MB' ;;
  plan_bench) args=("$vitsim") want='^80 points, all simulated, -j 2 +wall median +[0-9.]+ s' ;;
  fit_local) args=("$vitsim") want='^  held-out step-time MAPE [0-9.]+%; [0-9] of [0-9] held-out' ;;
  fit_cost) args=("$vitsim") want='^2 +default +1 +[0-9]+ +[0-9.]+ +[0-9.]+ ' ;;
  nccl_tests_public) args=("$vitsim") want='^[0-9]+ tables compared, [0-9]+ refused, 0 failed$' ;;
  public_steps) args=("$vitsim") want='^[0-9]+ rows compared, [0-9]+ refused, [0-9]+ unsupported, [0-9]+ beyond their stated precision.s peak, 0 failed$' ;;
  fuzz) args=() want='^fuzz_scenario: compiles|^fuzz.sh smoke: no clang' ;;
  train_vs_ddp) args=("$build") want='^ +2 +16 +[0-9.]+ ' ;;
  validate_local | validate_hetero) args=("$build") want='^step-time MAPE: [0-9.]+%' ;;
  validate_local_chain) args=("$build") want='^chain: [0-9]+ of [0-9]+ runs inside their interval' ;;
  validate_netns) args=("$build") want='^step-time MAPE: [0-9.]+%|^validate_netns: skipped' ;;
  validate_shapes) args=("$build") want='^step time: mean \|error\| [0-9.]+%' ;;
  *)
    echo "tests/bench/smoke.sh: no smoke expectation for bench/$name.sh: give it a smoke mode (VITSIM_BENCH_SMOKE=1," \
      "bench/lib.sh) and a line here" >&2
    exit 1
    ;;
esac
OUT=$(mktemp -d)
export OUT VITSIM_BENCH_SMOKE=1 VITSIM_FUZZ_BUILD="$OUT/fuzz"
trap 'rm -rf "$OUT"' EXIT
start=$(date +%s.%N)
set +e
output=$(bash "bench/$name.sh" "${args[@]}" 2>&1)
status=$?
set -e
echo "$output"
echo "bench/$name.sh (smoke): exit $status in $(echo "$(date +%s.%N) - $start" | bc) s"
[ "$status" = 0 ] || { echo "bench/$name.sh failed in smoke mode" >&2; exit 1; }
grep -Eq "$want" <<<"$output" || { echo "bench/$name.sh: no line matching '$want' in its output" >&2; exit 1; }
