#!/usr/bin/env bash
# Attach time: from `looptrace record -p PID` starting to its "tracing ..."
# line (probes resolved, BPF loaded and verified, every probe attached),
# for the node profile on /usr/bin/node (a 100 MB unstripped binary) and
# the glib profile on Debian's python3 running a GLib loop, each with a
# cold resolution cache (a fresh LOOPTRACE_CACHE_DIR: the binary is read
# and demangled whole) and a warm one (its build-id's resolutions kept by
# the cold run: only its headers are read). Also the whole run's wall time
# (-d 10ms: attach, 10 ms, report, detach) and looptrace's max RSS.
#
# Usage: sudo scripts/bench-attach.sh [-B BUILD_DIR] [--no-build]
#          [--repeats N] [--keep]
# Exit status: 0 done, 1 a run failed, 2 usage, 3 not root.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR="$REPO/build-bench"
DO_BUILD=1
REPEATS=5
CPU=""
USE_BPFTRACE=0
KEEP=0

BENCH=bench-attach.sh
# shellcheck source=lib/bench-common.sh
source "$REPO/scripts/lib/bench-common.sh"
usage() { sed -n '/^# Usage:/,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    -B|--build-dir|--repeats)
      [[ $# -ge 2 ]] || { echo "$BENCH: $1 needs a value" >&2; usage; } ;;
  esac
  case "$1" in
    -B|--build-dir) BUILD_DIR=$(realpath -m "$2"); shift 2 ;;
    --no-build) DO_BUILD=0; shift ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) usage ;;
    *) echo "$BENCH: unknown option $1" >&2; usage ;;
  esac
done
[[ $REPEATS =~ ^[1-9][0-9]*$ ]] || die "--repeats must be a positive integer" 2

bench_prepare "it loads BPF programs" node /usr/bin/python3 awk
bench_build
LT=$BUILD_DIR/looptrace
[[ -x $LT ]] || die "$LT is missing: build the looptrace target"
bench_workdir looptrace-bench-attach

node -e 'setInterval(() => {}, 1000)' &
NODE=$!; PIDS+=("$NODE")
/usr/bin/python3 "$REPO/tests/programs/glib_loop.py" --duration 600000 \
  --log "$WORK/glib.log" >/dev/null 2>&1 &
GLIB=$!; PIDS+=("$GLIB")
sleep 1

# attach_once PROFILE PID CACHE_DIR: "attach_s wall_s rss_kb", timed by
# python (the moment the "tracing" line arrives on looptrace's stderr).
attach_once() {
  LOOPTRACE_CACHE_DIR=$3 /usr/bin/python3 - "$LT" "$1" "$2" <<'PY'
import resource, subprocess, sys, time
lt, profile, pid = sys.argv[1:]
t0 = time.monotonic()
p = subprocess.Popen([lt, "record", "--profile", profile, "-p", pid,
                      "-d", "10ms"], stdout=subprocess.DEVNULL,
                     stderr=subprocess.PIPE, text=True)
attach = None
for line in p.stderr:
    if attach is None and "looptrace: tracing" in line:
        attach = time.monotonic() - t0
rc = p.wait()
wall = time.monotonic() - t0
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
if rc != 0 or attach is None:
    sys.exit("looptrace exited %d%s" % (rc, "" if attach else ", no banner"))
print("%.3f %.3f %d" % (attach, wall, rss))
PY
}

printf '%-6s %-5s %9s %9s %9s %8s\n' profile cache attach_s min_s wall_s rss_MiB
for target in "node $NODE" "glib $GLIB"; do
  read -r prof pid <<<"$target"
  for cache in cold warm; do
    : >"$WORK/$prof.$cache"
    for ((i = 0; i < REPEATS; i++)); do
      dir=$WORK/cache-$prof-$i
      [[ $cache == cold ]] && rm -rf "$dir"
      attach_once "$prof" "$pid" "$dir" >>"$WORK/$prof.$cache" ||
        fail "$prof ($cache cache): looptrace failed"
    done
    a=$(awk '{print $1}' "$WORK/$prof.$cache" | median)
    amin=$(awk '{print $1}' "$WORK/$prof.$cache" | sort -g | head -1)
    w=$(awk '{print $2}' "$WORK/$prof.$cache" | median)
    r=$(awk '{print $3}' "$WORK/$prof.$cache" | median)
    printf '%-6s %-5s %9s %9s %9s %8s\n' "$prof" "$cache" "$a" "$amin" "$w" \
      "$(calc "$r / 1024")"
  done
done
echo "(medians of $REPEATS; min_s the fastest attach)"
exit "$FAILED"
