#!/usr/bin/env bash
# looptrace recording benchmark (docs/benchmarks.md, "Recording and replay").
#
#  a) tests/bench/lt_bench_recording: N events of a busy run's mix (input
#     socket calls mostly, slow dispatches with keys, stack samples of 20
#     frames) written through RecordingWriter to a file, read back and
#     checked (nothing lost, every field there), then replayed through
#     replay() + Analysis. Prints events/s recorded and replayed and bytes
#     per event on disk. Targets (issue 10): record >= 1 M events/s without
#     loss, replay >= 2 M events/s. No root needed.
#  b) end to end, as root (--live): `looptrace record --input -p PID` with
#     and without `-o` on the reference app's input flood
#     (refapp --input-rate 10000) and on lt_bench_socket's pingpong as fast
#     as it goes: input events in the JSON against what the program made,
#     every lost counter, events the recorder could not write, looptrace's
#     CPU time and max RSS (/usr/bin/time, the loader alone: the target
#     runs by -p), the recording's size, and `looptrace report` of it: its
#     JSON must equal the live one, and how long the replay took.
#
# Usage: scripts/bench-record.sh [options]
#   --events N           events for a) (default 2M; k and M suffixes)
#   --rounds R           rounds of a), the median is shown (default 3)
#   --live               also run b) (root)
#   --seconds S          length of each run of b) (default 5)
#   (--smoke: a) with 20k events, one round; b), with --live, 1 s runs)
# Exit status: 0 done, 1 a check failed (events lost, round trip or live ==
# replay), 2 usage, 3 --live without root.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/bench-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench-common.sh"
EVENTS=2M
ROUNDS=3
LIVE=0
SECONDS_B=5
bench_opt --events EVENTS
bench_opt --rounds ROUNDS posint
bench_flag --live LIVE=1
bench_opt --seconds SECONDS_B posint
bench_parse "$@"
bench_smoke EVENTS=20k ROUNDS=1 SECONDS_B=1
[[ $EVENTS =~ ^[1-9][0-9]*[kM]?$ ]] || die "--events must be a positive count (k and M suffixes)" 2

why=""
[[ $LIVE -eq 0 ]] || why="--live traces"
bench_prepare "$why" jq awk cmake
targets=(lt_bench_recording)
[[ $LIVE -eq 0 ]] || targets+=(looptrace refapp lt_bench_socket)
bench_build "${targets[@]}"
REC_BENCH=$BUILD_DIR/tests/bench/lt_bench_recording
LT=$BUILD_DIR/looptrace
bench_need "$REC_BENCH"
[[ $LIVE -eq 0 ]] || bench_need "$LT" "$BUILD_DIR/refapp/refapp" "$BUILD_DIR/tests/bench/lt_bench_socket"
bench_workdir looptrace-bench-record

# --- a) the writer and the replay ----------------------------------------------
echo "== a) lt_bench_recording --events $EVENTS --rounds $ROUNDS (files in $WORK)" >&2
"$REC_BENCH" --events "$EVENTS" --rounds "$ROUNDS" \
  --dir "$WORK" >"$WORK/a.res" || fail "a): the round trip lost or changed events"
val() { awk -v k="$1" '$1 == k { print $2 }' "$WORK/a.res"; }
rec=$(val record_events_per_s)
rep=$(val replay_events_per_s)
echo
echo "a) RecordingWriter and replay, $(val events) events, median of $(val rounds) rounds"
echo
printf '%-34s %14s %10s\n' "" "value" "target"
printf '%-34s %14s %10s\n' "record (events/s to disk)" "$(calc "$rec / 1e6" 2) M" ">= 1 M"
printf '%-34s %14s %10s\n' "replay (events/s, replay+Analysis)" "$(calc "$rep / 1e6" 2) M" ">= 2 M"
printf '%-34s %14s\n' "read back (events/s, decode only)" "$(calc "$(val read_events_per_s) / 1e6" 2) M"
printf '%-34s %14s\n' "Analysis::finish (s)" "$(val finish_s)"
printf '%-34s %14s\n' "bytes/event on disk" "$(val bytes_per_event)"
printf '%-34s %14s\n' "bytes/event encoded (uncompressed)" "$(val raw_bytes_per_event)"
printf '%-34s %14s\n' "events lost" "$(val lost)"
printf '%-34s %14s\n' "round trip (every event, field sums)" "$(val round_trip)"
verdict() { awk -v v="$1" -v t="$2" 'BEGIN { print (v >= t ? "met" : "NOT met") }'; }
echo
echo "record target $(verdict "$rec" 1000000); replay target $(verdict "$rep" 2000000)"

[[ $LIVE -eq 1 ]] || bench_exit

# --- b) end to end ---------------------------------------------------------------
# run_live NAME OUT: the target already started (pid $TPID), looptrace
# attached by -p, with -o when OUT is "rec"; then the target is released.
run_live() {
  local name=$1 out=$2 d=$WORK/$1 args=()
  [[ $out == rec ]] && args=(-o "$d.lt")
  /usr/bin/time -v -o "$d.time" "$LT" record --input -p "$TPID" --json "$d.json" \
    "${args[@]}" </dev/null >"$d.out" 2>"$d.log" &
  LPID=$!
  PIDS+=("$LPID")
  wait_attached "$d.log" "$name" "$LPID"
}
# finish_live NAME: waits for looptrace; replays the recording if any.
finish_live() {
  local name=$1 d=$WORK/$1 t0
  wait "$LPID" || fail "$name: looptrace failed: $(tail -3 "$d.log" | tr '\n' ' ')"
  PIDS=()
  if [[ -f $d.lt ]]; then
    t0=$(date +%s.%N)
    "$LT" report "$d.lt" -q --json "$d.replay.json" 2>"$d.replay.log" ||
      fail "$name: looptrace report failed: $(cat "$d.replay.log")"
    calc "$(date +%s.%N) - $t0" 2 >"$d.report_s"
    check_same_json "$d.json" "$d.replay.json" "$name"
  fi
}

refapp_run() { # refapp_run NAME OUT
  local d=$WORK/$1
  "$BUILD_DIR/refapp/refapp" --rate 100 --start-delay 1500 --duration $((SECONDS_B * 1000)) \
    --input-rate 10000 --input-start 100 --log "$d.app.jsonl" >/dev/null 2>"$d.app.err" &
  TPID=$!
  PIDS+=("$TPID")
  wait_for "$d.app.err" "ready pid=" 10 || { fail "$1: refapp did not start"; return 1; }
  run_live "$1" "$2"
  wait "$TPID" || fail "$1: refapp failed"
  finish_live "$1"
  jq -s 'map(select(.event == "input_dispatcher_summary")) | .[0].sent' "$d.app.jsonl" >"$d.made"
}

socket_run() { # socket_run NAME OUT
  local d=$WORK/$1
  "$BUILD_DIR/tests/bench/lt_bench_socket" --pingpong 1 --seconds "$SECONDS_B" --go-file "$d.go" \
    </dev/null >"$d.res" 2>"$d.tlog" &
  TPID=$!
  PIDS+=("$TPID")
  wait_for "$d.tlog" waiting 10 || { fail "$1: lt_bench_socket did not start"; return 1; }
  run_live "$1" "$2"
  touch "$d.go"
  wait "$TPID" || fail "$1: lt_bench_socket failed"
  finish_live "$1"
  jq '.timed_iterations // .iterations' "$d.res" >"$d.made"
}

for target in refapp socket; do
  for out in json rec; do
    opt="--json FILE"
    [[ $out == json ]] || opt="--json FILE -o FILE.lt"
    echo "== b) $target: looptrace record --input -p PID $opt" >&2
    if [[ $target == refapp ]]; then refapp_run "b.$target.$out" "$out"; else socket_run "b.$target.$out" "$out"; fi
  done
done

echo
echo "b) end to end: looptrace record --input -p PID, ${SECONDS_B} s, without and with -o"
echo
FMT='%-16s %9s %9s %9s %10s %8s %7s %8s %9s %8s %9s\n'
# shellcheck disable=SC2059
printf "$FMT" run made events calls/s lost_kernel not_rec cpu_s rss_MiB rec_KiB B/call report_s
for target in refapp socket; do
  for out in json rec; do
    n=b.$target.$out
    d=$WORK/$n
    [[ -s $d.json ]] || { printf '%-16s (no JSON)\n' "$target $out"; continue; }
    made=$(cat "$d.made")
    events=$(jq '.input_summary.events' "$d.json")
    calls=$(jq '.input_summary.kernel_recorded' "$d.json")
    lostk=$(jq '[.lost | to_entries[] | .value] | add' "$d.json")
    notrec=$(grep -o '[0-9]* events not recorded' "$d.log" | awk '{ print $1 }' || true)
    cpu=$(awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 } END { printf "%.2f", u + s }' "$d.time")
    rss=$(awk -F': ' '/Maximum resident/ { printf "%.0f", $2 / 1024 }' "$d.time")
    size=-; bpc=-; rs=-
    if [[ -f $d.lt ]]; then
      size=$(calc "$(stat -c %s "$d.lt") / 1024" 0)
      bpc=$(calc "$(stat -c %s "$d.lt") / ($calls > 0 ? $calls : 1)" 1)
      rs=$(cat "$d.report_s")
    fi
    [[ $out == rec ]] || notrec=-
    # shellcheck disable=SC2059
    printf "$FMT" "$target $out" "$made" "$events" "$(calc "$calls / $SECONDS_B" 0)" \
      "$lostk" "${notrec:-0}" "$cpu" "$rss" "$size" "$bpc" "$rs"
    [[ $out == json || ${notrec:-0} == 0 ]] || fail "$n: the recorder lost ${notrec} events"
  done
done
echo "(made: input events the program produced; events: those in looptrace's JSON;"
echo " calls/s: socket calls the kernel recorded per second; lost_kernel: the sum"
echo " of the JSON's lost counters; not_rec: events the recorder could not write;"
echo " cpu_s, rss_MiB: the looptrace process, whole run; rec_KiB, B/call: the"
echo " recording and its bytes per recorded socket call; report_s: looptrace"
echo " report of the recording, whose JSON equals the live one)"
bench_exit
