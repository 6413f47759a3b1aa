#!/usr/bin/env bash
# Sets up, builds and runs the demo: looptrace tracing the bundled reference
# app through a scripted scenario, then the app's own log beside the findings.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
exec build/looptrace demo "$@"
