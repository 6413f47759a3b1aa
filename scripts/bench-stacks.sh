#!/usr/bin/env bash
# What stacks cost: per stack sample in the kernel, in ring-buffer bytes,
# and in userspace unwinding, for --call-graph fp, dwarf and auto, on a program
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
# Each mode's JSON is checked: the busy callback's slow dispatch is there
# with stack samples.
#
# Usage: sudo scripts/bench-stacks.sh [options]
#   --seconds N          length of each mode's run (default 5)
#   --loops N            round trips of each perf bench sched pipe (default 300000)
#   --pipe-rounds N      rounds of the pipe benchmark, the median shown (default 3)
#   (--smoke: 2 s runs, 2000 round trips, one pipe round)
# Exit status: 0 done, 1 a run failed, 2 usage, 3 not root.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/bench-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench-common.sh"
SECONDS_RUN=5
LOOPS=300000
PIPE_ROUNDS=3
bench_opt --seconds SECONDS_RUN posint
bench_opt --loops LOOPS posint
bench_opt --pipe-rounds PIPE_ROUNDS posint
bench_parse "$@"
bench_smoke SECONDS_RUN=2 LOOPS=2000 PIPE_ROUNDS=1
((SECONDS_RUN >= 2)) || die "--seconds must be at least 2" 2

bench_prepare "it loads BPF programs" jq awk bpftool sysctl perf taskset /usr/bin/python3
bench_build looptrace_bench
LT=$BUILD_DIR/looptrace
bench_need "$LT"
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
for mode in fp dwarf auto; do
  d=$WORK/$mode
  "$LT" --debug unwind record --dispatch libglib-2.0.so.0:g_main_context_dispatch \
    --call-graph "$mode" --json "$d.json" -- \
    "$PY" "$LOOP" --duration "$MS" --kind busy --stall "$stall" --log "$d.log" \
    >"$d.out" 2>"$d.err" &
  lt=$!; PIDS+=("$lt")
  wait_attached "$d.err" "$mode"
  # The programs' counters just before the end (the tracer holds them).
  sleep $((SECONDS_RUN - 1))
  prog_stats "$lt" "$mode" >"$d.stats"
  wait "$lt" || die "$mode: looptrace failed: $(tail -3 "$d.err")"
  PIDS=()
  check_json "$d.json" "$mode" || continue
  samples=$(jq '[.slow_dispatches[].samples] | add // 0' "$d.json")
  busy=$(jq '[.slow_dispatches[].duration_ns] | add // 0' "$d.json")
  read -r runs ns < <(awk '$2 ~ /^lt_sample#/ { print $3, $4 }' "$d.stats")
  [[ $samples -gt 0 ]] || fail "$mode: no stack sample in the busy callback's slow dispatch"
  size=$DWARF_BYTES; [[ $mode == fp ]] && size=$FP_BYTES
  echo "$mode: lt_sample $runs runs, $(calc "$ns / ($runs ? $runs : 1)") ns/run;" \
    "$samples samples sent: <= $(calc "$ns / ($samples ? $samples : 1)" 0) ns each;" \
    "ring buffer $(calc "$samples * $size / ($busy / 1e9) / 1024" 0) KiB/s of busy span" \
    "($size B a sample)"
  [[ $mode == fp ]] || sed -n 's/.*\[unwind\] /  unwinding: /p' "$d.err"
done
sysctl -q -w kernel.bpf_stats_enabled="$STATS_WAS"

# Context switches of untraced threads, with the off-CPU hooks on.
pipe_us() { taskset -c "$CPU" perf bench sched pipe -l "$LOOPS" 2>/dev/null | awk '/usecs\/op/ { print $1 }'; }
# PIPE_ROUNDS rounds of untraced, then traced: the medians.
bases=() traceds=()
for ((r = 0; r < PIPE_ROUNDS; r++)); do
  bases+=("$(pipe_us)")
  "$LT" record --dispatch libglib-2.0.so.0:g_main_context_dispatch -- \
    "$PY" "$LOOP" --duration 60000 --kind sleep >"$WORK/pipe.out" 2>"$WORK/pipe.err" &
  lt=$!; PIDS+=("$lt")
  wait_attached "$WORK/pipe.err" pipe
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
[[ -n $base && -n $traced ]] || fail "perf bench sched pipe gave no usecs/op"
bench_exit
