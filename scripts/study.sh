#!/usr/bin/env bash
# Re-runs the study's experiments (scenarios/study/*.xml): prints each predicted table and redraws the
# plots in docs/img/ that docs/study.md shows. Usage: scripts/study.sh [path/to/vitsim]
set -euo pipefail
cd "$(dirname "$0")/.."
VITSIM=${1:-build/app/vitsim}
[ -x "$VITSIM" ] || { echo "study.sh: no vitsim binary at $VITSIM (build it, or pass its path)" >&2; exit 1; }
mkdir -p docs/img
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for name in vector-strong-b64 vector-strong-b16 vector-weak-b64 vector-intranode-cifar100-b64 \
            vector-internode-b64 nebula-batch tesla-strong-b16 tesla-weak-b16; do
  echo "## $name"
  "$VITSIM" predict -q "scenarios/study/$name.xml" --format json --out "$tmp/$name.json"
  "$VITSIM" predict -q "scenarios/study/$name.xml"
  "$VITSIM" plot "$tmp/$name.json" --out "docs/img/$name.svg"
  echo
done
# Comparisons: finding 2 (micro-batch 16 against 64) and finding 6 (intra- against inter-node).
"$VITSIM" plot "$tmp/vector-strong-b16.json" "$tmp/vector-strong-b64.json" --out docs/img/vector-b16-vs-b64.svg
"$VITSIM" plot "$tmp/vector-intranode-cifar100-b64.json" "$tmp/vector-internode-b64.json" \
  --out docs/img/vector-intra-vs-inter.svg
