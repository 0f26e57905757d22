#!/usr/bin/env bash
# Predicted nccl-tests tables against the public corpus bench/data/nccl_tests/*.txt (issue 25, issue 36 item 1): a
# thin wrapper over bench/nccl_tests_corpus.py, which reads each table's metadata (source, hardware, NCCL and its
# env, fabric, op, the `vitsim platform` and `vitsim collective` flags that describe the run), predicts the table
# and prints per table and per size band the median |error| and the signed median, then the corpus per band and
# per fabric kind, and the tables vitsim refuses. It first runs the script's self-test (its arithmetic, and a
# table vitsim predicted itself at 0% error). Results: docs/benchmarks.md, "nccl-tests corpus".
# Usage: bench/nccl_tests_public.sh [path/to/vitsim] [nccl_tests_corpus.py flags: --detail, --table NAME,
#        --json OUT, --ramp, --fit NAME --values V1,V2]
# VITSIM_BENCH_SMOKE=1 (bench/lib.sh): the self-test, then the tables of at most 8 ranks, their 1-64 MiB band as
# straight lines (--ramp) and a leave-one-out fit over a harmless flag (--nic-lat), in a few seconds.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
vitsim=$(realpath -m "${1:-$here/build/app/vitsim}")
shift || true
if [ ! -x "$vitsim" ]; then
  echo "nccl_tests_public.sh: no vitsim binary at $vitsim: build it (README, Build) or pass its path" >&2
  exit 2
fi
. "$here/bench/lib.sh"
smoke_note "the self-test, the tables of at most 8 ranks and a leave-one-out fit over --nic-lat"

echo "nccl-tests corpus: $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname), $(nproc) cores"
corpus=("$here/bench/nccl_tests_corpus.py" --vitsim "$vitsim")
python3 "${corpus[@]}" --self-test
if [ "$smoke" = 1 ]; then
  python3 "${corpus[@]}" --smoke --ramp --fit nic-lat --values 2us,5us "$@"
else
  python3 "${corpus[@]}" "$@"
fi
