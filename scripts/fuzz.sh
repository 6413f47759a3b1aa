#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, docs/fuzzing.md) with clang into
# ${BUILD_DIR:-build-fuzz}, then runs them one after another.
#
#   scripts/fuzz.sh                      build, then run each for 60 s
#   scripts/fuzz.sh build                build only
#   FUZZ_TIME=600 scripts/fuzz.sh        run each for 10 minutes
#   FUZZ_RUNS=10000000 scripts/fuzz.sh elf decode
#                                        10 M executions of two targets
#   scripts/fuzz.sh profile -- -max_len=65536
#                                        extra libFuzzer flags after --
#
# Targets: profile key_expr duration maps elf decode recording record_decode
# perf_map (default: all, as tests/fuzz/CMakeLists.txt lists them). Each
# run reads the committed corpus (tests/fuzz/corpus/NAME) and writes the
# inputs it finds to BUILD_DIR/tests/fuzz/corpus/NAME, crashes to
# BUILD_DIR/tests/fuzz/artifacts/. A run ends non-zero at the first crash,
# leak or hang (-timeout=10 s per input).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build-fuzz}
all_targets=(profile key_expr duration maps elf decode recording record_decode
  perf_map)

# Warnings are errors in the GCC build (scripts/build.sh); clang warns about
# other things (-Wsign-compare inside the kernel's NLMSG_OK macro), so here
# they are shown, not fatal.
BUILD_DIR=$build_dir BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} \
  TARGET=looptrace_fuzzers scripts/build.sh -DLOOPTRACE_FUZZ=ON \
  -DLOOPTRACE_WERROR=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
[ "${1:-}" = build ] && exit 0

targets=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  targets+=("$1")
  shift
done
[ "${1:-}" = -- ] && shift
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")

if [ -n "${FUZZ_RUNS:-}" ]; then
  budget=(-runs="$FUZZ_RUNS")
else
  budget=(-max_total_time="${FUZZ_TIME:-60}")
fi

fuzz_dir=$build_dir/tests/fuzz
for t in "${targets[@]}"; do
  bin=$fuzz_dir/fuzz_$t
  if [ ! -x "$bin" ]; then
    echo "fuzz: no target '$t' (one of: ${all_targets[*]})" >&2
    exit 2
  fi
  mkdir -p "$fuzz_dir/corpus/$t" "$fuzz_dir/artifacts"
  echo "fuzz: $t (${budget[*]})" >&2
  "$bin" "${budget[@]}" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$fuzz_dir/artifacts/$t-" \
    "$@" "$fuzz_dir/corpus/$t" "tests/fuzz/corpus/$t"
done
