#!/usr/bin/env bash
# A lab run that gates on budgets: the reference app with a 60 Hz input
# stream under `looptrace record --fail-if ...`, with the budgets of
# scripts/lab/refapp.budgets (or --budgets FILE), run twice:
#
#   smooth  background work and input only: every budget must hold, and
#           looptrace exits 0;
#   janky   the same plus a 300 ms busy stall with a tap arriving during
#           it: `dispatch.max > 100ms` and `input.total_latency_dur.max >
#           100ms` must break, looptrace must exit 3 and name them on
#           stderr, and the JSON's budgets must say so.
#
# Prints each run's budgets as the JSON reports them. This is the pattern a
# lab script follows: a budgets file, `--fail-if` per line, exit status 3
# for "the run was measured and broke a budget", the JSON for which.
# Exit: 0 when both runs went as stated, 1 otherwise, 2 bad usage, 3 not
# root. Docs: docs/lab.md.
#
# Usage: sudo scripts/lab/budgets.sh [options]
#   -B, --build-dir DIR  build with looptrace and refapp (default: build)
#   --budgets FILE       budgets file (default: scripts/lab/refapp.budgets)
#   --keep               keep the work directory (reports, logs)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=$REPO/build
BUDGETS_FILE=$REPO/scripts/lab/refapp.budgets
KEEP=0
LAB=budgets-lab
. "$REPO/scripts/lab/lab-common.sh"

while [[ $# -gt 0 ]]; do
  case "$1" in
    -B|--build-dir|--budgets) [[ $# -ge 2 ]] || die "$1 needs a value" 2 ;;
  esac
  case "$1" in
    -B|--build-dir) BUILD_DIR=$(realpath -m "$2"); shift 2 ;;
    --budgets) BUDGETS_FILE=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option $1 (see --help)" 2 ;;
  esac
done
[[ -r $BUDGETS_FILE ]] || die "cannot read $BUDGETS_FILE" 2
lab_prepare
lab_has_budgets || die "$LT has no --fail-if"

# One --fail-if per line, comments and blank lines dropped.
FAIL_IF=()
while IFS= read -r line; do
  line=${line%%#*}
  line=$(echo "$line" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
  [[ -n $line ]] && FAIL_IF+=(--fail-if "$line")
done <"$BUDGETS_FILE"
[[ ${#FAIL_IF[@]} -gt 0 ]] || die "no budgets in $BUDGETS_FILE" 2

lab_workdir

APP_ARGS=(--rate 200 --duration 3000 --input-rate 60 --input-type motion)

# run NAME EXTRA_APP_ARGS...: one traced run; sets RC. Niced so that a
# loaded machine's preemption does not pass for the app's own slowness.
run() {
  local name=$1
  shift
  set +e
  nice -n -10 "$LT" record --profile refapp --input --json "$WORK/$name.json" -q \
    "${FAIL_IF[@]}" -- "$APP" "${APP_ARGS[@]}" "$@" --log "$WORK/$name.jsonl" \
    2>"$WORK/$name.stderr"
  RC=$?
  set -e
  printf '\n== %s: looptrace exited %d\n' "$name" "$RC"
  jq -r '.budgets[] | [(if .broken then "BROKEN" else "held" end), .expr,
    (if .value == null then "no data"
     elif .unit == "ns" then "\(.value / 1e6 * 10 | round / 10) ms"
     else "\(.value)" end), .detail] | @tsv' "$WORK/$name.json" |
    awk -F'\t' '{printf "  %-6s  %-38s  %-10s  %s\n", $1, $2, $3, $4}'
}

# broken_set NAME: the broken budgets' metrics, sorted, comma-separated.
broken_set() {
  jq -r '[.budgets[] | select(.broken) | .metric] | sort | join(",")' "$WORK/$1.json"
}

ok=1
run smooth
if [[ $RC -ne 0 || -n $(broken_set smooth) ]]; then
  echo "budgets-lab: the smooth run broke budgets (exit $RC): $(broken_set smooth)" >&2
  cat "$WORK/smooth.stderr" >&2
  ok=0
fi

run janky --stall busy:300@1500 --input-tap 1550
want="dispatch.max,input.total_latency_dur.max"
if [[ $RC -ne 3 ]]; then
  echo "budgets-lab: the janky run exited $RC, not 3" >&2
  cat "$WORK/janky.stderr" >&2
  ok=0
elif [[ $(broken_set janky) != "$want" ]]; then
  echo "budgets-lab: the janky run broke $(broken_set janky), not $want" >&2
  ok=0
else
  for m in ${want//,/ }; do
    grep -q "budget broken: $m" "$WORK/janky.stderr" ||
      { echo "budgets-lab: no 'budget broken: $m' line on stderr" >&2; ok=0; }
  done
fi
[[ $ok -eq 1 ]] && echo -e "\nbudgets-lab: both runs as expected"
[[ $ok -eq 1 ]]
