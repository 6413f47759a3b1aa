#!/usr/bin/env bash
# looptrace display channel benchmark: what framing an X11 or a Wayland
# connection's reads in the kernel costs, and how many events per second
# the reader keeps up with.
#
# The program (tests/bench/lt_bench_x11) is a display server's socket and
# its client in one thread: per iteration the "server" writes a chunk of
# key presses and the "client" reads it with recvmsg (4 KiB buffer). X11:
# 32-byte KeyPress events written with writev, as Xorg does; Wayland:
# 24-byte wl_keyboard.key events written with sendmsg, as libwayland-server
# does (the client's keyboard made by its requests once traced). For each
# protocol and chunk size (1, 2 and 4 KiB: 32, 64 and 128 X11 events, 42,
# 85 and 170 Wayland events per read) it runs untraced, then under
# `looptrace record -p PID --input --input-peer SOCKET --input-calls
# recvmsg,writev,sendmsg` (the client's reads framed, the server's writes
# recorded), alternating, --rounds times, and reports the medians of ns
# per iteration (one writev, one recvmsg), the added ns per read and per
# event, the time looptrace's BPF programs ran per iteration (bpf_stats:
# the read's framing and the write's record, in the kernel), the events/s
# of the traced runs and the records the ring buffer had no room for (the
# reader fell behind). Each traced run is checked from its JSON: every
# key press seen unless records were lost (counted), nothing unframed.
#
# Usage: sudo scripts/bench-x11.sh [options]
#   --rounds N           runs per configuration (default 5)
#   --iterations N       reads per run (default 20000)
#   --protocols LIST     x11, wayland or both (default x11,wayland)
#   --chunks LIST        chunk sizes in bytes (default 1024,2048,4096)
#   (--smoke: one round of 200 reads, 1 KiB chunks, both protocols)
# Exit status: 0 done, 1 a check failed, 2 usage, 3 not root.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/bench-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench-common.sh"
ROUNDS=5
ITERS=20000
PROTOCOLS=x11,wayland
CHUNKS=1024,2048,4096
bench_opt --rounds ROUNDS posint
bench_opt --iterations ITERS posint
bench_opt --protocols PROTOCOLS
bench_opt --chunks CHUNKS
bench_parse "$@"
bench_smoke ROUNDS=1 ITERS=200 CHUNKS=1024
((ITERS >= 20)) || die "--iterations must be at least 20" 2
[[ $PROTOCOLS =~ ^(x11|wayland)(,(x11|wayland))?$ ]] ||
  die "--protocols takes x11, wayland or both" 2
[[ $CHUNKS =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--chunks takes sizes in bytes, comma-separated" 2

bench_prepare "looptrace loads BPF programs" jq awk bpftool sysctl taskset cmake
bench_build looptrace_bench
LT=$BUILD_DIR/looptrace
X11=$BUILD_DIR/tests/bench/lt_bench_x11
bench_need "$LT" "$X11"
bench_workdir looptrace-bench-x11
# A display number nobody uses: a socket bound where X servers bind theirs.
mkdir -p /tmp/.X11-unix && chmod 1777 /tmp/.X11-unix
X11_SOCKET=/tmp/.X11-unix/X$((700 + RANDOM % 200))
# A compositor's socket is named wayland-*.
WL_SOCKET=$WORK/wayland-bench

run_one() {  # run_one NAME CHUNK TRACED PROTOCOL
  local name=$1 chunk=$2 traced=$3 proto=$4 go=$WORK/$1.go lt="" flag=()
  SOCKET=$X11_SOCKET
  if [[ $proto == wayland ]]; then SOCKET=$WL_SOCKET; flag=(--wayland); fi
  rm -f "$go"
  taskset -c "$CPU" "$X11" --socket "$SOCKET" --chunk "$chunk" "${flag[@]}" \
    --iterations "$ITERS" --go-file "$go" >"$WORK/$name.res" 2>"$WORK/$name.err" &
  local pid=$!
  PIDS+=("$pid")
  wait_for "$WORK/$name.err" "waiting" 10 || die "lt_bench_x11 did not start"
  if [[ $traced -eq 1 ]]; then
    "$LT" record -p "$pid" --input --input-peer "$SOCKET" \
      --input-calls recvmsg,writev,sendmsg --json "$WORK/$name.json" \
      >"$WORK/$name.lt.out" 2>"$WORK/$name.lt.err" &
    lt=$!
    PIDS+=("$lt")
    wait_attached "$WORK/$name.lt.err" "$name"
    prog_stats "$lt" before >"$WORK/$name.stats"
  fi
  touch "$go"
  wait "$pid" || die "lt_bench_x11 failed: $(cat "$WORK/$name.err")"
  [[ -n $lt ]] || return 0
  prog_stats "$lt" after >>"$WORK/$name.stats"
  # ns the BPF programs ran, per iteration of the target.
  awk -v n="$(jq -r .iterations "$WORK/$name.res")" '
    $1 == "before" { t0 += $4 } $1 == "after" { t1 += $4 }
    END { printf "%.0f\n", (t1 - t0) / n }' "$WORK/$name.stats" >"$WORK/$name.kns"
  kill -INT "$lt"
  wait "$lt" || fail "$name: looptrace exited $?"
  local want seen rb unframed
  check_json "$WORK/$name.json" "$name" || { echo 0 >"$WORK/$name.rb"; return 0; }
  want=$(jq -r .events "$WORK/$name.res")
  seen=$(jq -r '.input_summary.events' "$WORK/$name.json")
  rb=$(jq -r '.lost.ringbuf_full' "$WORK/$name.json")
  unframed=$(jq -r ".input_summary.${proto}_unframed_reads" "$WORK/$name.json")
  echo "$rb" >"$WORK/$name.rb"
  if [[ $rb -eq 0 ]]; then
    [[ $seen -eq $want ]] || fail "$name: $seen key presses reported, $want written, none lost"
  else
    # Lost records take their events with them, but never all of them.
    [[ $seen -lt $want && $seen -gt 0 ]] || fail "$name: $seen key presses reported, $want written, $rb records lost"
  fi
  [[ $unframed -eq 0 ]] || fail "$name: $unframed reads unframed"
}

sysctl -q -w kernel.bpf_stats_enabled=1
printf '%-8s %-6s %6s %12s %12s %10s %10s %10s %10s %8s\n' protocol chunk ev/rd "untraced ns" "traced ns" "+ns/read" "+ns/event" "bpf ns/it" "events/s" "rb lost"
for proto in ${PROTOCOLS//,/ }; do
  size=32
  [[ $proto == wayland ]] && size=24
  for chunk in ${CHUNKS//,/ }; do
    p=$proto-c$chunk
    for ((r = 0; r < ROUNDS; r++)); do
      if ((r % 2)); then order="1 0"; else order="0 1"; fi
      for t in $order; do run_one "$p-r$r-t$t" "$chunk" "$t" "$proto"; done
    done
    u=$(for ((r = 0; r < ROUNDS; r++)); do jq -r .ns_per_iteration "$WORK/$p-r$r-t0.res"; done | median)
    t=$(for ((r = 0; r < ROUNDS; r++)); do jq -r .ns_per_iteration "$WORK/$p-r$r-t1.res"; done | median)
    k=$(for ((r = 0; r < ROUNDS; r++)); do cat "$WORK/$p-r$r-t1.kns"; done | median)
    eps=$(for ((r = 0; r < ROUNDS; r++)); do jq -r '.events / .seconds' "$WORK/$p-r$r-t1.res"; done | median)
    rb=$(for ((r = 0; r < ROUNDS; r++)); do cat "$WORK/$p-r$r-t1.rb"; done | median)
    per=$((chunk / size))
    printf '%-8s %-6s %6s %12s %12s %10s %10s %10s %10s %8s\n' "$proto" "$chunk" "$per" "$u" "$t" \
      "$(calc "$t - $u" 0)" "$(calc "($t - $u) / $per" 1)" "$k" "$(calc "$eps" 0)" "$rb"
  done
done
bench_exit
