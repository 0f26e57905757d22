#!/usr/bin/env bash
# vitsim train against PyTorch DistributedDataParallel (Debian's python3-torch, gloo) on this machine:
# the same ViT (vit_fmnist_tiny), the same synthetic data shape, AdamW, 1 and 2 ranks, micro-batch 16 and
# 64, cores / ranks threads per rank. Each point runs REPS times per side; prints the median images/s
# (from each run's median step) and vitsim's breakdown.
# Both sides use BUCKET-byte gradient buckets (DDP: bucket_cap_mb) and overlap them with backward.
# usage: bench/train_vs_ddp.sh [BUILD_DIR] [REPS] [BUCKET_KIB]
# VITSIM_BENCH_SMOKE=1: seconds (bench/lib.sh): no package installed, 1 run of micro-batch 16 on 1 and 2 ranks,
#   4 steps after 1 warm-up; the DDP side only where python3-torch is already there (else said and skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
steps=40
warmup=5
micro_batches=(16 64)
if [ "$smoke" = 1 ]; then steps=4 warmup=1 micro_batches=(16); else
  VITSIM_BENCH=1 bash scripts/setup.sh  # python3-torch for the DDP side
fi
build=${1:-build}
reps=${2:-3}
[ "$smoke" = 1 ] && reps=1
bucket_kib=${3:-256}
vitsim="$build/app/vitsim"
py=/usr/bin/python3  # Debian's python3-torch (the first python3 on PATH may lack torch)
ddp=1
if ! $py -c 'import torch' 2>/dev/null; then
  [ "$smoke" = 1 ] || { echo "train_vs_ddp: $py has no torch (VITSIM_BENCH=1 bash scripts/setup.sh)" >&2; exit 1; }
  ddp=0
fi
cores=$(nproc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Unbound, as the DDP processes are: mpirun binds each rank to one core when it starts two or fewer,
# which put 1 rank x 2 threads on one core (the runs before 2026-12-01 03:50 UTC).
mpirun_flags="--allow-run-as-root --oversubscribe --bind-to none"

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(hostname) cores=$cores $(lscpu | sed -n 's/^Model name: *//p')"
echo "# buckets ${bucket_kib} KiB, $steps timed steps after $warmup warm-up, $reps runs per side and point"
smoke_note "1 run of micro-batch 16, $steps steps after $warmup warm-up"
if [ "$ddp" = 1 ]; then
  echo "# libtorch $($py -c 'import torch; print(torch.__version__)'), $(mpirun --version | head -1)"
else
  echo "# DDP side skipped: $py has no torch (VITSIM_BENCH=1 bash scripts/setup.sh installs python3-torch)"
fi
# Debian's torch.distributed.run (1.13 on Python 3.11) fails in its own argument handling, so the ranks
# are started here with the environment it would set. Prints rank 0's images/s.
ddp_run() {
  local ranks=$1 mb=$2 threads=$3 port=$((29500 + RANDOM % 1000)) pids=()
  for r in $(seq 0 $((ranks - 1))); do
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=$ranks LOCAL_RANK=$r OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads \
      $py bench/ddp_vit.py --micro-batch "$mb" --steps "$steps" --warmup "$warmup" --threads "$threads" --bucket-mb "$($py -c "print($bucket_kib / 1024)")" \
      > "$tmp/ddp$r.out" 2> "$tmp/ddp$r.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { cat "$tmp"/ddp*.err >&2; return 1; }; done
  $py -c "import json; print(json.loads(open('$tmp/ddp0.out').read().strip().splitlines()[-1])['img_s'])"
}

printf "%5s %5s %12s %12s %7s   %s\n" ranks micro vitsim_img/s ddp_img/s ratio "vitsim breakdown per step (ms): data fwd bwd opt comm_total comm_exposed"
for ranks in 1 2; do
  threads=$((cores / ranks > 0 ? cores / ranks : 1))
  for mb in "${micro_batches[@]}"; do
    v=() d=()
    for rep in $(seq "$reps"); do
      mpirun $mpirun_flags -np "$ranks" "$vitsim" train bench/train_vs_ddp.xml --quiet \
        --set training.micro_batch="$mb" --set run.threads="$threads" --set run.max_steps=$((steps + warmup)) \
        --set simulation.warmup="$warmup" --set parallelism.bucket_size="${bucket_kib}KiB" --set dataset.train_samples=$((mb * ranks * (steps + warmup))) \
        --out "$tmp/v$rep.json"
      v+=("$($py -c "import json,sys; p=json.load(open('$tmp/v$rep.json'))['points'][0]; print(p['global_batch']/p['step_time_s']['p50'])")")
      if [ "$ddp" = 1 ]; then d+=("$(ddp_run "$ranks" "$mb" "$threads")"); else d+=(nan); fi
    done
    bd=$($py -c "import json; b=json.load(open('$tmp/v1.json'))['points'][0]['breakdown_s']; print(' '.join('%.2f'%(1e3*b[k]) for k in ['data','compute_fwd','compute_bwd','optimizer','comm_total','comm_exposed']))")
    $py - "$ranks" "$mb" "$bd" "${v[*]}" "${d[*]}" <<'PY'
import statistics, sys
ranks, mb, bd, v, d = sys.argv[1:]
vm = statistics.median(map(float, v.split())); dm = statistics.median(map(float, d.split()))
print("%5s %5s %12.1f %12.1f %7.2f   %s" % (ranks, mb, vm, dm, vm / dm, bd))
PY
  done
done
