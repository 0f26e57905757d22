#!/usr/bin/env bash
# The GEMM table of one device in one command (issue 37: the GEMM shapes of a ViT step, measured per
# architecture): bench/gpu/gemm_shapes.py with the python that has torch, no vitsim build. About 1-2 minutes
# on an H100 (ViT-B/16 and ViT-L/16 at 197 and 577 tokens, micro-batches 8, 32, 128, in fp16, bf16, fp32 and
# tf32, and the square torch.mm sizes 1024..10240).
#
#   bash bench/gpu/gemm.sh                                     # on the GPU machine, from the repository root
#   VITSIM_GEMM_ARGS="--device cpu" bash bench/gpu/gemm.sh     # the same flow on a CPU, for testing
#
# Writes under $OUT when set (the device tool brings $OUT back), else build-gpu/out/: gemms.json (the table:
# `vitsim calibrate SCENARIO --from-gemm-table gemms.json --out calib.json` fits the op model's GEMM figures
# to it, docs/calibrate-validate.md "A GEMM table") and gemm.log (the environment and the printed table).
# Environment: VITSIM_GEMM_ARGS (extra gemm_shapes.py arguments), VITSIM_GEMM_TIMEOUT (s, 300), PYTHON.
set -uo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.." || exit 1
out=${OUT:-$PWD/build-gpu/out}
mkdir -p "$out"
py=${PYTHON:-}
if [[ -z $py ]]; then
  for c in /opt/torch/.venv/bin/python3 python3 /usr/bin/python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import torch' 2>/dev/null; then py=$c; break; fi
  done
fi
[[ -n $py ]] || { echo "gemm.sh: no python3 that imports torch (set PYTHON)"; exit 1; }
{
  echo "vitsim bench/gpu/gemm.sh: $(date -u +%FT%TZ), host $(hostname), $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv,noheader || true
  fi
  "$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda)'
  # shellcheck disable=SC2086
  timeout "${VITSIM_GEMM_TIMEOUT:-300}" "$py" bench/gpu/gemm_shapes.py --out "$out/gemms.json" ${VITSIM_GEMM_ARGS:-}
} 2>&1 | tee -a "$out/gemm.log"
status=${PIPESTATUS[0]}
[[ $status == 0 && -s $out/gemms.json ]] && echo "gemm.sh: wrote $out/gemms.json" || echo "gemm.sh: failed (exit $status)"
exit "$status"
