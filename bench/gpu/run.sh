#!/usr/bin/env bash
# The GPU benchmark of the real trainer, in one go, for a machine that has a CUDA LibTorch (pip's torch)
# and little else: first the GEMM table of the device (bench/gpu/gemm.sh: no build, 1-2 minutes;
# VITSIM_GPU_GEMMS=0 skips it), then builds `vitsim train` alone (cmake -DVITSIM_TRAINER_ONLY=ON) with what
# bench/gpu/pack_deps.sh packed into bench/gpu/deps/, prints the environment, then trains ViT-B/16 at
# 224 px (bench/gpu/vit_b16.xml) and a small ViT (bench/gpu/vit_cifar_tiny.xml) on synthetic data with
# bf16 autocast and prints images/s and model FLOP utilisation (MFU) as docs/benchmarks.md table rows.
#
#   bash bench/gpu/run.sh                          # on the GPU machine, from the repository root
#   VITSIM_GPU_DEVICE=cpu VITSIM_GPU_STEPS=3 VITSIM_GPU_SET="training.micro_batch=2 training.precision=fp32 run.eval_samples=4" \
#     bash bench/gpu/run.sh                        # the same flow on a CPU, for testing
#
# MFU = model FLOPs per image (forward + backward, core's per-layer workload; bench/gpu/summarize.py)
# x images/s / peak dense BF16 FLOP/s. For the H200 the peak is 989 TFLOP/s: NVIDIA's H200 datasheet
# gives 1,979 TFLOPS BF16 "with sparsity", dense is half (H200 NVL: 835). VITSIM_GPU_PEAK_TFLOPS overrides.
#
# Everything it writes goes under $OUT when set (the device tool brings $OUT back), else build-gpu/out/:
# run.log, gemms.json and gemm.log, the reports (*.json), summary.md. Environment knobs: VITSIM_GPU_DEVICE (cuda), VITSIM_GPU_STEPS
# (300), VITSIM_GPU_SET (extra space-separated --set KEY=VALUE for both runs), VITSIM_GPU_BUILD (build-gpu),
# VITSIM_GPU_RUNS (vit_b16 vit_cifar_tiny), VITSIM_GPU_TIMEOUT (s per run, 240), PYTHON, Torch_DIR,
# VITSIM_GPU_CMAKE_ARGS (extra cmake arguments), VITSIM_GPU_JOBS.
set -uo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
root=$PWD
build=${VITSIM_GPU_BUILD:-build-gpu}
out=${OUT:-$root/$build/out}
mkdir -p "$out"
if [[ -z ${VITSIM_GPU_LOGGING:-} ]]; then  # everything below also into run.log; tee ends before we do
  VITSIM_GPU_LOGGING=1 bash "$self" "$@" 2>&1 | tee -a "$out/run.log"
  exit "${PIPESTATUS[0]}"
fi
t_start=$(date +%s)
stamp() { echo "[$(($(date +%s) - t_start)) s] $*"; }
die() { stamp "run.sh: $*"; exit 1; }

device=${VITSIM_GPU_DEVICE:-cuda}
steps=${VITSIM_GPU_STEPS:-300}
runs=${VITSIM_GPU_RUNS:-vit_b16 vit_cifar_tiny}
per_run_timeout=${VITSIM_GPU_TIMEOUT:-240}
jobs=${VITSIM_GPU_JOBS:-$(nproc)}
py=${PYTHON:-}
if [[ -z $py ]]; then
  for c in /opt/torch/.venv/bin/python3 python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import torch' 2>/dev/null; then py=$c; break; fi
  done
fi
[[ -n $py ]] || py=python3
# pip's cmake and ninja live next to the python that has torch when the system has none.
pybin=$(dirname "$(command -v "$py" 2>/dev/null || echo /nonexistent/x)")
for tool in cmake ninja; do
  command -v "$tool" >/dev/null || { [[ -x $pybin/$tool ]] && PATH=$PATH:$pybin; }
done
command -v cmake >/dev/null || { echo "run.sh: no cmake"; exit 1; }

# ---- environment ----
commit='?'
if git rev-parse --git-dir >/dev/null 2>&1; then
  commit=$(git rev-parse --short HEAD)
  git diff --quiet HEAD -- core real app cmake CMakeLists.txt bench/gpu 2>/dev/null || commit+=" + local changes"
fi
stamp "vitsim bench/gpu/run.sh: commit $commit, $(date -u +%FT%TZ), host $(hostname)"
echo "## environment"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv,noheader || true
else
  echo "nvidia-smi: not found"
fi
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
"$py" - <<'PY' || echo "python torch: not importable"
import sys, torch
print(f"python {sys.version.split()[0]} ({sys.executable}), torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"cuDNN {torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None}, "
      f"cuda available {torch.cuda.is_available()}, devices {torch.cuda.device_count()}")
PY
if [[ -z ${Torch_DIR:-} ]]; then
  Torch_DIR=$("$py" -c 'import os, torch; print(os.path.join(torch.utils.cmake_prefix_path, "Torch"))' 2>/dev/null)
fi
[[ -n ${Torch_DIR:-} && -e $Torch_DIR/TorchConfig.cmake ]] || die "no TorchConfig.cmake (Torch_DIR='${Torch_DIR:-}')"
echo "Torch_DIR $Torch_DIR"
# NCCL from pip's nvidia-nccl package (nvidia/nccl/{include/nccl.h,lib/libnccl.so.2}), where present.
read -r nccl_inc nccl_lib < <("$py" - <<'PY' 2>/dev/null
import glob, os, site, sys
dirs = list(sys.path) + site.getsitepackages()
for d in dirs:
    inc = os.path.join(d, "nvidia", "nccl", "include")
    libs = sorted(glob.glob(os.path.join(d, "nvidia", "nccl", "lib", "libnccl.so*")))
    if os.path.exists(os.path.join(inc, "nccl.h")) and libs:
        print(inc, libs[0]); break
else:
    print("", "")
PY
)
echo "NCCL (pip): ${nccl_inc:-none} ${nccl_lib:-}"
if ! command -v nvcc >/dev/null; then
  for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do [[ -x $d/nvcc ]] && { PATH=$d:$PATH; break; }; done
fi
command -v nvcc >/dev/null && nvcc --version | tail -2 | head -1 || echo "nvcc: not found"
echo "compiler: $(c++ --version 2>/dev/null | head -1)"
echo "cmake: $(cmake --version | head -1), ninja: $(ninja --version 2>/dev/null || echo none), cores: $(nproc)"
echo "MPI: mpicxx $(command -v mpicxx || echo none), mpirun $(command -v mpirun || echo none)"

# ---- the GEMM table (no build: whatever fails later, the table is already under $out) ----
if [[ ${VITSIM_GPU_GEMMS:-1} != 0 ]]; then
  stamp "GEMM table (bench/gpu/gemm.sh)"
  gemm_args=${VITSIM_GEMM_ARGS:-}
  [[ $device == cpu && $gemm_args != *--device* ]] && gemm_args+=" --device cpu"
  OUT=$out PYTHON=$py VITSIM_GEMM_ARGS=$gemm_args bash bench/gpu/gemm.sh >/dev/null || failed_gemm=1
  stamp "GEMM table: $(tail -1 "$out/gemm.log")"
fi

# ---- build ----
[[ -e bench/gpu/deps/include ]] || echo "note: bench/gpu/deps/ is missing (run bench/gpu/pack_deps.sh where the -dev packages are, carry it)"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
# Torch's CMake config asks for the architectures when it cannot run a probe: the H200 is sm_90.
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
configure() {
  cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DVITSIM_TRAINER_ONLY=ON \
    -DVITSIM_DEPS_DIR="$root/bench/gpu/deps" -DTorch_DIR="$Torch_DIR" "$@" ${VITSIM_GPU_CMAKE_ARGS:-}
}
nccl_args=()
[[ -n $nccl_inc ]] && nccl_args=(-DVITSIM_NCCL_INCLUDE_DIR="$nccl_inc" -DVITSIM_NCCL_LIBRARY="$nccl_lib")
stamp "configuring $build"
if ! configure "${nccl_args[@]}" >"$out/configure.log" 2>&1 ||
   ! { stamp "building vitsim (-j$jobs)"; cmake --build "$build" -j"$jobs" --target vitsim >"$out/build.log" 2>&1; }; then
  tail -40 "$out/configure.log" "$out/build.log" 2>/dev/null
  # NCCL is not needed by one process: a failure there should not cost the measurement.
  stamp "configure/build failed; once more without NCCL"
  rm -rf "$build/CMakeCache.txt"
  configure -DVITSIM_WITH_NCCL=OFF >"$out/configure.log" 2>&1 || { tail -60 "$out/configure.log"; die "configure failed"; }
  cmake --build "$build" -j"$jobs" --target vitsim >"$out/build.log" 2>&1 || { tail -80 "$out/build.log"; die "build failed"; }
fi
grep -E "^-- (vitsim|Found Torch|Found CUDAToolkit|Found (ZLIB|JPEG|PNG)|Caffe2: CUDA)" "$out/configure.log"
stamp "built $build/app/vitsim"
vitsim=$build/app/vitsim
[[ -x $vitsim ]] || die "no $vitsim"

# ---- runs ----
peak=${VITSIM_GPU_PEAK_TFLOPS:-}
summary=$out/summary.md
{
  echo "GPU: ${gpu_name:-none}; $("$py" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null); device $device; $steps steps per run"
  echo
  echo "| run | image | micro-batch | precision | device | steps measured | images/s | step p50 (ms) | data wait (ms) | GFLOP/image fwd + bwd | model TFLOP/s | MFU (bf16 peak) | peak memory (GiB) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
} >"$summary"
sets=()
for kv in ${VITSIM_GPU_SET:-}; do sets+=(--set "$kv"); done
failed=0
for r in $runs; do
  scenario=bench/gpu/$r.xml
  [[ -e $scenario ]] || { stamp "no $scenario"; failed=1; continue; }
  stamp "training $r ($scenario, $steps steps on $device)"
  if timeout "$per_run_timeout" "$vitsim" train "$scenario" --set run.device="$device" --set run.max_steps="$steps" \
       "${sets[@]}" --out "$out/$r.json"; then
    sum_args=("$scenario" "$out/$r.json" --gpu "${gpu_name:-}" --label "$r" --set run.device="$device")
    [[ -n $peak ]] && sum_args+=(--peak-tflops "$peak")
    for kv in ${VITSIM_GPU_SET:-}; do sum_args+=(--set "$kv"); done
    "$py" bench/gpu/summarize.py "${sum_args[@]}" | tee "$out/$r.summary" || failed=1
    head -1 "$out/$r.summary" >>"$summary"
  else
    stamp "$r failed (exit $?)"
    failed=1
  fi
done
echo
echo "## summary (paste into docs/benchmarks.md)"
cat "$summary"
stamp "done: outputs in $out"
[[ ${failed_gemm:-0} == 0 ]] || failed=1
exit $failed
