#!/usr/bin/env bash
# Checks that every C++ source of the repository is formatted as its .clang-format says, with
# clang-format-14 (Debian 12's; another version formats some constructs differently). Names each
# file that is not and exits 1. `scripts/format_check.sh --fix` formats them in place instead.
# CTest runs it as the test `format`, so CI checks it with the rest of the suite.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
tool="${LOCKSTEP_CLANG_FORMAT:-clang-format-14}"
command -v "$tool" >/dev/null || {
  echo "format_check: $tool is missing (Debian: apt-get install clang-format-14;" \
    "scripts/setup.sh installs it)" >&2
  exit 2
}
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.cc' '*.h')
else
  mapfile -t files < <(find src include tests examples fuzz bench python \
    \( -name '*.cc' -o -name '*.h' \) 2>/dev/null | sort)
fi
if [[ "${1:-}" == --fix ]]; then
  "$tool" -i "${files[@]}"
  exit 0
fi
# One run over every file: each difference is an "error" line naming its file.
mapfile -t bad < <("$tool" --dry-run -Werror "${files[@]}" 2>&1 |
  sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*/\1/p' | sort -u)
if ((${#bad[@]} > 0)); then
  echo "format_check: ${#bad[@]} of ${#files[@]} files are not formatted as .clang-format says:"
  printf '  %s\n' "${bad[@]}"
  echo "Fix: bash scripts/format_check.sh --fix"
  exit 1
fi
echo "format_check: all ${#files[@]} files formatted"
