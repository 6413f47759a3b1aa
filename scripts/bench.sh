#!/usr/bin/env bash
# looptrace overhead benchmark: what one traced dispatch costs, in ns.
#
# One run measures, in the same process and binary (tests/bench):
#   untraced   lt_bench_target calling a dispatch function (push %rbp first)
#   floor      a copy of it under an empty uprobe + uretprobe pair
#              (lt-bench-floor, tests/bench/empty.bpf.c): nothing BPF-based is cheaper
#   looptrace  a copy under `looptrace record -p` with default settings
#   bpftrace   a copy under a bpftrace one-liner doing looptrace's fast-path
#              job: per-thread start time in a map + a histogram
# and untraced / floor / looptrace for a function whose first instruction the
# kernel cannot emulate (XOL: single-stepped out of line).
#
# Method: every tool is attached at once, each to its own identical copy of
# the function; the target then alternates between the copies in short
# slices (--slices, --calls per slice) and reports each copy's median ns per
# call. Drifts of a shared machine hit all configurations alike, which
# separate runs one after the other do not manage (+-15-20% here).
# Each round rotates which copy each tool gets. The table shows medians over
# rounds of ns/call and of added ns/call (minus untraced in the same round),
# and x_floor, the median over rounds of looptrace's (bpftrace's) added ns
# over the floor's added ns in the same round.
# Then:
#   - per-program BPF run time: one more round with kernel.bpf_stats_enabled
#     (its clock reads slow every program, so it is not in the table);
#   - with --breakdown, pairs from tests/bench/ablation.bpf.c that add one
#     piece of looptrace's fast path at a time, measured the same way;
#   - a paced run at --rate calls/s (default 200000) under looptrace -p,
#     checking from its JSON that the thread's count equals the calls made
#     and no lost counter that loses events is above 0 (unseen_switches and
#     blocks_capped are shown: they lose detail), with the loader's CPU time and max RSS
#     (/usr/bin/time -v and schedstat, the looptrace process alone).
# Every looptrace run is checked the same way (count = calls, nothing lost).
# Docs: docs/benchmarks.md.
#
# Usage: sudo scripts/bench.sh [options]
#   --rounds N           rounds (default 8; a multiple of 4 gives every tool
#                        every copy equally often)
#   --slices K           slices per round (default 40)
#   --calls N            calls per slice, push %rbp function (default 20000)
#   --xol-calls N        calls per slice, XOL function (default 2000)
#   --rate R             calls per second for the loss run (default 200000)
#   --rate-seconds S     length of the loss run (default 5)
#   --cpu N              CPU the target is pinned to (default: the last one)
#   --no-bpftrace        skip the bpftrace configuration
#   --breakdown          also measure where looptrace's cost goes: pairs
#                        from tests/bench/ablation.bpf.c that add one piece
#                        of its fast path at a time (4 more rounds, ~30 s)
#   --strict             exit 1 when looptrace misses the 1.15x target
#   (--smoke: one round of 2 slices of 2000 calls (XOL: 200), a 1 s loss
#   run at 20000 calls/s, no bpftrace)
# Exit status: 0 done (see the verdict lines), 1 a check failed (lost or
# miscounted dispatches, a run failed), 2 usage, 3 not root.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/bench-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench-common.sh"
ROUNDS=8
SLICES=40
CALLS=20000
XOL_CALLS=2000
RATE=200000
RATE_SECONDS=5
USE_BPFTRACE=1
BREAKDOWN=0
STRICT=0
TARGET_RATIO=1.15
bench_opt --rounds ROUNDS posint
bench_opt --slices SLICES posint
bench_opt --calls CALLS posint
bench_opt --xol-calls XOL_CALLS posint
bench_opt --rate RATE posint
bench_opt --rate-seconds RATE_SECONDS posint
bench_opt --cpu CPU
bench_flag --no-bpftrace USE_BPFTRACE=0
bench_flag --breakdown BREAKDOWN=1
bench_flag --strict STRICT=1
bench_parse "$@"
bench_smoke ROUNDS=1 SLICES=2 CALLS=2000 XOL_CALLS=200 RATE=20000 RATE_SECONDS=1 USE_BPFTRACE=0

bench_prepare "it loads BPF programs and attaches uprobes" \
  jq awk objdump bpftool sysctl mkfifo pgrep /usr/bin/time cmake
bench_build looptrace_bench
LT=$BUILD_DIR/looptrace
TGT=$BUILD_DIR/tests/bench/lt_bench_target
FLOOR=$BUILD_DIR/tests/bench/lt-bench-floor
ABL_OBJ=$BUILD_DIR/bpfgen/bench_ablation.bpf.o
bench_need "$LT" "$TGT" "$FLOOR"
[[ $BREAKDOWN -eq 0 || -f $ABL_OBJ ]] || die "$ABL_OBJ is missing: build the looptrace_bench target"

bench_workdir looptrace-bench
# kv FILE KEY [FUNC]: a value from the target's result line (of FUNC).
kv() { grep -E "func=${3:-[^ ]*} " "$1" | sed -n "s/.* $2=\([^ ]*\).*/\1/p" | head -1; }

# --- the probed instructions ------------------------------------------------
objdump -d --no-show-raw-insn "$TGT" >"$WORK/target.dis"
first_insn() {
  awk -v f="<$1>:" '$2 == f { getline; sub(/^[ \t]*[0-9a-f]+:[ \t]*/, ""); sub(/[ \t]*#.*/, ""); gsub(/[ \t]+/, " "); print; exit }' \
    "$WORK/target.dis"
}
PLAIN_FUNCS=(lt_bench_dispatch lt_bench_dispatch_b lt_bench_dispatch_c lt_bench_dispatch_d)
XOL_FUNCS=(lt_bench_dispatch_xol lt_bench_dispatch_xol_b lt_bench_dispatch_xol_c)
for f in "${PLAIN_FUNCS[@]}"; do
  [[ $(first_insn "$f") == "push %rbp" ]] || die "$f should start with push %rbp: $(first_insn "$f")"
done
PLAIN_INSN=$(first_insn lt_bench_dispatch)
XOL_INSN=$(first_insn lt_bench_dispatch_xol)

# --- one round ------------------------------------------------------------------
PLAIN_ROLES=(untraced floor looptrace)
[[ $USE_BPFTRACE -eq 1 ]] && PLAIN_ROLES+=(bpftrace)
XOL_ROLES=(untraced floor looptrace)

# check_count JSON RESULT WHAT FUNC...: looptrace's count for the target's
# thread equals the calls made to FUNC..., and no event is lost (lost_events).
check_count() {
  local json=$1 res=$2 what=$3 made=0 unseen f; shift 3
  for f in "$@"; do made=$((made + $(kv "$res" total_calls "$f"))); done
  check_json "$json" "$what" || return 0
  check_spans "$json" "$(kv "$res" pid)" "$made" "$what"
  check_not_lost "$json" "$what"
  unseen=$(jq '.lost.unseen_switches // 0' "$json")
  [[ $unseen == 0 ]] || echo "$what: $unseen context switches unseen (no event lost: those spans' CPU split is the kernel's counters')" >&2
}

# run_round NAME R [stats]: one interleaved run, copies rotated by R. Leaves
# NAME.txt (the target's lines) and NAME.map ("config func symbol" lines);
# with "stats", NAME.stats (per-program run time).
run_round() {
  local name=$1 r=$2 stats=${3:-} d=$WORK/$1 i n f tpid
  local -A sym=()
  n=${#PLAIN_ROLES[@]}
  for ((i = 0; i < n; i++)); do sym[${PLAIN_ROLES[i]}/plain]=${PLAIN_FUNCS[(i + r) % n]}; done
  for ((i = 0; i < 3; i++)); do sym[${XOL_ROLES[i]}/xol]=${XOL_FUNCS[(i + r) % 3]}; done
  : >"$d.map"
  local spec=""
  for k in "${!sym[@]}"; do
    echo "${k%/*} ${k#*/} ${sym[$k]}" >>"$d.map"
    [[ ${k#*/} == xol ]] && spec+="${sym[$k]}:$XOL_CALLS," || spec+="${sym[$k]}:$CALLS,"
  done

  mkfifo "$d.go"
  exec 8<>"$d.go"
  "$TGT" --interleave "${spec%,}" --slices "$SLICES" --cpu "$CPU" --wait-stdin --hold \
    --out "$d.txt" <&8 >"$d.tlog" 2>&1 &
  tpid=$!; PIDS+=("$tpid")
  wait_for "$d.tlog" waiting 10 || die "$name: the target did not start: $(cat "$d.tlog")"

  local holders=() labels=() logs=()
  "$FLOOR" "$TGT" "${sym[floor/plain]}" -p "$tpid" </dev/null >"$d.floor.log" 2>&1 &
  holders+=($!); labels+=(floor); logs+=("$d.floor.log:ready")
  "$FLOOR" "$TGT" "${sym[floor/xol]}" -p "$tpid" </dev/null >"$d.floorx.log" 2>&1 &
  holders+=($!); labels+=(floor-xol); logs+=("$d.floorx.log:ready")
  "$LT" record --dispatch "$TGT:${sym[looptrace/plain]}" --dispatch "$TGT:${sym[looptrace/xol]}" \
    -p "$tpid" --json "$d.json" </dev/null >"$d.lt.log" 2>&1 &
  holders+=($!); labels+=(looptrace); logs+=("$d.lt.log:looptrace: tracing")
  if [[ $USE_BPFTRACE -eq 1 ]]; then
    local s=${sym[bpftrace/plain]}
    # BEGIN fires once every probe is attached.
    bpftrace -p "$tpid" -e "BEGIN { printf(\"ready\\n\"); }
      uprobe:$TGT:$s { @s[tid] = nsecs; }
      uretprobe:$TGT:$s /@s[tid]/ { @h = hist(nsecs - @s[tid]); delete(@s[tid]); }" \
      </dev/null >"$d.bt.log" 2>&1 &
    holders+=($!); labels+=(bpftrace); logs+=("$d.bt.log:^ready")
  fi
  PIDS+=("${holders[@]}")
  for ((i = 0; i < ${#logs[@]}; i++)); do
    wait_for "${logs[i]%%:*}" "${logs[i]#*:}" 60 ||
      die "$name: ${labels[i]} did not attach: $(cat "${logs[i]%%:*}")"
  done

  local before=""
  if [[ -n $stats ]]; then
    sysctl -q -w kernel.bpf_stats_enabled=1
    before=$(for ((i = 0; i < ${#holders[@]}; i++)); do prog_stats "${holders[i]}" "${labels[i]}"; done)
  fi
  echo go >&8
  wait_for "$d.txt" "func=${XOL_FUNCS[2]} " 600 || die "$name: the target gave no result: $(cat "$d.tlog")"
  sleep 0.1  # the other lines are written at once; let the file settle
  if [[ -n $stats ]]; then
    # The tools still hold their programs: the target waits on --hold.
    local after
    after=$(for ((i = 0; i < ${#holders[@]}; i++)); do prog_stats "${holders[i]}" "${labels[i]}"; done)
    sysctl -q -w kernel.bpf_stats_enabled="$STATS_WAS"
    # Runs and run time count only while stats are on; report the difference.
    join -j1 <(echo "$before" | awk '{ print $1 "/" $2, $3, $4 }' | sort) \
             <(echo "$after" | awk '{ print $1 "/" $2, $3, $4 }' | sort) |
      awk '{ runs = $4 - $2; ns = $5 - $3; split($1, k, "/");
             printf "%-10s %-30s %9d runs %8.1f ns/run\n", k[1], k[2], runs, runs ? ns / runs : 0 }' \
      >"$d.stats"
  fi
  echo "done" >&8
  wait "$tpid" || die "$name: the target failed: $(cat "$d.tlog")"
  exec 8>&-
  # floor and looptrace leave when the pid is gone; bpftrace needs telling.
  for ((i = 0; i < ${#holders[@]}; i++)); do
    [[ ${labels[i]} != bpftrace ]] || kill -INT "${holders[i]}" 2>/dev/null || true
    wait "${holders[i]}" || die "$name: ${labels[i]} failed: $(tail -5 "${logs[i]%%:*}")"
  done
  PIDS=()
  check_count "$d.json" "$d.txt" "$name" "${sym[looptrace/plain]}" "${sym[looptrace/xol]}"
}


ns_of() {  # ns_of ROUND CONFIG FUNC: the round's ns/call of CONFIG on FUNC
  kv "$WORK/$1.txt" ns_per_call "$(awk -v c="$2" -v f="$3" '$1 == c && $2 == f { print $3 }' "$WORK/$1.map")"
}

echo "== timing: $ROUNDS rounds x $SLICES slices; target on CPU $CPU" >&2
for ((r = 0; r < ROUNDS; r++)); do
  run_round "round$r" "$r"
  line="   round $((r + 1)):"
  for role in "${PLAIN_ROLES[@]}"; do line+=" $role $(ns_of "round$r" "$role" plain)"; done
  for role in "${XOL_ROLES[@]}"; do line+=" | xol $role $(ns_of "round$r" "$role" xol)"; done
  echo "$line ns/call" >&2
done

# Per round: added = ns/call - untraced ns/call of the same kind; ratio =
# added / the floor's added, both from the same round (same conditions).
declare -A NS ADD RATIO RATIOS
CONFIGS=()
for role in "${PLAIN_ROLES[@]}"; do CONFIGS+=("$role/plain"); done
for role in "${XOL_ROLES[@]}"; do CONFIGS+=("$role/xol"); done
runs() { for ((r = 0; r < ROUNDS; r++)); do ns_of "round$r" "$1" "$2"; done; }
added_runs() {
  for ((r = 0; r < ROUNDS; r++)); do
    calc "$(ns_of "round$r" "$1" "$2") - $(ns_of "round$r" untraced "$2")"
    echo
  done
}
ratio_runs() {
  for ((r = 0; r < ROUNDS; r++)); do
    calc "($(ns_of "round$r" "$1" "$2") - $(ns_of "round$r" untraced "$2")) / ($(ns_of "round$r" floor "$2") - $(ns_of "round$r" untraced "$2"))" 3
    echo
  done
}
for c in "${CONFIGS[@]}"; do
  config=${c%/*} func=${c#*/}
  NS[$c]=$(runs "$config" "$func" | median | awk '{ printf "%.1f", $1 }')
  ADD[$c]=$(added_runs "$config" "$func" | median | awk '{ printf "%.1f", $1 }')
  RATIO[$c]=- RATIOS[$c]=""
  if [[ $config != untraced ]]; then
    RATIO[$c]=$(ratio_runs "$config" "$func" | median | awk '{ printf "%.2f", $1 }')
    RATIOS[$c]=$(ratio_runs "$config" "$func" | awk '{ printf "%s%.2f", (NR > 1 ? " " : ""), $1 }')
  fi
done
LT_RATIO=${RATIO[looptrace/plain]}

echo
echo "looptrace overhead benchmark  $(date -u +%Y-%m-%dT%H:%MZ)"
echo "kernel $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $NCPU CPUs; target pinned to CPU $CPU"
SRC_STATE=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -z $(git -C "$REPO" status --porcelain -- bpf include user 2>/dev/null) ]] ||
  SRC_STATE+=" + uncommitted changes in bpf/ include/ user/"
echo "looptrace built from $SRC_STATE; looptrace.bpf.o sha256 $(sha256sum "$BUILD_DIR/bpfgen/looptrace.bpf.o" 2>/dev/null | cut -c1-12)"
echo "probed first instruction: push %rbp function: '$PLAIN_INSN'; XOL function: '$XOL_INSN'"
echo "$ROUNDS rounds x $SLICES slices of $CALLS calls (XOL: $XOL_CALLS) per function, all tools attached at once"
echo
printf '%-10s %-5s %9s %9s %8s   %-36s %s\n' config func ns/call added_ns x_floor \
  "per round: ns/call" "per round: x_floor"
for c in "${CONFIGS[@]}"; do
  printf '%-10s %-5s %9.1f %9.1f %8s   %-36s %s\n' "${c%/*}" "${c#*/}" "${NS[$c]}" "${ADD[$c]}" \
    "${RATIO[$c]}" "$(runs "${c%/*}" "${c#*/}" | paste -sd' ')" "${RATIOS[$c]}"
done
echo "(ns/call, added_ns: median over rounds; added_ns = ns/call - untraced ns/call of"
echo " the same kind in the same round; x_floor: median over rounds of added_ns / the"
echo " floor's added_ns of the same kind in the same round)"
echo
FLOOR_ADD=${ADD[floor/plain]}
LT_ADD=${ADD[looptrace/plain]}
# An empty pair costs at least a few hundred ns; much less means it never hit.
awk "BEGIN { exit !(${ADD[floor/plain]} < 50 || ${ADD[floor/xol]} < 50) }" &&
  die "the floor pair added under 50 ns per call: it was not attached"
echo "XOL: the empty pair costs ${ADD[floor/xol]} ns/call on the XOL function," \
  "$(calc "${ADD[floor/xol]} / $FLOOR_ADD")x its cost on a push %rbp prologue;" \
  "looptrace there: ${ADD[looptrace/xol]} ns/call"
if [[ $USE_BPFTRACE -eq 1 ]]; then
  echo "bpftrace one-liner: ${RATIO[bpftrace/plain]}x the floor;" \
    "looptrace: $(calc "$LT_ADD / ${ADD[bpftrace/plain]}" 2)x bpftrace (added ns)"
fi
LT_RANGE=$(echo "${RATIOS[looptrace/plain]}" | tr ' ' '\n' | sort -g | sed -n '1p;$p' | paste -sd-)
if awk "BEGIN { exit !($LT_RATIO <= $TARGET_RATIO) }"; then
  echo "target looptrace <= ${TARGET_RATIO}x floor: MET (${LT_RATIO}x, rounds $LT_RANGE;" \
    "$(calc "$LT_ADD - $FLOOR_ADD") ns over the floor, the target allows" \
    "$(calc "$FLOOR_ADD * ($TARGET_RATIO - 1)"))"
else
  echo "target looptrace <= ${TARGET_RATIO}x floor: MISSED (${LT_RATIO}x, rounds $LT_RANGE;" \
    "$(calc "$LT_ADD - $FLOOR_ADD") ns over the floor, the target allows" \
    "$(calc "$FLOOR_ADD * ($TARGET_RATIO - 1)"))"
  if [[ $STRICT -eq 1 ]]; then FAILED=1; fi
fi

# --- per-program BPF run time ---------------------------------------------------
echo "== per-program BPF run time (one more round, kernel.bpf_stats_enabled=1)" >&2
run_round stats 0 stats
echo
echo "per-program BPF run time (bpf_stats: program body only, without the uprobe"
echo "trap, the return hijack and the stats' own clock reads around it;"
echo "name#prog_id:translated size; bpftrace names both programs after the function):"
sed 's/^/  /' "$WORK/stats.stats"
line="  (that round, slowed by the stats:"
for role in "${PLAIN_ROLES[@]}"; do line+=" $role $(ns_of stats "$role" plain)"; done
echo "$line ns/call)"

# --- cost breakdown (--breakdown) -------------------------------------------
BD_ROLES=(ab_empty ab_ktime ab_tls ab_tls_time ab_hist ab_hist_cnt looptrace)
BD_FUNCS=(lt_bench_dispatch lt_bench_dispatch_b lt_bench_dispatch_c lt_bench_dispatch_d
          lt_bench_dispatch_e lt_bench_dispatch_f lt_bench_dispatch_g)
BD_WHAT=("empty pair (the floor)" "+ bpf_ktime_get_ns on entry and return (alone)"
         "+ task storage get on entry and return (alone)" "task storage + start time/duration"
         "+ histogram update (array map)" "+ per-CPU span counter" "looptrace (all of it)")
run_breakdown() {  # run_breakdown NAME R: leaves NAME.txt and NAME.map
  local name=$1 r=$2 d=$WORK/$1 i n=${#BD_ROLES[@]} tpid spec="" holders=() f
  : >"$d.map"
  for ((i = 0; i < n; i++)); do
    f=${BD_FUNCS[(i + r) % n]}
    echo "${BD_ROLES[i]} plain $f" >>"$d.map"
    spec+="$f:$CALLS,"
  done
  mkfifo "$d.go"
  exec 8<>"$d.go"
  "$TGT" --interleave "${spec%,}" --slices "$SLICES" --cpu "$CPU" --wait-stdin \
    --out "$d.txt" <&8 >"$d.tlog" 2>&1 &
  tpid=$!; PIDS+=("$tpid")
  wait_for "$d.tlog" waiting 10 || die "$name: the target did not start"
  for ((i = 0; i < n; i++)); do
    f=${BD_FUNCS[(i + r) % n]}
    if [[ ${BD_ROLES[i]} == looptrace ]]; then
      "$LT" record --dispatch "$TGT:$f" -p "$tpid" --json "$d.json" </dev/null >"$d.$i.log" 2>&1 &
    else
      "$FLOOR" --obj "$ABL_OBJ:${BD_ROLES[i]}" "$TGT" "$f" -p "$tpid" </dev/null >"$d.$i.log" 2>&1 &
    fi
    holders+=($!)
  done
  PIDS+=("${holders[@]}")
  for ((i = 0; i < n; i++)); do
    wait_for "$d.$i.log" "^ready\|looptrace: tracing" 60 ||
      die "$name: ${BD_ROLES[i]} did not attach: $(cat "$d.$i.log")"
  done
  echo go >&8
  wait "$tpid" || die "$name: the target failed: $(cat "$d.tlog")"
  exec 8>&-
  for ((i = 0; i < n; i++)); do
    wait "${holders[i]}" || die "$name: ${BD_ROLES[i]} failed: $(tail -5 "$d.$i.log")"
  done
  PIDS=()
  check_count "$d.json" "$d.txt" "$name" "$(awk '$1 == "looptrace" { print $3 }' "$d.map")"
}
if [[ $BREAKDOWN -eq 1 ]]; then
  BD_ROUNDS=4
  echo "== cost breakdown: $BD_ROUNDS rounds x $SLICES slices" >&2
  for ((r = 0; r < BD_ROUNDS; r++)); do
    run_breakdown "bd$r" "$r"
    line="   round $((r + 1)):"
    for role in "${BD_ROLES[@]}"; do line+=" $role $(ns_of "bd$r" "$role" plain)"; done
    echo "$line ns/call" >&2
  done
  echo
  echo "cost breakdown: each pair on its own copy, all attached at once ($BD_ROUNDS rounds);"
  echo "ns over the empty pair in the same round, median over rounds (tests/bench/ablation.bpf.c)"
  printf '  %-12s %9s %10s   %s\n' program ns/call over_empty what
  for ((i = 0; i < ${#BD_ROLES[@]}; i++)); do
    role=${BD_ROLES[i]}
    nsc=$(for ((r = 0; r < BD_ROUNDS; r++)); do ns_of "bd$r" "$role" plain; done | median)
    over=$(for ((r = 0; r < BD_ROUNDS; r++)); do
      calc "$(ns_of "bd$r" "$role" plain) - $(ns_of "bd$r" ab_empty plain)"; echo
    done | median)
    printf '  %-12s %9.1f %10.1f   %s\n' "$role" "$nsc" "$over" "${BD_WHAT[i]}"
  done
fi

# --- no loss at RATE dispatches/s, loader CPU and memory ----------------------
# looptrace attaches by -p to a target waiting on a FIFO, so /usr/bin/time
# accounts the loader alone (a `-- COMMAND` child would be counted in).
echo "== paced run: $RATE dispatches/s for ${RATE_SECONDS}s under looptrace" >&2
RATE_CALLS=$((RATE * RATE_SECONDS))
oncpu_ns() {  # oncpu_ns PID: CPU time of all its threads, ns (schedstat)
  cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%d", s }'
}
traced_by_pid() {  # traced_by_pid NAME TARGET_ARGS...: leaves NAME.{txt,json,time,oncpu}
  local name=$1 d=$WORK/$1 tpid tmpid lpid c0 c1; shift
  mkfifo "$d.go"
  exec 8<>"$d.go"
  "$TGT" "$@" --cpu "$CPU" --wait-stdin --hold --out "$d.txt" <&8 >"$d.tlog" 2>&1 &
  tpid=$!; PIDS+=("$tpid")
  wait_for "$d.tlog" waiting 10 || die "$name: the target did not start"
  /usr/bin/time -v -o "$d.time" "$LT" record --dispatch "$TGT:lt_bench_dispatch" \
    -p "$tpid" --json "$d.json" </dev/null >"$d.log" 2>&1 &
  tmpid=$!; PIDS+=("$tmpid")
  wait_attached "$d.log" "$name"
  lpid=$(pgrep -P "$tmpid" | head -1)
  # The loader's CPU time while the target runs, read from its schedstat
  # (ns) at release and once the target has written its result (it holds).
  c0=$(oncpu_ns "$lpid")
  echo go >&8
  wait_for "$d.txt" total_calls= 600 || die "$name: the target gave no result"
  c1=$(oncpu_ns "$lpid")
  echo "$((c1 - c0))" >"$d.oncpu"
  echo "done" >&8
  wait "$tpid" || die "$name: the target failed"
  exec 8>&-
  wait "$tmpid" || die "$name: looptrace failed: $(cat "$d.log")"
  PIDS=()
}
timev() { sed -n "s/^[[:space:]]*$2: //p" "$1"; }
cpu_of() { calc "$(timev "$1" 'User time (seconds)') + $(timev "$1" 'System time (seconds)')" 2; }
# Setup alone (load, verify, attach, report) around a target making one call.
traced_by_pid setup --calls 1 --rounds 1 --warmup 0
traced_by_pid rate --rate "$RATE" --calls "$RATE_CALLS"
check_count "$WORK/rate.json" "$WORK/rate.txt" "paced run" lt_bench_dispatch
R_MADE=$(kv "$WORK/rate.txt" total_calls)
R_ACH=$(kv "$WORK/rate.txt" achieved_rate)
R_WALL=$(kv "$WORK/rate.txt" elapsed_s)
R_SEEN=$(thread_count "$WORK/rate.json" "$(kv "$WORK/rate.txt" pid)")
R_LOST=$(jq -c '.lost' "$WORK/rate.json")
S_CPU=$(cpu_of "$WORK/setup.time"); R_CPU=$(cpu_of "$WORK/rate.time")
S_WALL=$(timev "$WORK/setup.time" 'Elapsed (wall clock) time (h:mm:ss or m:ss)')
R_RSS=$(timev "$WORK/rate.time" 'Maximum resident set size (kbytes)')
echo
echo "paced run: $R_MADE calls made at $R_ACH calls/s (target $RATE) over ${R_WALL}s;" \
  "looptrace counted $R_SEEN; lost: $R_LOST"
R_ONCPU=$(cat "$WORK/rate.oncpu")
echo "loader (the looptrace process alone): ${R_CPU}s CPU (user+sys, /usr/bin/time) for the"
echo "  whole run, of which $(calc "$R_ONCPU / 1e6") ms while the target ran ($(calc "$R_ONCPU / 1e7 / $R_WALL" 3)% of one CPU);"
echo "  a 1-call run (load, verify, attach, report): ${S_CPU}s CPU, ${S_WALL} wall;"
echo "  max RSS $((R_RSS / 1024)) MiB (${R_RSS} kB)"
if [[ $R_SEEN == "$R_MADE" ]] && [[ $(lost_events "$WORK/rate.json") == "{}" ]]; then
  echo "zero lost events at $RATE dispatches/s: YES"
else
  echo "zero lost events at $RATE dispatches/s: NO"
fi
[[ $FAILED -eq 0 ]] || echo "some checks FAILED (see above)"
bench_exit
