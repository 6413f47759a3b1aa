#!/usr/bin/env bash
# Configures and builds looptrace into ${BUILD_DIR:-build}; extra arguments go
# to cmake's configure step, ${TARGET} (default: all) to its build step.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
  -DLOOPTRACE_WERROR=ON "$@" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" ${TARGET:+--target "$TARGET"}
