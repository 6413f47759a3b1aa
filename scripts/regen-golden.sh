#!/usr/bin/env bash
# Re-records the golden recordings in tests/data/recordings/ and rewrites
# their expected reports. Root (it traces). When and how to use it, and why a
# diff of the expected files must be reviewed: tests/data/recordings/README.md.
#
# For each recording NAME it writes, in tests/data/recordings/:
#   NAME.lt          `looptrace record -o` of the scenario below
#   NAME.log.jsonl   the traced program's own ground-truth log of that run
#   NAME.json        `looptrace report NAME.lt --json NAME.json`
#   NAME.txt         that command's text report (stdout)
# and checks that the live run's JSON equals the replayed one (the issue's
# "byte-for-byte the same JSON"). Then it runs the golden unit tests, which
# check the expected files against the logs: a loaded machine can make a
# run miss its tolerances; then run it again on a quieter machine.
#
# Usage: sudo scripts/regen-golden.sh [-B BUILD_DIR] [--no-build] [NAME...]
#   NAME: refapp, refapp_frames, glib_loop, glib_input (default: all four)
# Exit status: 0 done, 1 a run or a check failed, 2 usage, 3 not root.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR="$REPO/build"
DO_BUILD=1
NAMES=()
while [[ $# -gt 0 ]]; do
  case $1 in
    -B | --build-dir) BUILD_DIR=$(realpath "$2"); shift 2 ;;
    --no-build) DO_BUILD=0; shift ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    refapp | refapp_frames | glib_loop | glib_input) NAMES+=("$1"); shift ;;
    *) echo "regen-golden: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ ${#NAMES[@]} -gt 0 ]] || NAMES=(refapp refapp_frames glib_loop glib_input)
[[ $(id -u) -eq 0 ]] || { echo "regen-golden: needs root (it traces): sudo $0" >&2; exit 3; }
for py in glib_loop glib_input; do
  if [[ " ${NAMES[*]} " == *" $py "* ]] &&
    ! /usr/bin/python3 -c 'import gi' 2>/dev/null; then
    echo "regen-golden: /usr/bin/python3 with python3-gi is needed (scripts/setup.sh)" >&2
    exit 1
  fi
done

if [[ $DO_BUILD -eq 1 ]]; then
  echo "== building looptrace, refapp and the unit tests in $BUILD_DIR" >&2
  [[ -f $BUILD_DIR/CMakeCache.txt ]] ||
    cmake -S "$REPO" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD_DIR" -j"$(nproc)" \
    --target looptrace refapp looptrace_unit_tests >/dev/null
fi
LT="$BUILD_DIR/looptrace"
DEST="$REPO/tests/data/recordings"
mkdir -p "$DEST"
WORK=$(mktemp -d /tmp/regen-golden.XXXXXX)
APP_PID=
cleanup() {
  [[ -z $APP_PID ]] || kill "$APP_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
# Short names in the recorded command lines: the programs run from $WORK.
cd "$WORK"
export PATH="$BUILD_DIR/refapp:$PATH"
cp "$REPO/tests/programs/glib_loop.py" "$REPO/tests/programs/glib_input.py" .

# Record NAME: looptrace ARGS..., leaving NAME.lt and live.json in $WORK.
record() {
  local name=$1
  shift
  echo "== $name: looptrace $*" >&2
  rm -f "$name.lt" live.json
  # Clean numbers on a shared machine: the tracer and the traced program
  # ahead of builds (refapp/README.md).
  if ! nice -n -10 "$LT" record -q -o "$name.lt" --json live.json "$@" \
    >"$name.out" 2>"$name.err"; then
    cat "$name.err" >&2
    echo "regen-golden: $name: looptrace record failed" >&2
    exit 1
  fi
}

# Replay NAME.lt into the expected files; the live JSON must equal it.
expect() {
  local name=$1
  "$LT" report "$name.lt" --json "$name.json" >"$name.txt"
  if ! cmp -s live.json "$name.json"; then
    echo "regen-golden: $name: the replayed JSON differs from the live run's" >&2
    diff <(python3 -m json.tool live.json) <(python3 -m json.tool "$name.json") | head -20 >&2
    exit 1
  fi
  cp "$name.lt" "$name.json" "$name.txt" "$name.log.jsonl" "$DEST/"
  echo "   $(stat -c %s "$name.lt") bytes, $(wc -l <"$name.log.jsonl") log lines" >&2
}

for name in "${NAMES[@]}"; do
  case $name in
    refapp)
      # Thread 0: a busy and a sleeping stall, a burst (delivery lag), a slow
      # idle handler, a barrier held 500 ms, input at 20 Hz with one slow
      # handler; thread 1: a leaked barrier.
      record refapp --profile refapp --input --slow-delivery 8ms \
        --barrier-stall 300ms -- \
        refapp --rate 100 --threads 2 --duration 2500 \
        --stall busy:60@400 --stall sleep:80@800 --burst 20@600 \
        --idle-stall busy:40@1100 --barrier 500@1300 --barrier-leak 1500:1 \
        --input-rate 20 --input-stall 120@10 --log refapp.log.jsonl
      ;;
    refapp_frames)
      # The Choreographer stand-in: frames at 60 Hz (doFrame, its phases
      # doCallbacks input/animation/traversal), every 40th working 25 ms in
      # its animation phase (janky), and a busy and a sleeping stall that
      # each hold a frame back past its deadline.
      record refapp_frames --profile refapp -- \
        refapp --rate 100 --duration 2000 --barrier-rate 60 \
        --frame-stall-every 40 --frame-stall-ms 25 \
        --frame-stall-phase animation \
        --stall busy:60@410 --stall sleep:45@1005 \
        --log refapp_frames.log.jsonl
      ;;
    glib_loop)
      # GLib's main loop in Debian's python3: three stalls, busy and asleep.
      record glib_loop --dispatch libglib-2.0.so.0:g_main_context_dispatch \
        --slow 20ms -- \
        /usr/bin/python3 glib_loop.py --stall busy:40@400 --stall sleep:90@900 \
        --stall busy:150@1500 --duration 2200 --log glib_loop.log.jsonl
      ;;
    glib_input)
      # A GLib loop reading a unix stream socket (no FINISHED replies: a raw
      # channel), one read handled slowly; traced by -p once it is ready.
      rm -f server.sock glib_input.log.jsonl
      nice -n -10 /usr/bin/python3 glib_input.py --socket server.sock --events 10 \
        --stall-at 3 --stall-ms 100 --start-delay 1500 \
        --log glib_input.log.jsonl >app.out 2>app.err &
      APP_PID=$!
      for _ in $(seq 100); do grep -q "ready pid=" app.err && break; sleep 0.1; done
      grep -q "ready pid=" app.err || { cat app.err >&2; exit 1; }
      record glib_input -p "$APP_PID" --input --input-peer server.sock \
        --dispatch libglib-2.0.so.0:g_main_context_dispatch --slow 20ms \
        --slow-input 50ms
      wait "$APP_PID" || { echo "regen-golden: glib_input.py failed" >&2; exit 1; }
      APP_PID=
      ;;
  esac
  expect "$name"
done

echo "== checking the expected files against the programs' logs" >&2
"$BUILD_DIR/tests/looptrace_unit_tests" --gtest_filter='*Golden*' --gtest_brief=1 || {
  echo "regen-golden: the new recordings fail the golden tests (a loaded machine?" \
    "run it again); review with: git diff --stat tests/data/recordings" >&2
  exit 1
}
echo "done; review the changes: git diff tests/data/recordings" >&2
