#!/usr/bin/env bash
# Builds the Debian package looptrace_VERSION_amd64.deb from a built tree
# (${BUILD_DIR:-build}; scripts/build.sh makes one) with CPack's DEB
# generator (cmake/Install.cmake): Depends computed by dpkg-shlibdeps from
# the libraries the binaries link. Prints the package's path.
#   scripts/package.sh && sudo apt-get install ./build/package/looptrace_*.deb
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
[[ -f $build_dir/CPackConfig.cmake ]] ||
  { echo "package: $build_dir is not a configured build (scripts/build.sh)" >&2; exit 2; }
cmake --build "$build_dir" -j"$(nproc)" --target looptrace refapp looptrace_man >&2
rm -f "$build_dir"/package/looptrace_*.deb
(cd "$build_dir" && cpack -G DEB --config CPackConfig.cmake) >&2
ls "$(realpath "$build_dir")"/package/looptrace_*_*.deb
