#!/usr/bin/env bash
# What JavaScript frames cost (docs/benchmarks.md, "JavaScript frames"): in
# the kernel per sample, in userspace per frame named, and at attach.
#
# 1. The kernel's cost per sample. /usr/bin/node, started with no flag,
#    runs one long busy stall in a timer, under --depth more JavaScript
#    frames (deep: past the walk's caps, LT_JS_WALK frame-pointer frames
#    and LT_MAX_JSFRAMES JavaScript frames; shallow: the timer's own five);
#    `looptrace record -p PID` traces it with the default options.
#    kernel.bpf_stats_enabled=1 (put back after) gives lt_sample's run
#    time, the loss counters map its samples sent. In one run of the
#    tracer, three windows of --seconds:
#      idle    before the stall: no samples; the cost of a run that sends
#              none (taken off the others' runs);
#      js      in the stall, JavaScript frames on: a sample copies the
#              user stack and walks the frame pointers for JS frames;
#      native  in the stall, the process deleted from lt_v8_procs (bpftool
#              map delete: looptrace has no option that turns JavaScript
#              frames off): a native sample of the same stack.
#    ns per sample = (run time - runs that sent none x idle ns/run) /
#    samples sent. The JSON is checked: busy's JavaScript frame is in the
#    stall's stacks.
# 2. Naming in userspace: the same runs' --debug v8 lines: the stacks
#    merged with their JavaScript frames (names, lines and placing, cached
#    per SharedFunctionInfo and per frame) and the functions read from the
#    process (each once).
# 3. Attach: scripts/bench-attach.sh --profiles node.
#
# Usage: sudo scripts/bench-js.sh [options]
#   --seconds S   each window (default 3)
#   --depth N     extra JavaScript frames of the deep stack (default 100)
#   --repeats N   bench-attach.sh runs (default 3)
#   (--smoke: 1 s windows, one attach run)
# Exit status: 0 done, 1 a run failed, 2 usage, 3 not root.
# shellcheck source-path=SCRIPTDIR source=lib/bench-common.sh
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/bench-common.sh"
WINDOW=3
DEPTH=100
REPEATS=3
bench_opt --seconds WINDOW posint
bench_opt --depth DEPTH posint
bench_opt --repeats REPEATS posint
bench_parse "$@"
bench_smoke WINDOW=1 REPEATS=1

bench_prepare "it loads BPF programs" jq awk bpftool sysctl /usr/bin/node
bench_build looptrace
LT=$BUILD_DIR/looptrace
bench_need "$LT"
bench_workdir looptrace-bench-js
NODE=/usr/bin/node

AT_MS=$((4000 + WINDOW * 1000))
STALL_MS=$((WINDOW * 2000 + 2500))

cat >"$WORK/stall.js" <<'JS'
'use strict';
const [depth, at, ms] = process.argv.slice(2).map(Number);
let sink = 0;
function busy(ms) {
  const end = process.hrtime.bigint() + BigInt(ms) * 1000000n;
  let x = 1;
  do {
    for (let i = 0; i < 2000; i++) x = (x * 1103515245 + 12345) % 2147483647;
  } while (process.hrtime.bigint() < end);
  sink += x;
  return x;
}
function down(n) {
  if (n > 0) return down(n - 1) + 1;
  return busy(ms);
}
for (let i = 0; i < 5000; i++) busy(0);
setTimeout(function onTimer() { down(depth); }, at);
process.stderr.write('stall.js: ready\n');
JS

sysctl -q -w kernel.bpf_stats_enabled=1
printf '%-8s %8s %9s %9s %9s %8s %10s %10s\n' stack samples idle_ns js_ns \
  native_ns js/nat us/frame us/function
for depth in deep shallow; do
  d=$WORK/$depth
  n=0; [[ $depth == deep ]] && n=$DEPTH
  t0=$(date +%s%N)
  "$NODE" "$WORK/stall.js" "$n" "$AT_MS" "$STALL_MS" >"$d.nodeout" 2>"$d.nodeerr" &
  node=$!; PIDS+=("$node")
  wait_for "$d.nodeerr" "stall.js: ready" 20 || die "$depth: stall.js did not start: $(cat "$d.nodeerr")"
  "$LT" record -p "$node" --debug v8 --json "$d.json" >"$d.out" 2>"$d.err" &
  lt=$!; PIDS+=("$lt")
  wait_attached "$d.err" "$depth" "$lt"
  counters=$(map_id "$lt" lt_counters)
  [[ -n $counters ]] || die "$depth: no lt_counters map"
  idle=$(window "$lt" "$counters")
  (($(date +%s%N) < t0 + AT_MS * 1000000)) ||
    fail "$depth: the idle window ran into the stall (attach too slow)"
  sleep "$(calc "($t0 + $AT_MS * 1000000 - $(date +%s%N)) / 1e9 + 0.5" 3)"
  on=$(window "$lt" "$counters")
  pid_key=$(printf '%08x' "$node" | sed -E 's/(..)(..)(..)(..)/0x\4 0x\3 0x\2 0x\1/')
  # shellcheck disable=SC2086  # the key's four bytes
  bpftool map delete id "$(map_id "$lt" lt_v8_procs)" key $pid_key ||
    die "$depth: could not delete pid $node from lt_v8_procs"
  off=$(window "$lt" "$counters")
  wait "$node" || fail "$depth: stall.js failed: $(tail -2 "$d.nodeerr")"
  wait "$lt" || fail "$depth: looptrace failed: $(tail -3 "$d.err")"
  PIDS=()
  e=$(echo "$idle" | awk '{ printf "%.1f", $1 ? $2 / $1 : 0 }')
  p=$(per_sample "$on" "$e")
  q=$(per_sample "$off" "$e")
  check_json "$d.json" "$depth" || continue
  [[ $(echo "$on" | awk '{ print $3 }') -gt 0 && $(echo "$off" | awk '{ print $3 }') -gt 0 ]] ||
    fail "$depth: a window sent no sample (js: $on; native: $off)"
  jq -e '[.slow_dispatches[].stacks[].frames[] | strings
          | select(startswith("busy (stall.js:"))] | length > 0' \
    "$d.json" >/dev/null || fail "$depth: no busy JavaScript frame in the stall's stacks"
  # "N stacks with M JavaScript frames named and placed in X ms: Y us a
  # frame"; "K JavaScript functions named (...) in Z ms".
  per_frame=$(sed -n 's/.*JavaScript frames named and placed in .*: \([0-9.]*\) us a frame/\1/p' "$d.err" | tail -1)
  per_fn=$(awk '/JavaScript functions named/ { for (i = 1; i <= NF; i++) if ($i == "in") { ms = $(i + 1) }
                n = $4 } END { if (n) printf "%.1f", ms * 1000 / n }' "$d.err")
  printf '%-8s %8s %9s %9s %9s %8s %10s %10s\n' "$depth" \
    "$(echo "$on $off" | awk '{ print $3 "+" $6 }')" "$e" "$p" "$q" \
    "$(calc "$p / ($q ? $q : 1)" 2)" "${per_frame:-?}" "${per_fn:-?}"
done
sysctl -q -w kernel.bpf_stats_enabled="$STATS_WAS"
echo "(ns per lt_sample run that sent nothing, then per sample sent, over" \
  "$WINDOW s windows; us per JavaScript frame merged into a stack, and per" \
  "function read from the process)"

# 3. Attach.
echo "attach (scripts/bench-attach.sh --profiles node):"
"$REPO/scripts/bench-attach.sh" -B "$BUILD_DIR" --no-build --profiles node \
  --repeats "$REPEATS" || fail "bench-attach.sh failed"
bench_exit
