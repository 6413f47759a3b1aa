#!/usr/bin/env bash
# What Python frames cost (docs/benchmarks.md, "Python frames"): in the
# kernel per sample, in userspace per frame named, and at attach.
#
# 1. The kernel's cost per sample. Debian's python3 runs
#    tests/programs/glib_loop.py with one long busy stall, under a Python
#    stack of --depth extra frames (deep: past LT_MAX_PYFRAMES, so the walk
#    reads its cap and cuts; shallow: glib_loop.py's own ~6 frames);
#    `looptrace record -p PID` traces it with the default --call-graph
#    (auto) and with dwarf. kernel.bpf_stats_enabled=1 (put back after)
#    gives lt_sample's run time, the loss counters map its samples sent.
#    In one run of the tracer, three windows of --seconds:
#      idle    before the stall: no samples; the cost of a run that sends
#              none (taken off the others' runs);
#      py      in the stall, Python frames on: a sample copies the user
#              stack and walks the Python frames;
#      native  in the stall, the process deleted from lt_py_procs (bpftool
#              map delete: looptrace has no option that turns Python
#              frames off): today's sample of a process with no Python,
#              of the same native stack.
#    ns per sample = (run time - runs that sent none x idle ns/run) /
#    samples sent. Target: py (default options) <= 1.5 x native (dwarf).
#    The JSON is checked: busy_for's Python frame is in the stall's stacks,
#    and for the deep stack, the stacks are marked truncated.
# 2. Naming in userspace: tests/bench/lt_bench_pyframes (PyFrames::merge)
#    on 4096 code objects of a live python3, cold (each read from the
#    process) and cached. Target: >= 1 M frames/s (cached).
# 3. Attach: scripts/bench-attach.sh --profiles glib,glib1g (python3 with
#    and without 1 GiB of heap).
#
# Usage: sudo scripts/bench-python.sh [options]
#   --seconds N          length of each window (default 3)
#   --depth N            the deep stack's extra Python frames (default 100)
#   --repeats N          attach runs per cache state (default 3)
#   (--smoke: 1 s windows, one attach of each)
# Exit status: 0 done, 1 a run failed, 2 usage, 3 not root.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/bench-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench-common.sh"
WINDOW=3
DEPTH=100
REPEATS=3
bench_opt --seconds WINDOW posint
bench_opt --depth DEPTH posint
bench_opt --repeats REPEATS posint
bench_parse "$@"
bench_smoke WINDOW=1 REPEATS=1

bench_prepare "it loads BPF programs" jq awk bpftool sysctl /usr/bin/python3
bench_build looptrace_bench
LT=$BUILD_DIR/looptrace
NAMER=$BUILD_DIR/tests/bench/lt_bench_pyframes
bench_need "$LT" "$NAMER"
bench_workdir looptrace-bench-python
PY=/usr/bin/python3
LOOP="$REPO/tests/programs/glib_loop.py"

# The stall starts at AT_MS, once the tracer is attached and the idle
# window taken; it lasts two windows and a margin.
AT_MS=$((4000 + WINDOW * 1000))
STALL_MS=$((WINDOW * 2000 + 2500))
DURATION_MS=$((AT_MS + STALL_MS + 500))

# glib_loop.py under N more Python frames.
cat >"$WORK/deep.py" <<'PY'
import runpy, sys
depth, path = int(sys.argv[1]), sys.argv[2]
def down(n):
    if n:
        return down(n - 1)
    sys.argv = [path] + sys.argv[3:]
    runpy.run_path(path, run_name="__main__")
down(depth)
PY

# map_id HOLDER NAME: the id of the BPF map NAME the holder has open.
sysctl -q -w kernel.bpf_stats_enabled=1
printf '%-8s %-6s %8s %9s %9s %9s %8s %6s\n' stack mode samples \
  idle_ns py_ns native_ns py/nat py_cut
declare -A COST=()
for depth in deep shallow; do
  for mode in auto dwarf; do
    d=$WORK/$depth-$mode
    n=0; [[ $depth == deep ]] && n=$DEPTH
    t0=$(date +%s%N)
    "$PY" "$WORK/deep.py" "$n" "$LOOP" --duration "$DURATION_MS" --kind busy \
      --stall "$STALL_MS@$AT_MS" --log "$d.log" >"$d.pyout" 2>"$d.pyerr" &
    py=$!; PIDS+=("$py")
    wait_for "$d.pyerr" "glib_loop: ready" 20 || die "$depth: glib_loop.py did not start: $(cat "$d.pyerr")"
    "$LT" record -p "$py" --dispatch libglib-2.0.so.0:g_main_context_dispatch \
      --call-graph "$mode" --json "$d.json" >"$d.out" 2>"$d.err" &
    lt=$!; PIDS+=("$lt")
    wait_attached "$d.err" "$depth $mode" "$lt"
    counters=$(map_id "$lt" lt_counters)
    [[ -n $counters ]] || die "$depth $mode: no lt_counters map"
    idle=$(window "$lt" "$counters")
    (($(date +%s%N) < t0 + AT_MS * 1000000)) ||
      fail "$depth $mode: the idle window ran into the stall (attach too slow)"
    # Into the stall (busy_for), then the two windows.
    sleep "$(calc "($t0 + $AT_MS * 1000000 - $(date +%s%N)) / 1e9 + 0.5" 3)"
    on=$(window "$lt" "$counters")
    pid_key=$(printf '%08x' "$py" | sed -E 's/(..)(..)(..)(..)/0x\4 0x\3 0x\2 0x\1/')
    # shellcheck disable=SC2086  # the key's four bytes
    bpftool map delete id "$(map_id "$lt" lt_py_procs)" key $pid_key ||
      die "$depth $mode: could not delete pid $py from lt_py_procs"
    off=$(window "$lt" "$counters")
    wait "$py" || fail "$depth $mode: glib_loop.py failed: $(tail -2 "$d.pyerr")"
    wait "$lt" || fail "$depth $mode: looptrace failed: $(tail -3 "$d.err")"
    PIDS=()
    echo "$idle" >"$d.idle"
    e=$(echo "$idle" | awk '{ printf "%.1f", $1 ? $2 / $1 : 0 }')
    p=$(per_sample "$on" "$e")
    q=$(per_sample "$off" "$e")
    COST[$depth-$mode-py]=$p; COST[$depth-$mode-native]=$q
    check_json "$d.json" "$depth $mode" || continue
    [[ $(echo "$on" | awk '{ print $3 }') -gt 0 && $(echo "$off" | awk '{ print $3 }') -gt 0 ]] ||
      fail "$depth $mode: a window sent no sample (py: $on; native: $off)"
    jq -e '[.slow_dispatches[].stacks[].frames[] | strings
            | select(startswith("busy_for (glib_loop.py:"))] | length > 0' \
      "$d.json" >/dev/null || fail "$depth $mode: no busy_for Python frame in the stall's stacks"
    cut=$(jq '[.slow_dispatches[].stacks[] | select(.truncated)] | length' "$d.json")
    all=$(jq '[.slow_dispatches[].stacks[]] | length' "$d.json")
    [[ $depth == shallow || $cut -gt 0 ]] || fail "$depth $mode: no stack marked truncated"
    printf '%-8s %-6s %8s %9s %9s %9s %8s %6s\n' "$depth" "$mode" \
      "$(echo "$on $off" | awk '{ print $3 "+" $6 }')" "$e" "$p" "$q" \
      "$(calc "$p / ($q ? $q : 1)" 2)" "$cut/$all"
  done
done
sysctl -q -w kernel.bpf_stats_enabled="$STATS_WAS"
echo "(ns per lt_sample run that sent nothing, then per sample sent, over" \
  "$WINDOW s windows; py_cut: stack groups in the JSON marked truncated)"
for depth in deep shallow; do
  p=${COST[$depth-auto-py]:-0} q=${COST[$depth-dwarf-native]:-0}
  r=$(calc "$p / ($q ? $q : 1)" 2)
  echo "$depth: Python sample (default options) $p ns = ${r}x today's DWARF" \
    "sample without Python frames ($q ns): target <= 1.5x:" \
    "$(awk -v r="$r" 'BEGIN { print (r <= 1.5) ? "met" : "NOT met" }')"
done
json="$WORK/deep-auto.json"
if [[ -s $json ]]; then
  echo "cut Python stacks counted in the JSON's lost: $(jq -c '.lost' "$json")"
fi

# 2. Naming.
cat >"$WORK/codes.py" <<'PY'
import sys, time
n, out = int(sys.argv[1]), sys.argv[2]
src = "".join(
    f"def f{i}(k):\n    x = k + {i}\n    y = x * 2\n    if y > 3:\n"
    f"        y -= 1\n    z = [x, y]\n    return sum(z)\n\n" for i in range(n))
ns = {}
exec(compile(src, "codes_gen.py", "exec"), ns)
codes = [ns[f"f{i}"].__code__ for i in range(n)]
with open(out + ".tmp", "w") as f:
    for i, c in enumerate(codes):
        f.write(f"{id(c)} {(2 * i) % len(c.co_code)}\n")
import os
os.rename(out + ".tmp", out)
time.sleep(600)
PY
"$PY" "$WORK/codes.py" 4096 "$WORK/codes.txt" &
py=$!; PIDS+=("$py")
wait_for "$WORK/codes.txt" . 10 || die "codes.py did not start"
"$NAMER" "$py" "$WORK/codes.txt" --rounds 200 >"$WORK/names.out" ||
  fail "lt_bench_pyframes failed: $(cat "$WORK/names.out")"
kill "$py" 2>/dev/null || true
wait "$py" 2>/dev/null || true
PIDS=()
read -r cold warm < <(awk '$1 == "cold_frames_per_s" { c = $2 } $1 == "warm_frames_per_s" { w = $2 }
                            END { print c + 0, w + 0 }' "$WORK/names.out")
echo "naming (PyFrames::merge, 4096 code objects in stacks of 64):" \
  "cold $(calc "$cold / 1e3" 0) k frames/s, cached $(calc "$warm / 1e6" 2) M frames/s:" \
  "target >= 1 M frames/s: $(awk -v w="$warm" 'BEGIN { print (w >= 1e6) ? "met" : "NOT met" }')"

# 3. Attach.
echo "attach (scripts/bench-attach.sh --profiles glib,glib1g):"
"$REPO/scripts/bench-attach.sh" -B "$BUILD_DIR" --no-build --profiles glib,glib1g \
  --repeats "$REPEATS" || fail "bench-attach.sh failed"
bench_exit
