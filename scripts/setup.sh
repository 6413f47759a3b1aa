#!/usr/bin/env bash
# Installs everything looptrace needs to build, test and benchmark, from
# Debian's archive. Idempotent: packages already present are left alone.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libdeflate-dev
  libfmt-dev libcli11-dev nlohmann-json3-dev libgtest-dev
  linux-perf bpftrace binutils procps time util-linux jq bc
  python3-gi gir1.2-glib-2.0 clang-format
  python3.11-dev # CPython 3.11's internal headers: its layout table (scripts/python-offsets.sh) and its test
  shellcheck # scripts/lint.sh
  libclang-rt-14-dev # libFuzzer and the sanitizer runtimes for clang 14
  libdw-dev # DWARF CFI unwinding of user stacks (user/unwind)
  elfutils  # eu-stack: the unwinder tests' independent reference
  libc6-dbg # glibc's separate debug file (by build-id): names of its internals
  libdebuginfod-dev # debug files by build-id from DEBUGINFOD_URLS (user/symbolize/debuginfod)
  libcapstone-dev # x86-64 decoding: virtual-call sites (user/elf/call_sites)
  android-libutils-dev # AOSP's native Looper, for the android profile and its test
  debuginfod # a local server for the debuginfod test
  liblzma-dev xz-utils # MiniDebugInfo (.gnu_debugdata) and its tests
  nodejs # the perf-map (JIT frames) test: node --perf-basic-prof
  chromium # headless, for the HTML report's browser test
  python3-pyqt5 # the Qt profile tests: PyQt5 and PyQt6 with
  python3-pyqt6 #   QT_QPA_PLATFORM=offscreen
  python3-pyqt5.qtquick qml-module-qtquick2 qml-module-qtquick-window2 # the Qt Quick
  python3-pyqt6.qtquick qml6-module-qtquick qml6-module-qtqml-workerscript #   frames test:
  libgl1-mesa-dri #   QML windows under Xvfb, drawn by Mesa's llvmpipe
  gir1.2-gtk-3.0 xvfb xdotool # the GTK profile test: keys typed under Xvfb
  gir1.2-gtk-4.0 # the frames test: a GTK 4 window animating under Xvfb
  meld # a real PyGObject application: its own Python frames in the stacks
  libwayland-dev # the Wayland test: a client and server built from libwayland
  pandoc # the man page, looptrace(1), generated from docs/looptrace.md
  dpkg-dev file man-db # scripts/package.sh (dpkg-shlibdeps) and its test
  libprotobuf-dev protobuf-compiler # --pprof: pprof's profile.proto
  golang-go # `go tool pprof`: the pprof test's independent reader
  prometheus-cpp-dev # looptrace monitor --metrics (user/monitor/metrics)
  libcivetweb-dev # its HTTP server, with our handler (user/monitor/metrics)
  prometheus # the metrics test's scraper (and its promtool)
  curl # bench-monitor.sh: what a scrape of /metrics costs (its GETs)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: need root to install: ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: all dependencies present" >&2
