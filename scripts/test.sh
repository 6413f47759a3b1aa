#!/usr/bin/env bash
# Sets up, builds and runs every test: bash -n and shellcheck over every
# shell script (scripts/lint.sh), unit tests, the privileged BPF
# integration tests, the install tree and Debian package
# (scripts/test-install.sh), every bench script's --smoke mode (scripts/bench-smoke.sh,
# about a minute, root), the unit tests again under ASan + UBSan, then each
# fuzzer on its corpus for a short time (docs/fuzzing.md; about 2 minutes),
# and looptrace built in the build types not built above (their optimizers
# warn differently: a packager's Release build once failed).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/lint.sh
scripts/build.sh
ctest --test-dir build --output-on-failure "$@"
scripts/test-install.sh build
if [[ $(id -u) -eq 0 ]]; then
  scripts/bench-smoke.sh
else
  echo "test: not root: the bench scripts' smoke runs skipped (they trace)" >&2
fi
BUILD_DIR=build-asan BUILD_TYPE=Debug TARGET=looptrace_unit_tests \
  scripts/build.sh -DLOOPTRACE_SANITIZE=ON
ctest --test-dir build-asan --output-on-failure -L unit
scripts/fuzz.sh build
ctest --test-dir build-fuzz --output-on-failure -L fuzz
for type in Release MinSizeRel; do
  BUILD_DIR=build-$type BUILD_TYPE=$type TARGET=looptrace scripts/build.sh
done
