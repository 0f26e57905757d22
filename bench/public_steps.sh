#!/usr/bin/env bash
# Predicted whole training steps (and forward passes) against the public corpus bench/data/public/*.txt (issue 37
# items 1 and 3): a thin wrapper over bench/public_steps.py, which reads each published table's metadata (source,
# hardware, software, precision, mode, input, the `vitsim platform` flags and scenario keys that describe the run),
# predicts every row from the catalogue's figures alone (no calibration) and prints per file, origin, GPU band, mode
# and scale the median |error| and the signed median, then the leave-one-source-out split-conformal coverage of a
# p10-p90 band. It first runs the script's self-test. Results: docs/benchmarks.md, "Public training-step corpus".
# Usage: bench/public_steps.sh [path/to/vitsim] [public_steps.py flags: --detail, --file NAME, --json OUT,
#   --write-residuals: rewrite data/corpus_residuals.txt, the model's error vitsim compiles in (issue 37 item 3)]
# VITSIM_BENCH_SMOKE=1 (bench/lib.sh): the self-test, then the first row of two files, in seconds.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
vitsim=$(realpath -m "${1:-$here/build/app/vitsim}")
shift || true
if [ ! -x "$vitsim" ]; then
  echo "public_steps.sh: no vitsim binary at $vitsim: build it (README, Build) or pass its path" >&2
  exit 2
fi
. "$here/bench/lib.sh"
smoke_note "the self-test and the first row of two files"

echo "public training-step corpus: $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname), $(nproc) cores"
steps=("$here/bench/public_steps.py" --vitsim "$vitsim")
python3 "${steps[@]}" --self-test
if [ "$smoke" = 1 ]; then
  python3 "${steps[@]}" --smoke --conformal "$@"
else
  python3 "${steps[@]}" --conformal "$@"
fi
