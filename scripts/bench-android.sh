#!/usr/bin/env bash
# What the android profile's loop waits cost, one tool at a time: AOSP's
# own Looper (tests/programs/android_looper: a message every 10 ms, a
# poster thread's every 7 ms, a pipe callback every 25 ms, no stall) for
# --seconds, under:
#   untraced   nothing
#   no-wait    `looptrace record -p PID` with the android profile from a
#              file without its wait and wake probes (dispatches and
#              enqueues only)
#   android    `looptrace record -p PID`: the built-in android profile,
#              with pollInner's epoll_wait call site (wait) and
#              Looper::wake() (wake)
# For each, the CPU time (schedstat) of the loop thread and of the whole
# process over the same --seconds of the loop's run, as a median over
# --repeats runs, the configurations interleaved run by run, and the
# loop's waits a second from the program's own log of its epoll_wait
# calls. The cost of a wait is (android - no-wait) loop CPU per wait.
#
# Usage: sudo scripts/bench-android.sh [options]
#   --repeats N    runs of each configuration (default 5)
#   --seconds S    measured part of each run (default 5)
#   (--smoke: one run of each, 1 s)
# Exit status: 0 done, 1 a run failed, 2 usage, 3 not root.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/bench-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench-common.sh"
REPEATS=5
SECS=5
USE_BPFTRACE=0
bench_opt --repeats REPEATS posint
bench_opt --seconds SECS posint
bench_parse "$@"
bench_smoke REPEATS=1 SECS=1

bench_prepare "it loads BPF programs and attaches uprobes" jq awk
bench_build looptrace android_looper
LT=$BUILD_DIR/looptrace
APP=$BUILD_DIR/tests/programs/android_looper
bench_need "$LT"
[[ -x $APP ]] || die "$APP is missing: android-libutils-dev (scripts/setup.sh), then build"
bench_workdir looptrace-bench-android

# The built-in profile as `looptrace profiles` knows it has no JSON dump:
# the same probes, written out, less wait and wake.
cat >"$WORK/no-wait.json" <<'JSON'
{"name": "android-no-wait",
 "probes": [
  {"role": "dispatch", "binary": "libutils.so",
   "symbol": "android::Looper::pollInner(int)",
   "call": {"slot": 16, "arg1": "pointer"}, "label": "Looper message",
   "keys": [{"name": "target", "expr": "*(arg0+0)", "format": "vtable"},
            {"name": "what", "expr": "u32 *(arg1+0)", "format": "int"},
            {"name": "msg", "expr": "arg0", "format": "ptr"},
            {"name": "msg_tag", "expr": "u32 *(arg1+0)", "format": "int"}]},
  {"role": "enqueue", "binary": "libutils.so",
   "symbol": "android::Looper::sendMessageAtTime(long, android::sp<android::MessageHandler> const&, android::Message const&)",
   "keys": [{"name": "queue", "expr": "arg0", "format": "ptr"},
            {"name": "when", "expr": "arg1", "format": "int"},
            {"name": "msg", "expr": "*(arg2+0)", "format": "ptr"},
            {"name": "msg_tag", "expr": "u32 *(arg3+0)", "format": "int"}]},
  {"role": "dispatch", "binary": "libutils.so",
   "symbol": "android::Looper::pollInner(int)",
   "call": {"slot": 16, "arg1": "int"}, "label": "Looper fd callback",
   "keys": [{"name": "target", "expr": "*(arg0+0)", "format": "vtable"},
            {"name": "fd", "expr": "arg1", "format": "int"},
            {"name": "events", "expr": "arg2", "format": "int"}]}]}
JSON

# A thread may end between the glob and the read: what is left is summed.
cpu_one() { awk '{ print $1 }' /proc/"$1"/task/"$1"/schedstat 2>/dev/null || echo 0; }
cpu_all() { { cat /proc/"$1"/task/*/schedstat 2>/dev/null || true; } | awk '{ s += $1 } END { print s + 0 }'; }

# run_one CONFIG N: one fresh program under CONFIG; appends
# "CONFIG loop_ns process_ns waits_per_s" to $WORK/results.
run_one() {
  local cfg=$1 n=$2 d=$WORK/$1.$2 app lt="" l0 p0 l1 p1 waits
  # The program starts its loop a second after "ready"; the measured part
  # starts 1.5 s after the attach and ends well before the loop does.
  "$APP" --duration $((SECS * 1000 + 2500)) --log "$d.app" >"$d.out" 2>"$d.err" &
  app=$!
  PIDS=("$app")
  wait_for "$d.err" "ready pid=" 30 || die "$cfg: the program did not start: $(cat "$d.err")"
  case $cfg in
    no-wait | android)
      local prof=()
      [[ $cfg == no-wait ]] && prof=(--profile "$WORK/no-wait.json")
      "$LT" record -p "$app" "${prof[@]}" --json "$d.json" >"$d.log" 2>&1 &
      lt=$!
      PIDS+=("$lt")
      wait_attached "$d.log" "$cfg" "$lt"
      ;;
  esac
  sleep 1.5
  l0=$(cpu_one "$app")
  p0=$(cpu_all "$app")
  sleep "$SECS"
  l1=$(cpu_one "$app")
  p1=$(cpu_all "$app")
  wait "$app" || die "$cfg: the program failed: $(tail -3 "$d.err")"
  if [[ -n $lt ]]; then
    wait "$lt" || die "$cfg: looptrace failed: $(tail -3 "$d.log")"
  fi
  PIDS=()
  waits=$(jq -s '[.[] | select(.event == "wait")] | length' "$d.app")
  ((waits > 0)) || die "$cfg: the program logged no wait"
  echo "$cfg $((l1 - l0)) $((p1 - p0)) $(calc "$waits / ($SECS + 2.5)" 1)" >>"$WORK/results"
  if [[ $cfg == android ]] && check_json "$d.json" "$cfg run $n"; then
    local seen
    seen=$(jq '[.threads[] | select(.role == "wait") | .count] | add // 0' "$d.json")
    ((seen >= waits - 1 && seen <= waits + 1)) || fail "$cfg run $n: looptrace counted $seen waits, the program logged $waits"
  fi
}

CONFIGS=(untraced no-wait android)
echo "$BENCH: $REPEATS runs of each of ${CONFIGS[*]}; ${SECS} s measured" >&2
for ((n = 0; n < REPEATS; n++)); do
  for ((i = 0; i < ${#CONFIGS[@]}; i++)); do
    run_one "${CONFIGS[(i + n) % ${#CONFIGS[@]}]}" "$n"
  done
done

awk -v secs="$SECS" '
  { l[$1] = l[$1] " " $2; p[$1] = p[$1] " " $3; w[$1] = w[$1] " " $4
    if (!seen[$1]++) order[++m] = $1 }
  function med(s,   v, n, i, j, t) {
    n = split(s, v, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  END {
    printf "%-9s %9s %17s %20s\n", "config", "waits/s", "loop CPU ms/s", "process CPU ms/s"
    for (o = 1; o <= m; o++) {
      k = order[o]; lv[k] = med(l[k]) / secs / 1e6; pv[k] = med(p[k]) / secs / 1e6
      printf "%-9s %9.1f %17.2f %20.2f\n", k, med(w[k]), lv[k], pv[k]
    }
    if (("android" in lv) && ("no-wait" in lv) && med(w["android"]) > 0)
      printf "a wait (android - no-wait, loop thread): %.1f us\n",
        (lv["android"] - lv["no-wait"]) * 1000 / med(w["android"])
  }' "$WORK/results" | tee "$WORK/table"
bench_exit
