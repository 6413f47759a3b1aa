# shellcheck shell=bash
# Shared by the lab scripts (sourced, not run). The caller sets LAB (its
# name, for messages and its work directory), BUILD_DIR and KEEP.

die() { echo "$LAB: error: $1" >&2; exit "${2:-1}"; }
usage() { sed -n '/^# Usage:/,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

# lab_prepare: root, looptrace and refapp in BUILD_DIR (sets LT and APP),
# jq.
lab_prepare() {
  [[ $(id -u) -eq 0 ]] || die "needs root: looptrace traces with BPF (run: sudo $0)" 3
  LT=$BUILD_DIR/looptrace
  APP=$BUILD_DIR/refapp/refapp
  [[ -x $LT && -x $APP ]] ||
    die "no $LT or $APP (build: cmake --build $BUILD_DIR --target looptrace refapp)"
  command -v jq >/dev/null || die "jq is required (scripts/setup.sh)"
}

# lab_has_budgets: this looptrace takes --fail-if. (Not `--help | grep -q`:
# grep leaving early is a SIGPIPE for looptrace, a failure under pipefail.)
lab_has_budgets() {
  local help
  help=$("$LT" record --help 2>&1 || true)
  [[ $help == *--fail-if* ]]
}

# lab_workdir: WORK, a fresh directory removed on the way out (kept with
# --keep).
lab_workdir() {
  WORK=$(mktemp -d "/tmp/$LAB.XXXXXX")
  trap lab_cleanup EXIT
}
lab_cleanup() {
  if [[ $KEEP -eq 1 ]]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
