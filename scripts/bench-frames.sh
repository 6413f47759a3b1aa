#!/usr/bin/env bash
# What frames cost a GTK program, one tool at a time: a GTK 3 (or 4)
# window under Xvfb animating at 60 Hz (tests/programs/gtk_frames.py, no
# stall) for --seconds, under:
#   untraced     nothing
#   frames       `looptrace record -p PID --profile glib`: the timeout
#                probe with its frame role (every paint cycle a frame,
#                recorded)
#   no-frames    the same probes from a profile file without the frame
#                role: the same keys, no frame crosses the ring buffer
#   monitor      `looptrace monitor -p PID` (the gtk3 profile, every span
#                through the ring buffer for its window): what leaving it
#                on costs a 60 Hz animation, the app and the monitor's own
#                CPU (its threads' schedstat over the same time)
# For each, the CPU time of the whole GTK process (user + system, its
# threads' schedstat) over the animation, from --warmup seconds after the
# app's SIGUSR1 (the tracer reads the app's symbols at its first event:
# a one-time cost, not the steady state) to the end of its ticks, per frame
# the app drew in that time (its own log), as a median over
# --repeats runs, the configurations interleaved run by run. The cost per
# frame of the role is (frames - no-frames) per frame. One more run of each
# traced configuration with kernel.bpf_stats_enabled=1 gives ns per run of
# lt_span_entry and lt_span_return, and the frames looptrace counted (the
# JSON's frames[].count) against the app's.
#
# Usage: sudo scripts/bench-frames.sh [options]
#   --repeats N    runs of each configuration (default 5)
#   --seconds S    animation length (default 5)
#   --gtk 3|4      GTK version (default 3)
#   --warmup S     seconds of animation before the measurement (default 2)
#   (--smoke: one run of each, a 3 s animation, 1 s of it warm-up)
# Exit status: 0 done, 1 a run failed, 2 usage, 3 not root.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/bench-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench-common.sh"
REPEATS=5
SECS=5
GTK=3
USE_BPFTRACE=0
bench_opt --repeats REPEATS posint
bench_opt --seconds SECS posint
bench_opt --gtk GTK posint
WARMUP=2
bench_opt --warmup WARMUP posint
bench_parse "$@"
bench_smoke REPEATS=1 SECS=3 WARMUP=1
[[ $GTK == 3 || $GTK == 4 ]] || usage_error "--gtk must be 3 or 4"
((SECS >= WARMUP + 2)) || usage_error "--seconds must be at least --warmup + 2"

bench_prepare "it loads BPF programs and attaches uprobes" jq awk Xvfb
# Debian's, with python3-gi (not a python3 earlier on PATH).
PY=/usr/bin/python3
bench_build looptrace
LT=$BUILD_DIR/looptrace
APP=$REPO/tests/programs/gtk_frames.py
bench_need "$LT"
bench_workdir looptrace-bench-frames
"$PY" -c "import gi; gi.require_version('Gtk', '$GTK.0')" 2>/dev/null ||
  die "GTK $GTK typelibs for python3-gi are missing (gir1.2-gtk-$GTK.0)"

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

# A display of our own for every run.
DISP=:$((90 + RANDOM % 100))
Xvfb "$DISP" -screen 0 640x480x24 -nolisten tcp >"$WORK/xvfb.log" 2>&1 &
PIDS+=($!)
sleep 1
kill -0 "${PIDS[0]}" 2>/dev/null || die "Xvfb did not start: $(cat "$WORK/xvfb.log")"
XVFB=${PIDS[0]}

monotonic_ns() { "$PY" -c 'import time; print(time.monotonic_ns())'; }
cpu_of() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }

# run_one CONFIG N: one fresh app under CONFIG; appends
# "CONFIG cpu_ns frames" to $WORK/results (and its stats with STATS_RUN=1).
run_one() {
  local cfg=$1 n=$2 d=$WORK/$1.$2 app lt="" c0 c1 frames
  DISPLAY=$DISP "$PY" "$APP" --gtk "$GTK" --duration $((SECS * 1000)) \
    --stall-every 1000000 --linger 1500 --log "$d.app" >"$d.out" 2>"$d.err" &
  app=$!; PIDS=("$XVFB" "$app")
  wait_for "$d.err" "ready pid=" 30 || die "$cfg: the app did not start: $(cat "$d.err")"
  case $cfg in
    frames | no-frames)
      local prof=glib
      [[ $cfg == no-frames ]] && prof=$WORK/no-frames.json
      "$LT" record -p "$app" --profile "$prof" --json "$d.json" >"$d.log" 2>&1 &
      lt=$!; PIDS+=("$lt")
      wait_attached "$d.log" "$cfg" "$lt" ;;
    monitor)
      "$LT" monitor -p "$app" >"$d.log" 2>&1 &
      lt=$!; PIDS+=("$lt")
      wait_for "$d.log" "SIGINT or SIGTERM to stop" 60 ||
        die "$cfg: the monitor did not start: $(cat "$d.log")" ;;
  esac
  local t0=0 t1=0 m0 m1
  kill -USR1 "$app"
  # The tracer reads the app's symbols at its first event, once: the
  # steady state is measured after --warmup seconds of animation.
  sleep "$WARMUP"
  m0=$(monotonic_ns)
  c0=$(cpu_of "$app")
  [[ -z $lt ]] || t0=$(cpu_of "$lt")
  sleep "$((SECS - WARMUP - 1)).8"
  c1=$(cpu_of "$app")
  [[ -z $lt ]] || t1=$(cpu_of "$lt")
  m1=$(monotonic_ns)
  [[ -z $lt || $STATS_RUN -eq 0 ]] || prog_stats "$lt" "$cfg" >"$d.stats"
  wait "$app" || die "$cfg: the app failed: $(tail -3 "$d.err")"
  if [[ -n $lt ]]; then
    kill -INT "$lt" 2>/dev/null || true
    wait "$lt" || die "$cfg: looptrace failed: $(tail -3 "$d.log")"
  fi
  PIDS=("$XVFB")
  frames=$(jq -s --argjson m0 "$m0" --argjson m1 "$m1" \
    '[.[] | select(.event == "frame" and .animating and .start_ns >= $m0 and .start_ns < $m1)] | length' "$d.app")
  [[ $frames -gt 0 ]] || die "$cfg: the app logged no frame"
  echo "$cfg $((c1 - c0)) $frames $((t1 - t0))" >>"$WORK/results"
  if [[ $cfg == frames ]] && check_json "$d.json" "$cfg run $n"; then
    local seen all
    seen=$(jq '[.frames[]?.count] | add // 0' "$d.json")
    # Every paint cycle of the trace, the app's before and after its ticks too.
    all=$(jq -s '[.[] | select(.event == "frame")] | length' "$d.app")
    ((seen >= frames && seen <= all + 3)) ||
      fail "$cfg run $n: looptrace counted $seen frames, the app drew $frames animating ($all in all)"
  fi
}

STATS_RUN=0
CONFIGS=(untraced frames no-frames monitor)
echo "$BENCH: $REPEATS runs of each of ${CONFIGS[*]}; GTK $GTK, ${SECS} s at 60 Hz" >&2
for ((n = 0; n < REPEATS; n++)); do
  for ((i = 0; i < ${#CONFIGS[@]}; i++)); do
    run_one "${CONFIGS[(i + n) % ${#CONFIGS[@]}]}" "$n"
  done
done

awk '
  { c[$1] = c[$1] " " ($2 / $3); f[$1] = f[$1] " " $3; t[$1] = t[$1] " " ($4 / $3)
    if (!seen[$1]++) order[++m] = $1 }
  function med(s,   v, n, i, j, t) {
    n = split(s, v, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  END {
    printf "%-10s %10s %18s %14s %20s\n", "config", "frames", "CPU us per frame", "over untraced",
      "tracer us per frame"
    for (o = 1; o <= m; o++) {
      k = order[o]; v[k] = med(c[k])
      printf "%-10s %10d %18.1f %14s %20.1f\n", k, med(f[k]), v[k] / 1000,
        k == "untraced" ? "-" : sprintf("%+.1f us", (v[k] - v["untraced"]) / 1000), med(t[k]) / 1000
    }
  }' "$WORK/results" | tee "$WORK/table"

sysctl -q -w kernel.bpf_stats_enabled=1
STATS_RUN=1
for cfg in frames no-frames; do
  run_one "$cfg" stats
  awk -v c="$cfg" '$2 ~ /^lt_span_(entry|return)#/ && $3 > 0 {
    split($2, n, "#"); printf "%s: %s %.1f ns/run (%d runs)\n", c, n[1], $4 / $3, $3 }' \
    "$WORK/$cfg.stats.stats"
done
sysctl -q -w kernel.bpf_stats_enabled="$STATS_WAS"
bench_exit
