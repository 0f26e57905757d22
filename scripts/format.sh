#!/usr/bin/env bash
# The tree's C++ in the repository's .clang-format (Google style, 110 columns).
#   bash scripts/format.sh           rewrites every C++ file in place
#   bash scripts/format.sh --check   lists the files that differ and exits 1 (scripts/test.sh runs this)
# The files: the tracked and untracked (not ignored) *.cpp, *.hpp, *.h and *.cu of the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format.sh: clang-format is not installed (bash scripts/setup.sh)" >&2; exit 2; }
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.cpp' '*.hpp' '*.h' '*.cu' | sort)
if [ "${1:-}" = --check ]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if [ ${#bad[@]} -gt 0 ]; then
    printf 'format.sh: not in .clang-format style: %s\n' "${bad[@]}" >&2
    echo "format.sh: run 'bash scripts/format.sh' to fix ${#bad[@]} file(s)" >&2
    exit 1
  fi
  echo "format.sh: ${#files[@]} files in style" >&2
else
  clang-format -i "${files[@]}"
fi
