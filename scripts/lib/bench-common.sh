# Shared by scripts/bench.sh and scripts/bench-input.sh (sourced, not run).
# The caller sets BENCH (its name, for messages), REPO, BUILD_DIR, DO_BUILD,
# CPU ("" = the last one), USE_BPFTRACE and KEEP before calling these.

die() { echo "$BENCH: error: $1" >&2; exit "${2:-1}"; }

# bench_prepare WHY TOOL...: root, the tools, bpftrace (or not), the CPU
# the target is pinned to (sets NCPU and CPU).
bench_prepare() {
  local why=$1 tool
  shift
  [[ $(id -u) -eq 0 ]] || die "needs root: $why (run: sudo $0)" 3
  for tool in "$@"; do
    command -v "$tool" >/dev/null || die "$tool is required"
  done
  if [[ $USE_BPFTRACE -eq 1 ]] && ! command -v bpftrace >/dev/null; then
    echo "$BENCH: bpftrace not found: skipping that configuration" >&2
    USE_BPFTRACE=0
  fi
  NCPU=$(nproc)
  [[ -n $CPU ]] || CPU=$((NCPU - 1))
  [[ $CPU =~ ^[0-9]+$ ]] && ((CPU < NCPU)) || die "--cpu must be 0..$((NCPU - 1))" 2
}

# bench_build: the looptrace_bench target in BUILD_DIR (RelWithDebInfo),
# unless --no-build.
bench_build() {
  [[ $DO_BUILD -eq 1 ]] || return 0
  echo "== building in $BUILD_DIR" >&2
  if [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
    cmake -S "$REPO" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  fi
  cmake --build "$BUILD_DIR" -j"$NCPU" --target looptrace_bench >/dev/null ||
    die "build failed (cmake --build $BUILD_DIR --target looptrace_bench)"
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

FAILED=0
fail() { echo "FAIL: $*" | tee -a "$WORK/failures" >&2; FAILED=1; }
calc() { awk "BEGIN { printf \"%.${2:-1}f\", $1 }"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
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
wait_for() {  # wait_for FILE PATTERN SECONDS
  local i
  for ((i = 0; i < $3 * 20; i++)); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  return 1
}

# prog_stats HOLDER_PID LABEL: "LABEL prog_name run_cnt run_time_ns" for each
# program the holder has open (by the prog_id lines of its fds' fdinfo:
# this bpftool may lack the pid column, and other tracers may be running).
prog_stats() {
  local ids
  ids=$(cat /proc/"$1"/fdinfo/* 2>/dev/null | awk '$1 == "prog_id:" { print $2 }' | sort -un | jq -s -c .)
  bpftool -j prog show | jq -r --argjson ids "$ids" --arg l "$2" '
    .[] | select(.id as $i | $ids | index($i))
    | "\($l) \(.name // "")#\(.id):\(.bytes_xlated // 0)B \(.run_cnt // 0) \(.run_time_ns // 0)"'
}
