#!/usr/bin/env bash
# What stacks cost: per stack sample in the kernel, in ring-buffer bytes,
# and in userspace unwinding, for --call-graph fp and dwarf, on a program
# nobody here wrote (Debian's python3 running a GLib main loop whose
# callbacks busy-loop, tests/programs/glib_loop.py); and the off-CPU hooks'
# cost per context switch of untraced threads (perf bench sched pipe).
#
# Per mode, one run of --seconds with kernel.bpf_stats_enabled=1 gives:
#   lt_sample       runs, ns per run (most runs find no span and return),
#                   and its whole run time divided by the samples it sent
#                   (an upper bound of one sample's kernel cost);
#   ring buffer     samples sent x record size, per second of busy span;
#   unwinding       stacks unwound by CFI per second of the unwinder's own
#                   time (looptrace --debug unwind), dwarf only.
# Then `perf bench sched pipe` (two untraced processes switching through a
# pipe) untraced and under looptrace (tracing the python3 loop, off-CPU
# hooks on), both ends pinned to one CPU (across CPUs the time is mostly
# idle-state wakeups, and varies 5x): the difference per switch is what
# the hooks cost others.
#
# Usage: sudo scripts/bench-stacks.sh [-B BUILD_DIR] [--no-build]
#          [--seconds N] [--loops N] [--keep]
# Exit status: 0 done, 1 a run failed, 2 usage, 3 not root.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR="$REPO/build-bench"
DO_BUILD=1
SECONDS_RUN=5
LOOPS=300000
CPU=""
USE_BPFTRACE=0
KEEP=0

BENCH=bench-stacks.sh
# shellcheck source=lib/bench-common.sh
source "$REPO/scripts/lib/bench-common.sh"
usage() { sed -n '/^# Usage:/,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    -B|--build-dir|--seconds|--loops)
      [[ $# -ge 2 ]] || { echo "$BENCH: $1 needs a value" >&2; usage; } ;;
  esac
  case "$1" in
    -B|--build-dir) BUILD_DIR=$(realpath -m "$2"); shift 2 ;;
    --no-build) DO_BUILD=0; shift ;;
    --seconds) SECONDS_RUN=$2; shift 2 ;;
    --loops) LOOPS=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) usage ;;
    *) echo "$BENCH: unknown option $1" >&2; usage ;;
  esac
done
[[ $SECONDS_RUN =~ ^[1-9][0-9]*$ && $LOOPS =~ ^[1-9][0-9]*$ ]] ||
  die "--seconds and --loops must be positive integers" 2

bench_prepare "it loads BPF programs" jq awk bpftool sysctl perf /usr/bin/python3
bench_build
LT=$BUILD_DIR/looptrace
[[ -x $LT ]] || die "$LT is missing: build the looptrace target"
bench_workdir looptrace-bench-stacks
PY=/usr/bin/python3
LOOP="$REPO/tests/programs/glib_loop.py"
MS=$((SECONDS_RUN * 1000))
# Record sizes (include/looptrace/abi.h): lt_sample_rec and lt_ustack_rec.
FP_BYTES=$((24 + 16 + 8 * 64))
DWARF_BYTES=$((FP_BYTES + 8 * 17 + 8 + 8 * 8 + 8192))

# A busy callback for most of the run: one stall of MS - 500 ms.
stall="$((MS - 700))@300"

sysctl -q -w kernel.bpf_stats_enabled=1
for mode in fp dwarf; do
  d=$WORK/$mode
  "$LT" --debug unwind record --dispatch libglib-2.0.so.0:g_main_context_dispatch \
    --call-graph "$mode" --json "$d.json" -- \
    "$PY" "$LOOP" --duration "$MS" --kind busy --stall "$stall" --log "$d.log" \
    >"$d.out" 2>"$d.err" &
  lt=$!; PIDS+=("$lt")
  wait_for "$d.err" "looptrace: tracing" 30 || die "$mode: looptrace did not start: $(cat "$d.err")"
  # The programs' counters just before the end (the tracer holds them).
  sleep $((SECONDS_RUN - 1))
  prog_stats "$lt" "$mode" >"$d.stats"
  wait "$lt" || die "$mode: looptrace failed: $(tail -3 "$d.err")"
  PIDS=()
  samples=$(jq '[.slow_dispatches[].samples] | add // 0' "$d.json")
  busy=$(jq '[.slow_dispatches[].duration_ns] | add // 0' "$d.json")
  read -r runs ns < <(awk '$2 ~ /^lt_sample#/ { print $3, $4 }' "$d.stats")
  size=$FP_BYTES; [[ $mode == dwarf ]] && size=$DWARF_BYTES
  echo "$mode: lt_sample $runs runs, $(calc "$ns / ($runs ? $runs : 1)") ns/run;" \
    "$samples samples sent: <= $(calc "$ns / ($samples ? $samples : 1)" 0) ns each;" \
    "ring buffer $(calc "$samples * $size / ($busy / 1e9) / 1024" 0) KiB/s of busy span" \
    "($size B a sample)"
  [[ $mode == fp ]] || sed -n 's/.*\[unwind\] /  unwinding: /p' "$d.err"
done
sysctl -q -w kernel.bpf_stats_enabled="$STATS_WAS"

# Context switches of untraced threads, with the off-CPU hooks on.
pipe_us() { taskset -c "$CPU" perf bench sched pipe -l "$LOOPS" 2>/dev/null | awk '/usecs\/op/ { print $1 }'; }
# Three rounds of untraced, then traced: the medians.
bases=() traceds=()
for r in 1 2 3; do
  bases+=("$(pipe_us)")
  "$LT" record --dispatch libglib-2.0.so.0:g_main_context_dispatch -- \
    "$PY" "$LOOP" --duration 60000 --kind sleep >"$WORK/pipe.out" 2>"$WORK/pipe.err" &
  lt=$!; PIDS+=("$lt")
  wait_for "$WORK/pipe.err" "looptrace: tracing" 30 || die "looptrace did not start: $(cat "$WORK/pipe.err")"
  traceds+=("$(pipe_us)")
  kill -INT "$lt" 2>/dev/null || true
  wait "$lt" || true
  PIDS=()
done
base=$(printf '%s\n' "${bases[@]}" | median)
traced=$(printf '%s\n' "${traceds[@]}" | median)
echo "perf bench sched pipe on CPU $CPU ($LOOPS round trips, 2 switches each):" \
  "untraced ${bases[*]} us/op, with looptrace attached elsewhere ${traceds[*]} us/op;" \
  "medians $base / $traced: $(calc "($traced - $base) * 1000 / 2" 0) ns per switch"
[[ $FAILED -eq 0 ]] || exit 1
