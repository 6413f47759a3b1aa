# shellcheck shell=bash
# Shared by the bench scripts (scripts/bench*.sh; sourced, not run): their
# common options, root and tools, the build, the work directory, and the
# checks of looptrace's JSON. docs/benchmark-method.md says what each
# benchmark measures.
#
# A script sources this file, which sets the common settings (REPO,
# BUILD_DIR, DO_BUILD, KEEP, SMOKE, CPU, USE_BPFTRACE, FAILED), declares its
# own options with bench_opt and bench_flag, then calls bench_parse "$@";
# bench_smoke VAR=VALUE... gives the --smoke values of the settings the
# command line left alone.
#
# Common options, for every bench script:
#   -B, --build-dir DIR  build directory (default: <repo>/build-bench)
#   --no-build           use the binaries already in the build directory
#   --keep               keep the work directory (raw outputs)
#   --smoke              tiny counts and durations: the whole path in seconds
#                        (the build, the attaches, the checks), figures
#                        meaningless; scripts/test.sh runs it
#   -h, --help           the script's usage

BENCH=$(basename "$0")
# A command that fails outside a check ends the script (set -e): say which,
# for a CI log that would otherwise show only "FAILED (exit 1)".
set -E
trap 'echo "$BENCH: error: line $LINENO: exit $? from: $BASH_COMMAND" >&2' ERR
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR="$REPO/build-bench"
DO_BUILD=1
KEEP=0
SMOKE=0
CPU=""
USE_BPFTRACE=0
FAILED=0
WORK=""
PIDS=()
STATS_WAS=0

die() { echo "$BENCH: error: $1" >&2; exit "${2:-1}"; }

# usage [STATUS]: the script's header from "# Usage:" to the end of that
# comment block, then the common options above; on stdout for -h (status
# 0), on stderr otherwise.
usage() {
  local status=${1:-2}
  {
    awk '/^# Usage:/ { p = 1 } p && !/^#/ { exit } p { sub(/^# ?/, ""); print }' "$0"
    awk '/^# Common options/ { p = 1 } p && !/^#/ { exit } p { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"
  } | if [[ $status -eq 0 ]]; then cat; else cat >&2; fi
  exit "$status"
}
usage_error() { echo "$BENCH: $1" >&2; usage 2; }

# --- options --------------------------------------------------------------------
declare -A BENCH_OPT_VAR=() BENCH_OPT_CHECK=() BENCH_FLAG_SET=() BENCH_GIVEN=()
# bench_opt OPTION VAR [CHECK]: OPTION takes a value stored in VAR. CHECK:
# posint (1, 2, ...), uint (0, 1, ...), path (made absolute) or nothing.
bench_opt() { BENCH_OPT_VAR[$1]=$2; BENCH_OPT_CHECK[$1]=${3:-}; }
# bench_flag OPTION VAR=VALUE...: OPTION takes no value and sets each VAR.
bench_flag() { local o=$1; shift; BENCH_FLAG_SET[$o]="$*"; }
bench_opt --build-dir BUILD_DIR path
bench_flag --no-build DO_BUILD=0
bench_flag --keep KEEP=1
bench_flag --smoke SMOKE=1

bench_parse() {
  local o var a
  while [[ $# -gt 0 ]]; do
    o=$1
    [[ $o == -B ]] && o=--build-dir
    if [[ -n ${BENCH_OPT_VAR[$o]:-} ]]; then
      [[ $# -ge 2 ]] || usage_error "$1 needs a value"
      var=${BENCH_OPT_VAR[$o]}
      printf -v "$var" '%s' "$2"
      BENCH_GIVEN[$var]=1
      shift 2
    elif [[ -n ${BENCH_FLAG_SET[$o]:-} ]]; then
      for a in ${BENCH_FLAG_SET[$o]}; do
        printf -v "${a%%=*}" '%s' "${a#*=}"
        BENCH_GIVEN[${a%%=*}]=1
      done
      shift
    elif [[ $o == -h || $o == --help ]]; then
      usage 0
    else
      usage_error "unknown option $1"
    fi
  done
  for o in "${!BENCH_OPT_VAR[@]}"; do
    var=${BENCH_OPT_VAR[$o]}
    case ${BENCH_OPT_CHECK[$o]} in
      posint) [[ ${!var} =~ ^[1-9][0-9]*$ ]] || die "$o must be a positive integer" 2 ;;
      uint) [[ ${!var} =~ ^[0-9]+$ ]] || die "$o must be a non-negative integer" 2 ;;
      path) [[ -z ${!var} ]] || printf -v "$var" '%s' "$(realpath -m "${!var}")" ;;
    esac
  done
}

# bench_smoke VAR=VALUE...: with --smoke, each VAR the command line did not
# set takes VALUE.
bench_smoke() {
  local a
  [[ $SMOKE -eq 1 ]] || return 0
  for a in "$@"; do
    [[ -n ${BENCH_GIVEN[${a%%=*}]:-} ]] || printf -v "${a%%=*}" '%s' "${a#*=}"
  done
}

# --- root, tools, build ---------------------------------------------------------
# bench_prepare WHY TOOL...: root (unless WHY is empty), the tools, bpftrace
# (or not), the CPU the target is pinned to (sets NCPU and CPU).
bench_prepare() {
  local why=$1 tool
  shift
  [[ -z $why || $(id -u) -eq 0 ]] || die "needs root: $why (run: sudo $0)" 3
  for tool in "$@"; do
    command -v "$tool" >/dev/null || die "$tool is required"
  done
  if [[ $USE_BPFTRACE -eq 1 ]] && ! command -v bpftrace >/dev/null; then
    echo "$BENCH: bpftrace not found: skipping that configuration" >&2
    USE_BPFTRACE=0
  fi
  NCPU=$(nproc)
  [[ -n $CPU ]] || CPU=$((NCPU - 1))
  if ! [[ $CPU =~ ^[0-9]+$ ]] || ((CPU >= NCPU)); then
    die "--cpu must be 0..$((NCPU - 1))" 2
  fi
}

# bench_build TARGET...: the targets in BUILD_DIR (RelWithDebInfo), unless
# --no-build.
bench_build() {
  local targets=("$@")
  [[ $DO_BUILD -eq 1 ]] || return 0
  echo "== building ${targets[*]} in $BUILD_DIR" >&2
  if [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
    cmake -S "$REPO" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  fi
  cmake --build "$BUILD_DIR" -j"$(nproc)" --target "${targets[@]}" >/dev/null ||
    die "build failed (cmake --build $BUILD_DIR --target ${targets[*]})"
}

# bench_need BINARY...: each is an executable of the build directory.
bench_need() {
  local b
  for b in "$@"; do
    [[ -x $b ]] || die "$b is missing: build the looptrace_bench target (or drop --no-build)"
  done
}

# bench_workdir PREFIX: sets WORK, a fresh directory removed on the way out
# (kept with --keep), and PIDS, the tools and targets still running, killed
# on the way out; kernel.bpf_stats_enabled is put back as it was.
bench_workdir() {
  WORK=$(mktemp -d "/tmp/$1.XXXXXX")
  STATS_WAS=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null || echo 0)
  PIDS=()
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
}
bench_cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  sysctl -q -w kernel.bpf_stats_enabled="$STATS_WAS" >/dev/null 2>&1 || true
  if [[ $KEEP -eq 1 ]]; then echo "raw outputs kept in $WORK" >&2; else rm -rf "$WORK"; fi
}

# --- helpers --------------------------------------------------------------------
fail() { echo "FAIL: $*" | tee -a "$WORK/failures" >&2; FAILED=1; }
calc() { awk "BEGIN { printf \"%.${2:-1}f\", $1 }"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
wait_for() {  # wait_for FILE PATTERN SECONDS
  local i
  for ((i = 0; i < $3 * 20; i++)); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  return 1
}
# wait_attached LOG WHAT [PID]: looptrace (its stderr in LOG; PID, when
# given, the process that runs it) printed its "tracing" line within 60 s,
# or the run dies: at once when PID has exited.
wait_attached() {
  local i
  for ((i = 0; i < 1200; i++)); do
    grep -q "^looptrace: tracing" "$1" 2>/dev/null && return 0
    [[ -z ${3:-} ]] || kill -0 "$3" 2>/dev/null || break
    sleep 0.05
  done
  die "$2: looptrace did not attach: $(cat "$1")"
}
# bench_exit: the failures counted, as the exit status.
bench_exit() {
  if [[ $FAILED -ne 0 && $SMOKE -eq 1 ]]; then echo "$BENCH --smoke: FAILED" >&2; fi
  exit "$FAILED"
}

# prog_stats HOLDER_PID LABEL: "LABEL prog_name#id:bytesB run_cnt run_time_ns"
# for each program the holder has open (by the prog_id lines of its fds'
# fdinfo: this bpftool may lack the pid column, and other tracers may be
# running).
# fd_ids HOLDER KIND: the ids (a JSON array) of the BPF objects of KIND
# (prog_id, map_id) the holder has open. An fd closed while its fdinfo is
# read is skipped: cat fails on it, and under pipefail a failed cat once
# ended a bench run in silence (the holder closes fds after attaching).
fd_ids() {
  { cat /proc/"$1"/fdinfo/* 2>/dev/null || true; } |
    awk -v k="$2:" '$1 == k { print $2 }' | sort -un | jq -s -c .
}
prog_stats() {
  local ids
  ids=$(fd_ids "$1" prog_id)
  bpftool -j prog show | jq -r --argjson ids "$ids" --arg l "$2" '
    .[] | select(.id as $i | $ids | index($i))
    | "\($l) \(.name // "")#\(.id):\(.bytes_xlated // 0)B \(.run_cnt // 0) \(.run_time_ns // 0)"'
}

# --- looptrace's JSON -----------------------------------------------------------
# lost_events JSON: looptrace's nonzero `lost` counters that lose events, as
# one JSON object ({} when none). unseen_switches (a context switch the
# books missed: the span's CPU split comes from the kernel's counters) and
# blocks_capped (blocking points past the per-span cap) lose detail, not
# events, as in the report's `lost` budget (docs/looptrace.md); they are
# shown by the callers, not failed on.
lost_events() {
  jq -c '.lost | with_entries(select(.value != 0 and .key != "unseen_switches"
                                     and .key != "blocks_capped"))' "$1"
}
# thread_count JSON PID: the spans looptrace counted for PID's threads (not
# their delivery lags: a GLib timeout is counted in both).
thread_count() {
  jq --argjson p "$2" '[.threads[] | select(.pid == $p and .role != "delivery") | .count] | add // 0' "$1"
}
# check_json JSON WHAT: looptrace wrote JSON that jq can read.
check_json() {
  if [[ ! -s $1 ]] || ! jq -e 'type == "object"' "$1" >/dev/null 2>&1; then
    fail "$2: no JSON from looptrace"
    return 1
  fi
}
# check_spans JSON PID MADE WHAT: looptrace counted MADE spans for PID.
check_spans() {
  local seen
  check_json "$1" "$4" || return 0
  seen=$(thread_count "$1" "$2")
  [[ $seen == "$3" ]] || fail "$4: looptrace counted $seen dispatches, the target made $3"
}
# check_not_lost JSON WHAT: no `lost` counter that loses events above 0.
check_not_lost() {
  local lost
  check_json "$1" "$2" || return 0
  lost=$(lost_events "$1")
  [[ $lost == "{}" ]] || fail "$2: looptrace lost events: $lost"
}
# check_same_json LIVE REPLAY WHAT: `looptrace report` of the recording
# wrote the live JSON byte for byte.
check_same_json() {
  cmp -s "$1" "$2" || fail "$3: the replayed JSON differs from the live one"
}

# --- lt_sample's cost per sample (bench-python.sh, bench-js.sh) ---------------
# map_id HOLDER NAME: the id of map NAME among those process HOLDER holds.
map_id() {
  local ids
  ids=$(fd_ids "$1" map_id)
  bpftool -j map show | jq -r --argjson ids "$ids" --arg n "$2" \
    '.[] | select((.id as $i | $ids | index($i)) and .name == $n) | .id' | head -1
}
# samples MAP_ID: LT_CNT_SAMPLES summed over the CPUs (the map's BTF gives
# bpftool's "formatted" values).
samples() {
  bpftool -j map lookup id "$1" key 7 0 0 0 | jq -e '[.formatted.values[].value] | add'
}
# snapshot HOLDER COUNTERS: "runs run_time_ns samples" now.
snapshot() {
  local s
  s=$(prog_stats "$1" x | awk '$2 ~ /^lt_sample#/ { print $3, $4 }')
  echo "$s $(samples "$2")"
}
# window HOLDER COUNTERS (over WINDOW seconds): "runs ns samples" over one window.
window() {
  local a b
  a=$(snapshot "$1" "$2")
  sleep "$WINDOW"
  b=$(snapshot "$1" "$2")
  echo "$a $b" | awk '{ print $4 - $1, $5 - $2, $6 - $3 }'
}
# per_sample "runs ns samples" IDLE_NS_PER_RUN: ns per sample sent.
per_sample() {
  echo "$1" | awk -v e="$2" '{ printf "%.0f", $3 ? ($2 - ($1 - $3) * e) / $3 : 0 }'
}
