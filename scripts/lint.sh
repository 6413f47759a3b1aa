#!/usr/bin/env bash
# Checks every shell script of the repository (the tracked files named *.sh
# or starting with a sh or bash shebang): bash -n, then shellcheck
# (scripts/setup.sh installs it); then the layers of user/
# (scripts/check-layers.py). Exit status: 0 clean, 1 a finding.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v shellcheck >/dev/null || { echo "lint: shellcheck is required (scripts/setup.sh)" >&2; exit 1; }

files=()
while IFS= read -r f; do
  [[ -f $f ]] || continue
  if [[ $f == *.sh || $f == *.bash ]] || head -n1 "$f" 2>/dev/null | grep -qE '^#!.*[/ ](ba)?sh( |$)'; then
    files+=("$f")
  fi
done < <(git ls-files)
[[ ${#files[@]} -gt 0 ]] || { echo "lint: no shell script found (not a git checkout?)" >&2; exit 1; }

status=0
for f in "${files[@]}"; do
  bash -n "$f" || { echo "lint: bash -n $f failed" >&2; status=1; }
done
# -x: follow the sourced libraries (their `shellcheck source=` lines).
shellcheck -x "${files[@]}" || status=1
# The modules of user/ point one way, and the command line stays thin.
scripts/check-layers.py || status=1
if [[ $status -eq 0 ]]; then
  echo "lint: ${#files[@]} shell scripts: bash -n and shellcheck clean; layers clean" >&2
fi
exit "$status"
