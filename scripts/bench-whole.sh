#!/usr/bin/env bash
# looptrace overhead, one tool at a time: what a traced dispatch costs the
# whole process, as a user running one tracer pays it.
#
# For each configuration a fresh lt_bench_target (tests/bench) makes
# --calls calls of lt_bench_dispatch in a tight loop, pinned to one CPU,
# under:
#   untraced     nothing
#   floor        the empty uprobe + uretprobe pair (lt-bench-floor)
#   looptrace    `looptrace record -p PID --dispatch BIN:FN`, defaults
#                (stack sampler, sched_switch/sched_waking hooks, off-CPU on)
#   lt-no-sample the same with --sample-freq 0
#   lt-no-offcpu the same with --no-off-cpu
#   bpftrace     the one-liner of scripts/bench.sh (start time + histogram)
# and reports per configuration: ns per call (the target's own clock, the
# median of its --rounds rounds) and the CPU time of the whole target
# process per call (user + system, the scheduler's count in
# /proc/PID/task/*/schedstat, warm-up and start-up included),
# each as a median over --repeats runs, the configurations interleaved run
# by run so that a drift of the machine hits them alike. x floor is the
# median over repeats of (config - untraced) / (floor - untraced) in the
# same repeat. scripts/bench.sh measures the same tools at once in one
# process; docs/benchmarks.md compares the two methods.
#
# Every looptrace run is checked from its JSON: the calls it counted =
# the calls the target made.
#
# Usage: sudo scripts/bench-whole.sh [options]
#   --repeats N          runs of each configuration (default 5)
#   --calls N            calls per timed round (default 200000)
#   --rounds N           timed rounds per run (default 10)
#   --cpu N              CPU the target is pinned to (default: the last one)
#   --no-bpftrace        skip the bpftrace configuration
#   --glib               the target is GLib's idle dispatch instead
#                        (lt_bench_target --func glib_idle: one main-context
#                        iteration per call), probed where the glib profile
#                        probes it (libglib-2.0.so.0:*(g_idle_funcs+16));
#                        configurations untraced, floor, looptrace
#                        (--profile glib: callback, name and source keys),
#                        lt-no-keys (--idle on the same function), and
#                        lt-no-sample, lt-no-offcpu; no bpftrace
#   --glib-timeout       the same with a GLib timeout named as GTK names its
#                        frame clock's flush idle (lt_bench_target --func
#                        glib_timeout, *(g_timeout_funcs+16)): the glib
#                        profile's frame test on a source that is no frame;
#                        lt-no-frames is the glib profile's timeout probe
#                        without its "frame" (a profile file: the same keys,
#                        no frame test)
#   --glib-frame         the same named as its paint idle: every dispatch
#                        a frame, recorded (--func glib_frame)
#   --vcall              the target is a dispatch made as a virtual call
#                        (lt_bench_target --func lt_bench_vcall: `call
#                        *0x10(%rax)` to lt_bench::Target::dispatch, as
#                        AOSP's Looper calls its handlers); configurations
#                        untraced, floor (the empty pair on the method),
#                        looptrace (--dispatch on the method: uprobe +
#                        uretprobe) and lt-call-site (--dispatch-call on
#                        lt_bench_vcall: two plain uprobes at the call and
#                        its return, the android profile's span); no
#                        bpftrace
#   --bpf-stats          also one more looptrace run with
#                        kernel.bpf_stats_enabled=1: ns per run of
#                        lt_span_entry and lt_span_return
#   (--smoke: one run of each configuration, 2 rounds of 2000 calls, no bpftrace)
# Exit status: 0 done, 1 a run failed, 2 usage, 3 not root.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/bench-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench-common.sh"
REPEATS=5
CALLS=200000
ROUNDS=10
USE_BPFTRACE=1
GLIB=0
bench_opt --repeats REPEATS posint
bench_opt --calls CALLS posint
bench_opt --rounds ROUNDS posint
bench_opt --cpu CPU
bench_flag --no-bpftrace USE_BPFTRACE=0
bench_flag --glib GLIB=1 USE_BPFTRACE=0
bench_flag --glib-timeout GLIB=2 USE_BPFTRACE=0
bench_flag --glib-frame GLIB=3 USE_BPFTRACE=0
VCALL=0
bench_flag --vcall VCALL=1 USE_BPFTRACE=0
BPF_STATS=0
bench_flag --bpf-stats BPF_STATS=1
bench_parse "$@"
bench_smoke REPEATS=1 CALLS=2000 ROUNDS=2 USE_BPFTRACE=0

bench_prepare "it loads BPF programs and attaches uprobes" jq awk mkfifo
bench_build looptrace_bench
LT=$BUILD_DIR/looptrace
TGT=$BUILD_DIR/tests/bench/lt_bench_target
FLOOR=$BUILD_DIR/tests/bench/lt-bench-floor
bench_need "$LT" "$TGT" "$FLOOR"
bench_workdir looptrace-bench-whole
FUNC=lt_bench_dispatch
# What the floor and the --dispatch/--idle configurations attach to.
PROBE_BIN=$TGT
PROBE_SYM=$FUNC
CONFIGS=(untraced floor looptrace lt-no-sample lt-no-offcpu)
if [[ $GLIB -ge 1 ]]; then
  FUNC=glib_idle
  # No exit in awk: ldconfig would die of SIGPIPE, and pipefail with it.
  PROBE_BIN=$(ldconfig -p | awk '$1 == "libglib-2.0.so.0" && /x86-64/ && !p { p = $NF } END { print p }')
  [[ -n $PROBE_BIN ]] || die "libglib-2.0.so.0 not found (ldconfig -p)"
  PROBE_SYM='*(g_idle_funcs+16)'
  CONFIGS=(untraced floor looptrace lt-no-keys lt-no-sample lt-no-offcpu)
fi
if [[ $GLIB -ge 2 ]]; then
  FUNC=glib_timeout
  [[ $GLIB -eq 3 ]] && FUNC=glib_frame
  PROBE_SYM='*(g_timeout_funcs+16)'
  CONFIGS=(untraced floor looptrace lt-no-frames)
  cat >"$WORK/no-frames.json" <<'JSON'
{"name": "glib-no-frames",
 "version": {"binary": "libglib-2.0.so.0", "name": "GLib",
             "major": "glib_major_version", "minor": "glib_minor_version",
             "checked": ["2.74"]},
 "probes": [{"role": "dispatch", "binary": "libglib-2.0.so.0",
   "symbol": "*(g_timeout_funcs+16)", "label": "GLib timeout",
   "keys": [{"name": "callback", "expr": "arg1", "format": "sym"},
            {"name": "name", "expr": "*(arg0+80)", "format": "str"},
            {"name": "python", "expr": "*(arg2+8)", "format": "pyfunc"},
            {"name": "due_us", "expr": "*(*(arg0+88)+16)", "format": "int"}]}]}
JSON
fi
if [[ $VCALL -eq 1 ]]; then
  [[ $GLIB -eq 0 ]] || die "--vcall and --glib* exclude each other"
  FUNC=lt_bench_vcall
  PROBE_SYM='lt_bench::Target::dispatch(void*)'
  CONFIGS=(untraced floor looptrace lt-call-site)
fi
[[ $USE_BPFTRACE -eq 1 ]] && CONFIGS+=(bpftrace)

# run_one CONFIG N: one fresh target under CONFIG; appends
# "CONFIG ns_per_call cpu_ns_per_call" to $WORK/results.
run_one() {
  local cfg=$1 n=$2 d=$WORK/$1.$2 tpid holder="" ready="" total cpu_ns
  mkfifo "$d.go"
  exec 8<>"$d.go"
  "$TGT" --func "$FUNC" --calls "$CALLS" --rounds "$ROUNDS" --cpu "$CPU" \
    --wait-stdin --hold --out "$d.txt" <&8 >"$d.tlog" 2>&1 &
  tpid=$!; PIDS+=("$tpid")
  wait_for "$d.tlog" waiting 10 || die "$cfg: the target did not start: $(cat "$d.tlog")"
  case $cfg in
    untraced) ;;
    floor)
      "$FLOOR" "$PROBE_BIN" "$PROBE_SYM" -p "$tpid" </dev/null >"$d.log" 2>&1 &
      holder=$!; ready=ready ;;
    looptrace|lt-no-sample|lt-no-offcpu|lt-no-keys|lt-no-frames|lt-call-site)
      local extra=() probes=(--dispatch "$TGT:$FUNC")
      [[ $VCALL -eq 1 ]] && probes=(--dispatch "$TGT:$PROBE_SYM")
      [[ $cfg == lt-call-site ]] && probes=(--dispatch-call "$TGT:$FUNC")
      [[ $GLIB -ge 1 ]] && probes=(--profile glib)
      [[ $cfg == lt-no-keys ]] && probes=(--idle "$PROBE_BIN:$PROBE_SYM")
      [[ $cfg == lt-no-frames ]] && probes=(--profile "$WORK/no-frames.json")
      [[ $cfg == lt-no-sample ]] && extra=(--sample-freq 0)
      [[ $cfg == lt-no-offcpu ]] && extra=(--no-off-cpu)
      "$LT" record "${probes[@]}" -p "$tpid" --json "$d.json" "${extra[@]}" \
        </dev/null >"$d.log" 2>&1 &
      holder=$!; ready="looptrace: tracing" ;;
    bpftrace)
      bpftrace -p "$tpid" -e "BEGIN { printf(\"ready\\n\"); }
        uprobe:$TGT:$FUNC { @s[tid] = nsecs; }
        uretprobe:$TGT:$FUNC /@s[tid]/ { @h = hist(nsecs - @s[tid]); delete(@s[tid]); }" \
        </dev/null >"$d.log" 2>&1 &
      holder=$!; ready="^ready" ;;
  esac
  if [[ -n $holder ]]; then
    PIDS+=("$holder")
    wait_for "$d.log" "$ready" 60 || die "$cfg: did not attach: $(cat "$d.log")"
  fi
  echo go >&8
  wait_for "$d.txt" "func=$FUNC " 600 || die "$cfg: the target gave no result: $(cat "$d.tlog")"
  # The whole process's CPU time, user and system, while it holds: the
  # scheduler's ns of every thread (/proc/PID/task/*/schedstat).
  cpu_ns=$(cat /proc/"$tpid"/task/*/schedstat | awk '{ s += $1 } END { print s }')
  total=$(sed -n 's/.* total_calls=\([0-9]*\).*/\1/p' "$d.txt" | head -1)
  # The tracer's programs' counters while it holds (--bpf-stats runs).
  [[ $STATS_RUN -eq 0 || $ready != "looptrace: tracing" ]] || prog_stats "$holder" "$cfg" >"$d.stats"
  echo "done" >&8
  wait "$tpid" || die "$cfg: the target failed: $(cat "$d.tlog")"
  exec 8>&-
  if [[ -n $holder ]]; then
    [[ $cfg != bpftrace ]] || kill -INT "$holder" 2>/dev/null || true
    wait "$holder" || die "$cfg: the tracer failed: $(tail -3 "$d.log")"
  fi
  PIDS=()
  [[ $ready != "looptrace: tracing" ]] || check_spans "$d.json" "$tpid" "$total" "$cfg run $n"
  echo "$cfg $(sed -n 's/.* ns_per_call=\([0-9.]*\).*/\1/p' "$d.txt" | head -1) \
$(calc "$cpu_ns / $total" 1)" >>"$WORK/results"
}

STATS_RUN=0
echo "$BENCH: $REPEATS runs of each of ${CONFIGS[*]}; $ROUNDS x $CALLS calls each, CPU $CPU" >&2
for ((n = 0; n < REPEATS; n++)); do
  k=${#CONFIGS[@]}
  for ((i = 0; i < k; i++)); do
    run_one "${CONFIGS[(i + n) % k]}" "$n"
  done
done

# Per repeat: x floor from the same repeat's untraced and floor runs.
awk -v reps="$REPEATS" '
  { k = cnt[$1] + 0; ns[$1, k] = $2; cpu[$1, k] = $3; cnt[$1] = k + 1; if (!seen[$1]++) order[++m] = $1 }
  function med(a, n,   i, j, t, v) {
    for (i = 0; i < n; i++) v[i] = a[i]
    for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2
  }
  END {
    printf "%-13s %12s %12s %12s %12s\n", "config", "ns/call", "x floor", "cpu ns/call", "x floor"
    for (o = 1; o <= m; o++) {
      c = order[o]
      for (r = 0; r < reps; r++) {
        a[r] = ns[c, r]; b[r] = cpu[c, r]
        fa = ns["floor", r] - ns["untraced", r]; fb = cpu["floor", r] - cpu["untraced", r]
        ra[r] = fa > 0 ? (ns[c, r] - ns["untraced", r]) / fa : 0
        rb[r] = fb > 0 ? (cpu[c, r] - cpu["untraced", r]) / fb : 0
      }
      printf "%-13s %12.1f %12s %12.1f %12s\n", c, med(a, reps),
        c == "untraced" ? "-" : sprintf("%.2f", med(ra, reps)), med(b, reps),
        c == "untraced" ? "-" : sprintf("%.2f", med(rb, reps))
    }
  }' "$WORK/results" | tee "$WORK/table"

if [[ $BPF_STATS -eq 1 ]]; then
  STATS_WAS=$(sysctl -n kernel.bpf_stats_enabled)
  sysctl -q -w kernel.bpf_stats_enabled=1
  STATS_RUN=1
  for cfg in "${CONFIGS[@]}"; do
    [[ $cfg == untraced || $cfg == floor || $cfg == bpftrace ]] && continue
    run_one "$cfg" stats
    awk -v c="$cfg" '$2 ~ /^lt_span_(entry|return)#/ && $3 > 0 {
      split($2, n, "#"); printf "%s: %s %.1f ns/run (%d runs)\n", c, n[1], $4 / $3, $3 }' \
      "$WORK/$cfg.stats.stats"
  done
  STATS_RUN=0
  sysctl -q -w kernel.bpf_stats_enabled="$STATS_WAS"
fi
bench_exit
