#!/usr/bin/env bash
# What leaving `looptrace monitor` on costs, one tool at a time, the whole
# process: the reference app dispatching --rate cheap messages/s
# (`refapp --messages`, each one call of refapp::trigger) for --seconds, alone
# and under `looptrace monitor --profile refapp` (system-wide, started
# first, as a service would be); for each run the app's CPU (user + system
# of the whole process, from the kernel's rusage of the child), and for the
# monitor its own CPU over the same time, its resident memory sampled every
# --every seconds (flat or not) and its peak; then the time to write one
# dump (a 300 ms stall, `--dump-if 'dispatch > 250ms'`, from the monitor's
# own dump line). Interleaved alone/monitored over --repeats runs. Last,
# what a Prometheus scrape costs: the monitor serving --metrics for the
# app at --rate, --scrapes GETs of /metrics one after another, each one's
# time (curl's time_total) and the monitor's CPU per scrape (its CPU over
# the scrapes less its CPU over as long without them).
#
# Usage: sudo scripts/bench-monitor.sh [-B BUILD] [--rate N] [--seconds S]
#        [--repeats N] [--every S] [--smoke]
#   --smoke   2 s runs, one each, a 3 s dump run: every step, no figure
set -euo pipefail
build=build rate=1000 seconds=20 repeats=3 every=5 dump_s=13 scrapes=200
usage="usage: $0 [-B BUILD] [--rate N] [--seconds S] [--repeats N] [--every S] [--smoke]"
while (($#)); do
  case $1 in
    -h | --help) echo "$usage"; exit 0 ;;
    --smoke) seconds=2 repeats=1 every=1 dump_s=3 scrapes=5; shift ;;
    -B) build=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --every) every=$2; shift 2 ;;
    --scrapes) scrapes=$2; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
lt=$build/looptrace app=$build/refapp/refapp
[[ -x $lt && -x $app ]] || { echo "bench-monitor: build $lt and $app first" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
hz=$(getconf CLK_TCK)

# CPU seconds (user + system) the app's process used, from its rusage.
app_cpu() {
  /usr/bin/python3 - "$app" --rate "$rate" --messages "$((rate * seconds))" <<'PY'
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL,
               stderr=subprocess.DEVNULL, check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{r.ru_utime + r.ru_stime:.3f}")
PY
}
proc_cpu() { awk -v hz="$hz" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
hwm_kib() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }

start_monitor() {
  "$lt" monitor --profile refapp "$@" 2>"$tmp/mon.err" &
  mon=$!
  for _ in $(seq 200); do
    grep -q 'SIGINT or SIGTERM to stop' "$tmp/mon.err" && return
    sleep 0.1
  done
  echo "bench-monitor: the monitor did not start: $(cat "$tmp/mon.err")" >&2
  exit 1
}

printf 'refapp --messages at %s dispatches/s for %s s, %s runs each\n\n' "$rate" "$seconds" "$repeats"
printf '%-4s %12s %14s %14s %12s %12s  %s\n' run "alone cpu s" "monitored cpu s" \
  "monitor cpu s" "rss KiB" "peak KiB" "rss every ${every} s (KiB)"
for r in $(seq "$repeats"); do
  alone=$(app_cpu)
  start_monitor
  c0=$(proc_cpu "$mon")
  samples=""
  ( while kill -0 "$mon" 2>/dev/null; do rss_kib "$mon"; sleep "$every"; done ) >"$tmp/rss" &
  sampler=$!
  traced=$(app_cpu)
  c1=$(proc_cpu "$mon")
  kill "$sampler" 2>/dev/null || true
  samples=$(tr '\n' ' ' <"$tmp/rss")
  printf '%-4s %12s %14s %14.3f %12s %12s  %s\n' "$r" "$alone" "$traced" \
    "$(awk -v a="$c0" -v b="$c1" 'BEGIN {print b - a}')" "$(rss_kib "$mon")" "$(hwm_kib "$mon")" "$samples"
  kill -INT "$mon"
  wait "$mon" || true
done

# One dump: the window of a process at --rate, written when a 300 ms stall
# ends.
mkdir -p "$tmp/dumps"
start_monitor --dump-dir "$tmp/dumps" --dump-if 'dispatch > 250ms'
"$app" --rate "$rate" --messages "$((rate * dump_s))" \
  --stall "busy:300@$(((dump_s - 1) * 1000))" >/dev/null 2>&1
kill -INT "$mon"
wait "$mon" || true
echo
grep 'looptrace: dump pid' "$tmp/mon.err" | sed 's/.*: \(.*\) (\(.*\))$/dump: \2/' ||
  { echo "bench-monitor: no dump written: $(cat "$tmp/mon.err")" >&2; exit 1; }

# Scrapes: the monitor with --metrics while the app runs; its CPU over a
# quiet stretch, then over --scrapes GETs of /metrics.
port=$((20000 + RANDOM % 20000))
start_monitor --metrics "127.0.0.1:$port"
"$app" --rate "$rate" --messages "$((rate * 600))" >/dev/null 2>&1 &
appid=$!
sleep 2
curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/metrics.txt" ||
  { echo "bench-monitor: no /metrics on port $port: $(cat "$tmp/mon.err")" >&2; exit 1; }
t0=$(date +%s.%N) q0=$(proc_cpu "$mon")
sleep 3
q1=$(proc_cpu "$mon") t1=$(date +%s.%N)
: >"$tmp/scrape-times"
for _ in $(seq "$scrapes"); do
  curl -sf -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$port/metrics" >>"$tmp/scrape-times"
done
s1=$(proc_cpu "$mon") t2=$(date +%s.%N)
kill "$appid" 2>/dev/null || true
wait "$appid" 2>/dev/null || true
kill -INT "$mon"
wait "$mon" || true
awk -v n="$scrapes" -v q0="$q0" -v q1="$q1" -v s1="$s1" -v t0="$t0" -v t1="$t1" -v t2="$t2" \
  -v lines="$(grep -vc '^#' "$tmp/metrics.txt")" -v bytes="$(wc -c <"$tmp/metrics.txt")" '
  { sum += $1; if ($1 > max) max = $1 } END {
    quiet = (q1 - q0) / (t1 - t0)
    printf "scrape: %d GETs of %d series lines (%d bytes): %.2f ms mean, %.2f ms max; monitor cpu %.2f ms per scrape\n",
      n, lines, bytes, sum / n * 1000, max * 1000, ((s1 - q1) - quiet * (t2 - t1)) / n * 1000
  }' "$tmp/scrape-times"
