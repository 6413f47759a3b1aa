#!/usr/bin/env bash
# Runs every bench script's --smoke mode (scripts/lib/bench-common.sh): the
# whole path of each benchmark with tiny counts (the build of its targets,
# the attaches, the checks of looptrace's JSON), in about a minute. Root:
# they trace. The figures they print mean nothing; a failed check fails.
#
# Usage: sudo scripts/bench-smoke.sh [BENCH...]
#   BENCH: bench, bench-whole, ... (default: every scripts/bench-*.sh but
#   this one, and bench-whole-vcall: bench-whole.sh --vcall); the build directory is ${BUILD_DIR:-build} (scripts/build.sh's)
# Exit status: 0 every smoke run passed, 1 one failed.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  names=(bench bench-whole bench-attach bench-stacks bench-python bench-js bench-input bench-x11 bench-frames bench-record bench-soak bench-monitor bench-whole-vcall bench-android)
fi

failed=()
summary=()
t_all=$SECONDS
for n in "${names[@]}"; do
  script=$n
  args=(--smoke -B "$build_dir")
  [[ $n != bench-record ]] || args+=(--live)
  if [[ $n == bench-whole-vcall ]]; then script=bench-whole; args+=(--vcall); fi
  echo "== scripts/$script.sh ${args[*]}" >&2
  t0=$SECONDS
  if "scripts/$script.sh" "${args[@]}"; then r=ok; else r="FAILED (exit $?)"; failed+=("$n"); fi
  summary+=("$(printf '%-14s %4d s  %s' "$n" $((SECONDS - t0)) "$r")")
done
echo >&2
printf 'bench smoke: %s\n' "${summary[@]}" >&2
echo "bench smoke: ${#names[@]} scripts in $((SECONDS - t_all)) s; ${#failed[@]} failed${failed[*]:+: ${failed[*]}}" >&2
[[ ${#failed[@]} -eq 0 ]]
