#!/usr/bin/env bash
# looptrace input-channel benchmark: what tracing socket calls costs.
#
# The program (tests/bench/lt_bench_socket) moves Android InputMessages over
# an AF_UNIX SOCK_SEQPACKET socketpair in one thread: sendto a 104-byte KEY,
# recvfrom it, sendto a 24-byte FINISHED, recvfrom it; 4 socket calls per
# iteration, one input event for a tracer. It times slices of iterations
# and reports the median slice's ns per socket call. One run measures:
#
#  a) the traced process: ns per socket call untraced, under
#     `looptrace record --input --input-mode syscall -p PID` (the raw
#     sys_enter/sys_exit tracepoints, its default), the same forced onto the
#     per-call syscall tracepoints (LOOPTRACE_SYSCALL_HOOK=tracepoint:
#     "tracepoint"), under `--input-mode uprobe -p PID`, and under a
#     bpftrace one-liner on the per-call syscall tracepoints
#     (sys_enter/sys_exit of sendto and recvfrom, filtered by pid:
#     per-thread start time in a map, a histogram of durations; tracefs
#     mounted for it in a private mount namespace). Every looptrace run is checked from its JSON: input events
#     = iterations made while traced, every KEY finished, nothing lost.
#  b) the cost on an untraced process: the same loop and bytes on loopback
#     UDP (--udp) in a process looptrace does not trace, while
#     `looptrace record --input -p <an idle sleep>` runs in each of its
#     configurations, or not at all. The checks: looptrace recorded nothing.
#  c) throughput: pingpong as fast as it goes for --seconds under each
#     mode (and untraced, for reference): events/s, the lost counters, the
#     loader's CPU time and max RSS, the JSON's size.
#
# Method: separate runs, one configuration at a time (the tools attach to a
# process or system-wide, not to copies of a function as in bench.sh). Each
# round runs every configuration once, in reverse order every other round,
# so that drifts of a shared machine spread over all of them. The table
# shows medians over rounds of ns/call and of added ns/call (minus
# untraced in the same round); x_bpftrace (x_syscall) is the median over
# rounds of looptrace's added ns over bpftrace's (syscall mode's) in the
# same round. The target is pinned to --cpu; the tracers run where the
# scheduler puts them. Docs: docs/benchmarks.md, "Input channels".
#
# Usage: sudo scripts/bench-input.sh [options]
#   --rounds N           rounds of a) and b) (default 6; even: both orders
#                        equally often)
#   --iterations N       KEY/FINISHED pairs per run of a) and b) (default
#                        50000: 200000 socket calls)
#   --slices K           timed slices per run (default 20)
#   --seconds S          length of each run of c) (default 5)
#   --cpu N              CPU the target is pinned to (default: the last one)
#   --no-bpftrace        skip the bpftrace configuration
#   (--smoke: one round of 200 iterations in 2 slices, 0.2 s runs of c), no
#   bpftrace)
# Exit status: 0 done, 1 a check of a) or b) failed (events lost or
# miscounted, UDP traffic recorded, a run failed; losses in c) are reported,
# not failed), 2 usage, 3 not root.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/bench-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench-common.sh"
ROUNDS=6
ITERS=50000
SLICES=20
SECONDS_C=5
USE_BPFTRACE=1
bench_opt --rounds ROUNDS posint
bench_opt --iterations ITERS posint
bench_opt --slices SLICES posint
bench_opt --seconds SECONDS_C posint
bench_opt --cpu CPU
bench_flag --no-bpftrace USE_BPFTRACE=0
bench_parse "$@"
bench_smoke ROUNDS=1 ITERS=200 SLICES=2 SECONDS_C=0.2 USE_BPFTRACE=0
((ITERS >= SLICES)) || die "--iterations must be at least --slices" 2

bench_prepare "looptrace loads BPF programs" \
  jq awk bpftool objdump ldd sysctl unshare /usr/bin/time cmake sleep
bench_build looptrace_bench
LT=$BUILD_DIR/looptrace
SOCK=$BUILD_DIR/tests/bench/lt_bench_socket
bench_need "$LT" "$SOCK"

bench_workdir looptrace-bench-input
res() { jq -r ".$2" "$WORK/$1.res"; }  # res NAME KEY: from the target's line

# Another looptrace --input (a test suite, a user) puts its own syscall
# tracepoints or libc uprobes on every process: wait up to 60 s for it to
# finish before a run; runs that still had one are named in the report.
others() {
  bpftool -j prog show 2>/dev/null | jq '[.[] | select((.name // "") | test("^lt_io_"))] | length'
}
wait_quiet() {  # wait_quiet NAME
  local i
  for ((i = 0; i < 120; i++)); do
    [[ $(others) == 0 ]] && return 0
    ((i > 0)) || echo "   (another looptrace --input is running: waiting up to 60 s)" >&2
    sleep 0.5
  done
  echo "$1" >>"$WORK/disturbed"
}

# looptrace's configurations: syscall (its default, the raw syscall
# tracepoints), tracepoint (syscall mode forced onto the per-call syscall
# tracepoints), uprobe.
lt_mode() { if [[ $1 == uprobe ]]; then echo uprobe; else echo syscall; fi; }
lt_hook() { if [[ $1 == tracepoint ]]; then echo tracepoint; fi; }
is_lt() { [[ $1 == syscall || $1 == tracepoint || $1 == uprobe ]]; }
# "${WITH_TRACEFS[@]}" CMD...: CMD in a mount namespace where tracefs is
# mounted. unshare and sh exec, so that $! of `... &` is CMD's pid.
WITH_TRACEFS=(unshare -m --propagation slave sh -c
  'mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing; exec "$@"' sh)

# start_tool CONFIG NAME PID: attaches CONFIG's tracer to PID; sets TOOL
# (its pid, empty for untraced). The looptrace runs leave NAME.json.
TOOL=""
start_tool() {
  local config=$1 d=$WORK/$2 pid=$3 log
  TOOL=""
  case $config in
    untraced|none) return 0 ;;
    syscall|tracepoint|uprobe)
      log=$d.lt.log
      LOOPTRACE_SYSCALL_HOOK=$(lt_hook "$config") "$LT" record --input \
        --input-mode "$(lt_mode "$config")" -p "$pid" --json "$d.json" \
        </dev/null >"$d.lt.out" 2>"$log" &
      TOOL=$! ;;
    bpftrace)
      log=$d.bt.log
      # BEGIN fires once every probe is attached. bpftrace needs tracefs
      # for these tracepoints: mounted where only it sees it, if need be.
      "${WITH_TRACEFS[@]}" bpftrace -e "BEGIN { printf(\"ready\\n\"); }
        tracepoint:syscalls:sys_enter_sendto, tracepoint:syscalls:sys_enter_recvfrom
        /pid == $pid/ { @s[tid] = nsecs; }
        tracepoint:syscalls:sys_exit_sendto, tracepoint:syscalls:sys_exit_recvfrom
        /pid == $pid && @s[tid]/ { @h = hist(nsecs - @s[tid]); delete(@s[tid]); }" \
        </dev/null >"$log" 2>&1 &
      TOOL=$! ;;
    *) die "unknown configuration $config" ;;
  esac
  PIDS+=("$TOOL")
  wait_for "$log" "^looptrace: tracing\|^ready" 60 || die "$2: $config did not attach: $(cat "$log")"
}

# stop_tool CONFIG NAME: bpftrace and a looptrace on an idle pid need
# telling; a looptrace on the target leaves when the target is gone.
stop_tool() {
  [[ -n $TOOL ]] || return 0
  if [[ $1 == bpftrace || ${3:-} == interrupt ]]; then kill -INT "$TOOL" 2>/dev/null || true; fi
  if ! wait "$TOOL"; then
    fail "$2: $1 failed: $(tail -3 "$WORK/$2".*.log | tr '\n' ' ')"
  fi
  TOOL=""
}

# check_pingpong NAME: looptrace's JSON has one finished input event per
# iteration made while traced, and nothing lost or turned away.
check_pingpong() {
  local j=$WORK/$1.json made events unfinished rejected
  check_json "$j" "$1" || return 0
  made=$(res "$1" timed_iterations)
  events=$(jq '.input_summary.events' "$j")
  unfinished=$(jq '[.input_channels[].unfinished] | add // 0' "$j")
  rejected=$(jq '.input_summary.kernel_rejected' "$j")
  echo "$1 made=$made events=$events unfinished=$unfinished rejected=$rejected lost=$(lost_events "$j")" >>"$WORK/checks"
  [[ $events == "$made" ]] || fail "$1: looptrace saw $events input events, the target made $made"
  [[ $unfinished == 0 ]] || fail "$1: $unfinished events without their FINISHED"
  [[ $rejected == 0 ]] || fail "$1: the kernel filter turned away $rejected messages"
  check_not_lost "$j" "$1"
}

# --- a) the traced process ----------------------------------------------------
A_CONFIGS=(untraced syscall tracepoint uprobe)
[[ $USE_BPFTRACE -eq 1 ]] && A_CONFIGS+=(bpftrace)

run_pingpong() {  # run_pingpong NAME CONFIG: leaves NAME.res (+ NAME.json)
  local name=$1 config=$2 d=$WORK/$1 tpid
  wait_quiet "$name"
  "$SOCK" --pingpong "$ITERS" --slices "$SLICES" --cpu "$CPU" --go-file "$d.go" \
    </dev/null >"$d.res" 2>"$d.tlog" &
  tpid=$!; PIDS+=("$tpid")
  wait_for "$d.tlog" waiting 10 || die "$name: the target did not start: $(cat "$d.tlog")"
  start_tool "$config" "$name" "$tpid"
  touch "$d.go"
  wait "$tpid" || die "$name: the target failed: $(cat "$d.tlog")"
  stop_tool "$config" "$name"
  PIDS=()
  is_lt "$config" && check_pingpong "$name"
  return 0
}

# order R CONFIG...: the configurations, reversed in odd rounds.
order() {
  local r=$1; shift
  if ((r % 2)); then printf '%s\n' "$@" | tac; else printf '%s\n' "$@"; fi
}
# run_rounds PREFIX RUN CONFIG...: ROUNDS rounds of `RUN PREFIXr.CONFIG
# CONFIG` for every CONFIG, in order(), with a progress line per round.
run_rounds() {
  local prefix=$1 run=$2 r c line; shift 2
  for ((r = 0; r < ROUNDS; r++)); do
    line="   round $((r + 1)):"
    for c in $(order "$r" "$@"); do
      case $run in  # by name, not "$run": shellcheck follows the calls
        run_pingpong) run_pingpong "$prefix$r.$c" "$c" ;;
        run_udp) run_udp "$prefix$r.$c" "$c" ;;
      esac
      line+=" $c $(res "$prefix$r.$c" ns_per_call)"
    done
    echo "$line ns/call" >&2
  done
}

echo "== a) traced process: $ROUNDS rounds x ${A_CONFIGS[*]}; $ITERS iterations" \
  "($((4 * ITERS)) calls) in $SLICES slices; target on CPU $CPU" >&2
run_rounds a run_pingpong "${A_CONFIGS[@]}"

# --- b) an untraced process -----------------------------------------------------
B_CONFIGS=(none syscall tracepoint uprobe)
sleep 100000 &
IDLE=$!
run_udp() {  # run_udp NAME CONFIG: leaves NAME.res (+ NAME.json)
  local name=$1 config=$2 d=$WORK/$1 j made
  wait_quiet "$name"
  start_tool "$config" "$name" "$IDLE"
  "$SOCK" --udp "$ITERS" --slices "$SLICES" --cpu "$CPU" </dev/null >"$d.res" 2>"$d.tlog" ||
    die "$name: the target failed: $(cat "$d.tlog")"
  stop_tool "$config" "$name" interrupt
  PIDS=()
  [[ $config == none ]] && return 0
  j=$d.json
  check_json "$j" "$name" || return 0
  made=$(jq -c '{events: .input_summary.events, kernel_recorded: .input_summary.kernel_recorded,
                 kernel_rejected: .input_summary.kernel_rejected}' "$j")
  echo "$name $made lost=$(lost_events "$j")" >>"$WORK/checks"
  [[ $made == '{"events":0,"kernel_recorded":0,"kernel_rejected":0}' ]] ||
    fail "$name: looptrace on an idle pid recorded the UDP process's calls: $made"
}
echo "== b) untraced process (UDP, same bytes) while looptrace traces pid $IDLE (sleep)" >&2
run_rounds b run_udp "${B_CONFIGS[@]}"
kill "$IDLE" 2>/dev/null || true
wait "$IDLE" 2>/dev/null || true

# --- c) throughput ----------------------------------------------------------------
C_CONFIGS=(untraced syscall tracepoint uprobe)
run_rate() {  # run_rate NAME CONFIG: leaves NAME.res (+ NAME.json, NAME.time)
  local name=$1 config=$2 d=$WORK/$1 tpid lpid t_exit
  wait_quiet "$name"
  "$SOCK" --pingpong 1 --seconds "$SECONDS_C" --cpu "$CPU" --go-file "$d.go" \
    </dev/null >"$d.res" 2>"$d.tlog" &
  tpid=$!; PIDS+=("$tpid")
  wait_for "$d.tlog" waiting 10 || die "$name: the target did not start: $(cat "$d.tlog")"
  if [[ $config != untraced ]]; then
    # By -p, so that /usr/bin/time accounts the loader alone.
    LOOPTRACE_SYSCALL_HOOK=$(lt_hook "$config") /usr/bin/time -v -o "$d.time" \
      "$LT" record --input --input-mode "$(lt_mode "$config")" -p "$tpid" \
      --json "$d.json" </dev/null >"$d.lt.out" 2>"$d.lt.log" &
    lpid=$!; PIDS+=("$lpid")
    wait_attached "$d.lt.log" "$name"
  fi
  touch "$d.go"
  wait "$tpid" || die "$name: the target failed: $(cat "$d.tlog")"
  t_exit=$(date +%s.%N)
  if [[ $config != untraced ]]; then
    wait "$lpid" || fail "$name: looptrace failed: $(tail -3 "$d.lt.log" | tr '\n' ' ')"
    # From the target's exit to the report written: draining and analysis.
    calc "$(date +%s.%N) - $t_exit" 1 >"$d.report_s"
    # The report of a flat-out run is tens of MB: read once, for what the
    # table and the checks need.
    if [[ -s $d.json ]]; then
      jq -c '{input_summary: {events: .input_summary.events}, lost: .lost}' \
        "$d.json" >"$d.sum.json"
      stat -c %s "$d.json" >"$d.json_bytes"
    fi
  fi
  PIDS=()
}
echo "== c) throughput: pingpong for ${SECONDS_C}s as fast as it goes" >&2
for c in "${C_CONFIGS[@]}"; do
  run_rate "c.$c" "$c"
  echo "   $c: $(res "c.$c" iterations_per_s) iterations/s" >&2
done

# --- per-program BPF run time -------------------------------------------------
# prog_ids_stats HOLDER_PID: "prog_name#id run_cnt run_time_ns" for each
# program the holder has open (prog_stats without its label and size).
prog_ids_stats() {
  prog_stats "$1" - | awk '{ sub(/:[0-9]+B$/, "", $2); print $2, $3, $4 }'
}
run_stats() {  # run_stats NAME CONFIG: leaves NAME.stats
  local name=$1 config=$2 d=$WORK/$1 tpid before after
  wait_quiet "$name"
  "$SOCK" --pingpong "$ITERS" --slices "$SLICES" --cpu "$CPU" --go-file "$d.go" \
    </dev/null >"$d.res" 2>"$d.tlog" &
  tpid=$!; PIDS+=("$tpid")
  wait_for "$d.tlog" waiting 10 || die "$name: the target did not start: $(cat "$d.tlog")"
  start_tool "$config" "$name" "$tpid"
  sysctl -q -w kernel.bpf_stats_enabled=1
  before=$(prog_ids_stats "$TOOL")
  touch "$d.go"
  wait "$tpid" || die "$name: the target failed: $(cat "$d.tlog")"
  after=$(prog_ids_stats "$TOOL")
  sysctl -q -w kernel.bpf_stats_enabled="$STATS_WAS"
  stop_tool "$config" "$name"
  PIDS=()
  # Runs and run time count only while stats are on: the difference.
  join <(echo "$before" | sort) <(echo "$after" | sort) |
    awk -v c="$config" '{ runs = $4 - $2; ns = $5 - $3
      if (runs) printf "  %-9s %-24s %8d runs %7.1f ns/run\n", c, $1, runs, ns / runs }' >"$d.stats"
}
STATS_CONFIGS=(syscall tracepoint uprobe)
[[ $USE_BPFTRACE -eq 1 ]] && STATS_CONFIGS+=(bpftrace)
echo "== per-program BPF run time: one more run each with kernel.bpf_stats_enabled=1" >&2
for c in "${STATS_CONFIGS[@]}"; do run_stats "s.$c" "$c"; done

# --- report ---------------------------------------------------------------------
ns_runs() {  # ns_runs PART CONFIG: ns/call of each round
  for ((r = 0; r < ROUNDS; r++)); do res "$1$r.$2" ns_per_call; done
}
added_runs() {  # added_runs PART CONFIG BASE
  for ((r = 0; r < ROUNDS; r++)); do
    calc "$(res "$1$r.$2" ns_per_call) - $(res "$1$r.$3" ns_per_call)"; echo
  done
}
ratio_runs() {  # ratio_runs PART CONFIG OTHER BASE: added(CONFIG) / added(OTHER)
  for ((r = 0; r < ROUNDS; r++)); do
    calc "($(res "$1$r.$2" ns_per_call) - $(res "$1$r.$4" ns_per_call)) / ($(res "$1$r.$3" ns_per_call) - $(res "$1$r.$4" ns_per_call))" 2
    echo
  done
}
med() { median | awk '{ printf "%.1f", $1 }'; }
table_row() {  # table_row PART CONFIG BASE LABEL
  printf '%-20s %8s %9s   %s\n' "$4" "$(ns_runs "$1" "$2" | med)" \
    "$(if [[ $2 == "$3" ]]; then echo -; else added_runs "$1" "$2" "$3" | med; fi)" \
    "$(ns_runs "$1" "$2" | paste -sd' ')"
}

# The first instruction of libc's sendto and recvfrom: x86 kernels emulate a
# push, a nop or a jump; anything else is single-stepped out of line, one
# more trap per call (docs/benchmarks.md). glibc's wrappers open with a
# `cmpb $0,__libc_single_threaded(%rip)` check, which looptrace skips: it
# probes the conditional jump after it (user/profiles/resolve.cpp).
LIBC=$(ldd "$SOCK" | awk '$1 ~ /^libc\.so/ { print $3 }')
first_insn() {  # first_insn SYMBOL: in $LIBC, by its dynamic symbol
  local a
  a=$(objdump -T "$LIBC" | awk -v s="$1" '$NF == s { print $1; exit }')
  [[ -n $a ]] || { echo "?"; return; }
  objdump -d --no-show-raw-insn --start-address=0x"$a" --stop-address="$(printf '0x%x' $((0x$a + 16)))" "$LIBC" |
    awk '/^ +[0-9a-f]+:/ { sub(/^[ \t]*[0-9a-f]+:[ \t]*/, ""); sub(/[ \t]*#.*/, ""); gsub(/[ \t]+/, " "); print; exit }'
}
insn_kind() {
  case $1 in
    push*|nop|jmp*|call*|j*) echo emulated ;;
    "cmpb \$0x0,"*"(%rip)") echo "skipped: looptrace probes the jump after it" ;;
    *) echo single-stepped ;;
  esac
}
GIT=$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)
echo
echo "looptrace input-channel benchmark  $(date -u +%Y-%m-%dT%H:%MZ)"
echo "kernel $(uname -r), $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), $NCPU CPUs;" \
  "target pinned to CPU $CPU; looptrace built from $GIT"
S_INSN=$(first_insn sendto) R_INSN=$(first_insn recvfrom)
echo "uprobe mode probes $LIBC: sendto starts with '$S_INSN' ($(insn_kind "$S_INSN")),"
echo "  recvfrom with '$R_INSN' ($(insn_kind "$R_INSN"))"
echo
echo "a) traced process: AF_UNIX SOCK_SEQPACKET socketpair, per iteration sendto KEY"
echo "   (104 B) + recvfrom + sendto FINISHED (24 B) + recvfrom; $ITERS iterations"
echo "   ($((4 * ITERS)) socket calls) per run in $SLICES slices, the median slice; $ROUNDS rounds"
echo
printf '%-20s %8s %9s   %s\n' config ns/call added_ns "per round: ns/call"
table_row a untraced untraced untraced
table_row a syscall untraced "looptrace syscall"
table_row a tracepoint untraced "looptrace tracepoint"
table_row a uprobe untraced "looptrace uprobe"
[[ $USE_BPFTRACE -eq 1 ]] && table_row a bpftrace untraced "bpftrace tracepoints"
echo "(ns/call, added_ns: median over rounds; added_ns = ns/call - untraced in the same round)"
echo
echo "per-call tracepoints: $(ratio_runs a tracepoint syscall untraced | med)x the raw tracepoints' added ns" \
  "(median of per-round ratios: $(ratio_runs a tracepoint syscall untraced | paste -sd' '))"
echo "uprobe mode: $(ratio_runs a uprobe syscall untraced | med)x syscall mode's added ns" \
  "(median of per-round ratios: $(ratio_runs a uprobe syscall untraced | paste -sd' '))"
if [[ $USE_BPFTRACE -eq 1 ]]; then
  echo "syscall mode: $(ratio_runs a syscall bpftrace untraced | med)x the bpftrace one-liner's added ns" \
    "(per round: $(ratio_runs a syscall bpftrace untraced | paste -sd' '))"
fi
n_lt=$(grep -c '^a' "$WORK/checks" || true)
n_bad=$(grep '^FAIL: a' "$WORK/failures" 2>/dev/null | awk '{ print $2 }' | sort -u | grep -c . || true)
echo "checks: $((n_lt - n_bad)) of $n_lt looptrace runs saw every iteration as one finished" \
  "input event, nothing lost"
grep '^FAIL: a' "$WORK/failures" 2>/dev/null | sed 's/^/  /' || true
echo
echo "b) untraced process: the same loop and bytes on loopback UDP (sendto + recvfrom),"
echo "   while looptrace --input -p traces an idle sleep; $ROUNDS rounds"
echo
printf '%-20s %8s %9s   %s\n' config ns/call added_ns "per round: ns/call"
table_row b none none "no tracer"
table_row b syscall none "looptrace syscall"
table_row b tracepoint none "looptrace tracepoint"
table_row b uprobe none "looptrace uprobe"
echo
n_lt=$(grep -c '^b' "$WORK/checks" || true)
n_bad=$(grep '^FAIL: b' "$WORK/failures" 2>/dev/null | awk '{ print $2 }' | sort -u | grep -c . || true)
echo "checks: $((n_lt - n_bad)) of $n_lt looptrace runs recorded nothing of the UDP process" \
  "(events, kernel_recorded and kernel_rejected all 0)"
grep '^FAIL: b' "$WORK/failures" 2>/dev/null | sed 's/^/  /' || true
echo
echo "c) throughput: pingpong as fast as it goes for ${SECONDS_C}s, one run each"
echo
C_FMT='%-18s %8s %8s %8s %9s %12s %10s %6s %8s %8s %8s\n'
# shellcheck disable=SC2059
printf "$C_FMT" config iter/s made events events/s ringbuf_full other_lost cpu_s rss_MiB json_MB report_s
for c in "${C_CONFIGS[@]}"; do
  n=c.$c
  made=$(res "$n" timed_iterations)
  if [[ $c == untraced ]]; then
    # shellcheck disable=SC2059
    printf "$C_FMT" "$c" "$(res "$n" iterations_per_s)" "$made" - - - - - - - -
    continue
  fi
  j=$WORK/$n.sum.json
  if [[ ! -s $j ]]; then
    printf '%-18s %9s %9s   (looptrace wrote no JSON)\n' "looptrace $c" "$(res "$n" iterations_per_s)" "$made"
    continue
  fi
  events=$(jq '.input_summary.events' "$j")
  rbf=$(jq '.lost.ringbuf_full' "$j")
  other=$(jq '[.lost | to_entries[] | select(.key != "ringbuf_full") | .value] | add' "$j")
  cpu=$(awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 } END { printf "%.2f", u + s }' "$WORK/$n.time")
  rss=$(awk -F': ' '/Maximum resident/ { printf "%.0f", $2 / 1024 }' "$WORK/$n.time")
  # shellcheck disable=SC2059
  printf "$C_FMT" "looptrace $c" \
    "$(res "$n" iterations_per_s)" "$made" "$events" "$(calc "$events / $(res "$n" seconds)" 0)" \
    "$rbf" "$other" "$cpu" "$rss" "$(calc "$(cat "$WORK/$n.json_bytes") / 1e6" 0)" "$(cat "$WORK/$n.report_s")"
  echo "$n made=$made events=$events lost=$(lost_events "$j")" >>"$WORK/checks"
done
echo "(iter/s: iterations the target made per second = input events it produced;"
echo " events: input events in looptrace's JSON; cpu_s, rss_MiB: the looptrace process,"
echo " whole run (/usr/bin/time); report_s: from the target's exit to looptrace's exit)"
for c in syscall tracepoint uprobe; do
  j=$WORK/c.$c.sum.json
  [[ -s $j ]] || continue
  if [[ $(lost_events "$j") == "{}" && $(jq '.input_summary.events' "$j") == "$(res "c.$c" timed_iterations)" ]]; then
    echo "$c mode: no loss at $(res "c.$c" iterations_per_s) events/s"
  else
    echo "$c mode: LOST events at $(res "c.$c" iterations_per_s) events/s: recorded" \
      "$(jq '.input_summary.events' "$j") of $(res "c.$c" timed_iterations); lost $(lost_events "$j")"
  fi
done
echo
echo "per-program BPF run time (bpf_stats, one more run of a) each: the program body"
echo "only, without the trap or the syscall slow path; the stats add ~30 ns per run;"
echo "the programs run for these calls of every process, not only the target's):"
for c in "${STATS_CONFIGS[@]}"; do
  cat "$WORK/s.$c.stats"
  echo "  $(printf '%-9s' "$c") (that run: $(res "s.$c" ns_per_call) ns/call)"
done
if [[ -s $WORK/disturbed ]]; then
  echo
  echo "warning: another looptrace --input was loaded during runs" \
    "$(paste -sd' ' "$WORK/disturbed"): its probes slowed them too"
fi
bench_exit
