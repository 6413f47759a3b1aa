#!/usr/bin/env bash
# Regenerates the binary seeds of tests/fuzz/corpus: the ELF files of
# fuzz_elf (small: a 64-byte page size and no debug info keep each a few KB;
# they are seeds, not programs to run), the ring-buffer records of
# fuzz_decode (from include/looptrace/abi.h: rerun this when the ABI
# changes), and the recording records of fuzz_record_decode and a recording
# holding them for fuzz_recording (from user/record/codec.cpp's encoder:
# rerun this when the recording format changes). The text seeds, and the
# record_decode seeds typeN-M and recording/refapp-run.lt (taken from a run
# of the reference app), are not made here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
seeds=$here/seeds
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck disable=SC2054 # linker flags: their commas are no array separators
small=(-Wl,--build-id -Wl,-z,max-page-size=64 -Wl,-z,common-page-size=64
       -Wl,-z,noseparate-code)
elf=$here/corpus/elf
mkdir -p "$elf"
g++ -O1 -shared -fPIC -nostdlib "${small[@]}" \
  -Wl,--version-script="$seeds/seed_lib.map" -o "$elf/lib.so" \
  "$seeds/seed_lib.cpp"
gcc -O1 -fPIE -pie "${small[@]}" -o "$elf/pie" "$seeds/seed_prog.c"
gcc -O1 -fno-pie -no-pie "${small[@]}" -o "$elf/nopie" "$seeds/seed_prog.c"
strip --strip-debug -R .comment "$elf/lib.so" "$elf/pie" "$elf/nopie"
strip -o "$elf/stripped" "$elf/pie"
# MiniDebugInfo as Fedora builds it (gdb manual, "MiniDebugInfo"): the
# functions of .symtab in an xz-compressed ELF in .gnu_debugdata of the
# stripped program.
nm "$elf/pie" --format=posix --defined-only |
  awk '$2 == "T" || $2 == "t" { print $1 }' >"$tmp/funcs"
objcopy --only-keep-debug "$elf/pie" "$tmp/debug"
objcopy -S --remove-section .comment --keep-symbols="$tmp/funcs" \
  "$tmp/debug" "$tmp/mini"
xz -c "$tmp/mini" >"$tmp/mini.xz"
objcopy --add-section .gnu_debugdata="$tmp/mini.xz" "$elf/stripped" \
  "$elf/minidebuginfo"

decode=$here/corpus/decode
mkdir -p "$decode"
g++ -std=c++20 -I"$root/include" -o "$tmp/make_decode_seeds" \
  "$seeds/make_decode_seeds.cpp"
"$tmp/make_decode_seeds" "$decode"

record=$here/corpus/record_decode
recording=$here/corpus/recording
mkdir -p "$record" "$recording"
g++ -std=c++20 -O1 -I"$root/include" -I"$root/user" \
  -o "$tmp/make_record_seeds" "$seeds/make_record_seeds.cpp" \
  "$root/user/record/codec.cpp" "$root/user/base/text.cpp" -lfmt -lz
"$tmp/make_record_seeds" "$record" "$recording/all-types.lt"

ls -l "$elf" "$decode" "$record" "$recording"
