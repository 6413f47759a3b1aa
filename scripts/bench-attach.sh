#!/usr/bin/env bash
# Attach time: from `looptrace record -p PID` starting to its "tracing ..."
# line (probes resolved, BPF loaded and verified, every probe attached),
# for the node profile on /usr/bin/node (a 100 MB unstripped binary) and
# the glib profile on Debian's python3 running a GLib loop, each with a
# cold resolution cache (a fresh LOOPTRACE_CACHE_DIR: the binary is read
# and demangled whole) and a warm one (its build-id's resolutions kept by
# the cold run: only its headers are read). Also the whole run's wall time
# (-d 10ms: attach, 10 ms, report, detach) and looptrace's max RSS.
# glib1g: the glib profile on the same python3 holding 1 GiB of heap
# (2^20 bytes objects of 1000 bytes, malloc'd, touched), as
# scripts/bench-python.sh runs it.
#
# Usage: sudo scripts/bench-attach.sh [options]
#   --repeats N          runs of each profile and cache state (default 5)
#   --profiles LIST      node, glib, glib1g, comma-separated (default node,glib)
#   (--smoke: the glib profile, one run of each cache state)
# Exit status: 0 done, 1 a run failed, 2 usage, 3 not root.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/bench-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench-common.sh"
REPEATS=5
PROFILES=node,glib
bench_opt --repeats REPEATS posint
bench_opt --profiles PROFILES
bench_parse "$@"
bench_smoke REPEATS=1 PROFILES=glib
[[ $PROFILES =~ ^(node|glib|glib1g)(,(node|glib|glib1g))*$ ]] ||
  die "--profiles takes node, glib, glib1g, comma-separated" 2

tools=(/usr/bin/python3 awk jq)
[[ $PROFILES != *node* ]] || tools+=(node)
bench_prepare "it loads BPF programs" "${tools[@]}"
bench_build looptrace_bench
LT=$BUILD_DIR/looptrace
bench_need "$LT"
bench_workdir looptrace-bench-attach

targets=()
if [[ $PROFILES == *node* ]]; then
  node -e 'setInterval(() => {}, 1000)' &
  PIDS+=($!); targets+=("node node $!")
fi
if [[ ,$PROFILES, == *,glib,* ]]; then
  /usr/bin/python3 "$REPO/tests/programs/glib_loop.py" --duration 600000 \
    --log "$WORK/glib.log" >/dev/null 2>&1 &
  PIDS+=($!); targets+=("glib glib $!")
fi
if [[ $PROFILES == *glib1g* ]]; then
  /usr/bin/python3 -c '
import runpy, sys
ballast = [bytes(1000) for _ in range(1 << 20)]
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")' \
    "$REPO/tests/programs/glib_loop.py" --duration 600000 \
    --log "$WORK/glib1g.log" >/dev/null 2>&1 &
  PIDS+=($!); targets+=("glib1g glib $!")
  # Until it holds its ballast and runs its loop.
  wait_for "$WORK/glib1g.log" '"start"' 60 || die "glib1g: python3 did not start"
fi
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
for target in "${targets[@]}"; do
  read -r prof profile pid <<<"$target"
  for cache in cold warm; do
    : >"$WORK/$prof.$cache"
    for ((i = 0; i < REPEATS; i++)); do
      dir=$WORK/cache-$prof-$i
      [[ $cache == cold ]] && rm -rf "$dir"
      attach_once "$profile" "$pid" "$dir" >>"$WORK/$prof.$cache" ||
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
bench_exit
