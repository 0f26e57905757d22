#!/usr/bin/env bash
# Byte-identical check for a change that must not change behaviour (issue 24): runs every shipped scenario
# (scenarios/**/*.xml) with two vitsim binaries and compares the table, the JSON, the CSV and the Chrome trace,
# and every shipped platform spec through `vitsim platform SPEC`. Prints one line per difference; exit 0
# when every output is identical, 1 otherwise.
#   bash scripts/same_output.sh BEFORE_VITSIM AFTER_VITSIM [SCENARIO...]
# Example, against the commit before a restructure:
#   git worktree add /tmp/before <commit> && cmake -S /tmp/before -B /tmp/before/build -DVITSIM_WITH_TORCH=OFF \
#     -DVITSIM_BUILD_TESTS=OFF && cmake --build /tmp/before/build --target vitsim -j2
#   bash scripts/same_output.sh /tmp/before/build/app/vitsim build/app/vitsim
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  echo "usage: $0 BEFORE_VITSIM AFTER_VITSIM [SCENARIO...]" >&2
  exit 2
fi
before=$(realpath "$1"); after=$(realpath "$2"); shift 2
for b in "$before" "$after"; do
  [ -x "$b" ] || { echo "same_output: $b is not an executable" >&2; exit 2; }
done
if [ $# -gt 0 ]; then scenarios=("$@"); else mapfile -t scenarios < <(find scenarios -name '*.xml' | sort); fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
differ=0; compared=0
# run NAME BIN ARGS...: stdout+stderr and exit status of one command, into $work/NAME.{before,after}
run_both() {
  local name=$1; shift
  for side in before after; do
    local bin=$before; [ $side = after ] && bin=$after
    local out="$work/$name.$side"
    local args=("$@")
    args=("${args[@]//@OUT@/$out}")
    "$bin" "${args[@]}" >"$out.stdout" 2>"$out.stderr"
    echo "exit $?" >>"$out.stdout"
  done
  compared=$((compared + 1))
  for f in "$work/$name.before"*; do
    local g=${f/.before/.after}
    if ! cmp -s "$f" "$g"; then
      echo "DIFFERS: $name (${f##*.before}): $(diff "$f" "$g" | head -3 | tr '\n' ' ' | cut -c1-200)"
      differ=1
    fi
  done
}
for s in "${scenarios[@]}"; do
  n=$(echo "$s" | tr '/' '_')
  run_both "$n.table" predict "$s" --quiet --format table
  run_both "$n.json" predict "$s" --quiet --format json --trace @OUT@.trace.json
  run_both "$n.csv" predict "$s" --quiet --format csv
done
for spec in platforms/specs/*.json; do
  n=$(echo "$spec" | tr '/' '_')
  run_both "$n.platform" platform "$spec" --out @OUT@.xml
done
echo "same_output: $compared commands compared, $([ $differ = 0 ] && echo 'all identical' || echo 'some differ')"
exit $differ
