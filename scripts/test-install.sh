#!/usr/bin/env bash
# Checks what a user installs: `cmake --install` into a temporary DESTDIR
# (the tree, the man page, the completion, the installed binary run from
# there), then the Debian package (scripts/package.sh): its Depends and
# files, and, as root, `dpkg -i`, `looptrace demo` from /usr/bin and
# `dpkg -r` on this machine's own root seen through an overlay in a private
# mount namespace, so that nothing is left on the machine whatever happens.
#
# Usage: scripts/test-install.sh [BUILD_DIR]   (default: build, already built)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tmp=$(mktemp -d /tmp/looptrace-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "test-install: FAILED: $*" >&2
  exit 1
}
pass() { echo "test-install: ok: $*" >&2; }
# grep -q in a pipeline, reading all its input: under pipefail, grep -q
# stopping at the first match would fail the writer with SIGPIPE.
found() { grep "$@" >/dev/null; }

# --- cmake --install into a DESTDIR ----------------------------------------
DESTDIR=$tmp/root cmake --install "$build" --prefix /usr >/dev/null
root=$tmp/root
(cd "$root" && find . -type f | sort) >"$tmp/tree"
for f in ./usr/bin/looptrace ./usr/libexec/looptrace/refapp \
  ./usr/share/man/man1/looptrace.1 \
  ./usr/share/bash-completion/completions/looptrace \
  ./usr/lib/systemd/system/looptrace-monitor.service \
  ./usr/share/doc/looptrace/looptrace.md ./usr/share/doc/looptrace/README.md; do
  grep -qxF "$f" "$tmp/tree" || fail "cmake --install did not install $f"
done
pass "installed tree: $(wc -l <"$tmp/tree") files"

# The version and the commit, against git's own answer.
want="looptrace $(sed -n 's/^project(looptrace VERSION \([0-9.]*\).*/\1/p' \
  CMakeLists.txt)"
if commit=$(git rev-parse --short=12 HEAD 2>/dev/null); then
  git diff-index --quiet HEAD -- || commit+="-dirty"
  want+=" (git $commit)"
fi
got=$("$root/usr/bin/looptrace" --version)
[[ $got == "$want" ]] || fail "--version says '$got', expected '$want'"
"$root/usr/bin/looptrace" profiles | found '^glib ' ||
  fail "the installed looptrace lists no glib profile"
pass "installed looptrace --version: $got; profiles run"

# The man page: readable by man, with the sections a man page has, one per
# subcommand, and a term for every option any --help lists.
MANWIDTH=200 man -l "$root/usr/share/man/man1/looptrace.1" 2>"$tmp/man.err" \
  >"$tmp/man.txt" || fail "man -l cannot read the page: $(cat "$tmp/man.err")"
# (troff's "cannot adjust line" is a table cell too long to justify.)
grep -v 'cannot adjust line' "$tmp/man.err" >"$tmp/man.err2" || true
[[ ! -s $tmp/man.err2 ]] || fail "man -l warns: $(head -3 "$tmp/man.err2")"
lt=$root/usr/bin/looptrace
subs=$("$lt" --help | sed -n '/^Subcommands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p')
[[ -n $subs ]] || fail "looptrace --help lists no subcommand"
for section in NAME SYNOPSIS DESCRIPTION "EXIT STATUS" FILES EXAMPLES \
  "SEE ALSO" $(tr "[:lower:]" "[:upper:]" <<<"$subs"); do
  grep -qx "$section" "$tmp/man.txt" || fail "the man page has no $section section"
done
# A term is a line indented by 7 columns; its options are what it defines.
grep -E '^ {7}[^ ]' "$tmp/man.txt" >"$tmp/terms"
missing=()
for sub in "" $subs; do
  while read -r opt; do
    [[ $opt == -h || $opt == --help ]] && continue
    grep -qE -- "(^|[ ,])$opt([ ,=]|$)" "$tmp/terms" || missing+=("${sub:-looptrace} $opt")
  done < <("$lt" ${sub:+"$sub"} --help |
    sed -n 's/^ \{1,4\}\(-[-A-Za-z0-9,]*\).*/\1/p' | tr ',' '\n' | grep -- '^-')
done
((${#missing[@]} == 0)) || fail "options --help lists with no term in the man page: ${missing[*]}"
pass "man page: sections and a term for every option of --help"

# Bash completion, from the installed file, against the installed binary.
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
           _looptrace; printf "%s\n" "${COMPREPLY[@]}"' _ \
    "$root/usr/share/bash-completion/completions/looptrace" "$@"
}
complete_words "$lt" "" | found -x record || fail "completion: no subcommand 'record'"
complete_words "$lt" record --prof | found -x -- --profile ||
  fail "completion: no --profile for record"
complete_words "$lt" record --profile g | found -x glib ||
  fail "completion: --profile g does not offer glib"
sleep 60 &
complete_words "$lt" record -p "$!" | found -x "$!" ||
  fail "completion: -p does not complete the pid of a running sleep"
kill $! 2>/dev/null || true
pass "bash completion: subcommands, options, profiles, pids"

# --- the Debian package -------------------------------------------------------
deb=$(BUILD_DIR=$build scripts/package.sh)
[[ -f $deb ]] || fail "package.sh made no package"
dpkg-deb --info "$deb" >"$tmp/info"
depends=$(sed -n 's/^ Depends: //p' "$tmp/info")
# What the binaries link (zlib streams are written with libdeflate;
# libdebuginfod fetches debug files; civetweb serves --metrics).
for lib in libbpf1 libelf1 libdw1 libdebuginfod1 libdeflate0 liblzma5 libfmt9 libprotobuf32 libprometheus-cpp-core1.0 libcivetweb1 libc6 libstdc++6; do
  tr ',' '\n' <<<"$depends" | sed 's/^ *//; s/ .*//' | found -xF "$lib" ||
    fail "package Depends lacks $lib: $depends"
done
dpkg-deb --contents "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$tmp/contents"
for f in /usr/bin/looptrace /usr/libexec/looptrace/refapp \
  /usr/share/man/man1/looptrace.1 \
  /usr/share/bash-completion/completions/looptrace; do
  grep -qxF "$f" "$tmp/contents" || fail "package lacks $f"
done
pass "package $(basename "$deb"): Depends: $depends"

if [[ $(id -u) -ne 0 ]]; then
  echo "test-install: not root: dpkg -i / demo / dpkg -r skipped" >&2
  exit 0
fi
# Installed for real, in a private mount namespace where /usr, /etc and /var
# are overlays of the machine's own: dpkg sees this machine's database and
# libraries, and every change vanishes with the namespace.
unshare -m --propagation private bash -s "$deb" "$tmp" <<'EOF'
set -euo pipefail
deb=$1 tmp=$2
for d in usr etc var; do
  mkdir -p "$tmp/ov/$d/up" "$tmp/ov/$d/work"
  mount -t overlay overlay \
    -o "lowerdir=/$d,upperdir=$tmp/ov/$d/up,workdir=$tmp/ov/$d/work" "/$d"
done
fail() { echo "test-install: FAILED: $*" >&2; exit 1; }
found() { grep "$@" >/dev/null; }
dpkg -i "$deb" >"$tmp/dpkg-i.log" 2>&1 || fail "dpkg -i: $(tail -3 "$tmp/dpkg-i.log")"
dpkg -s looptrace | found -x 'Status: install ok installed' ||
  fail "dpkg -s does not show looptrace installed"
[[ $(command -v looptrace) == /usr/bin/looptrace ]] ||
  fail "looptrace is not /usr/bin/looptrace on PATH"
man -w looptrace | found '^/usr/share/man/man1/looptrace.1' ||
  fail "man -w looptrace finds no installed page"
# The demo times a live system against the app's own clock, as the BPF
# tests do, and like them it is run once more when it fails (scripts/test.sh):
# on a shared VM a probe's trap now and then waits on the host for tens of
# ms the app's clock reads do not see. Passing then, it is named FLAKY with
# what failed the first time.
demo_failed() { sed -n '/^Ground truth/,$p' "$tmp/demo.log" | grep -v '^$' | head -20; }
if ! (cd / && looptrace demo >"$tmp/demo.log" 2>&1); then
  first=$(demo_failed)
  (cd / && looptrace demo >"$tmp/demo.log" 2>&1) ||
    fail "looptrace demo from /usr/bin failed twice: $(demo_failed)"
  printf 'test-install: FLAKY (failed, then passed when run again): looptrace demo:\n%s\n' "$first" >&2
fi
echo "test-install: ok: dpkg -i; looptrace demo from /usr/bin: $(grep -c . "$tmp/demo.log") lines" >&2
dpkg -r looptrace >"$tmp/dpkg-r.log" 2>&1 || fail "dpkg -r: $(tail -3 "$tmp/dpkg-r.log")"
dpkg -s looptrace 2>/dev/null | found 'Status: install ok installed' &&
  fail "dpkg -s still shows looptrace after dpkg -r"
# What dpkg -r leaves: nothing of looptrace's under /usr or /etc (the
# overlays' upper layers hold only what changed since the mount).
left=$(find "$tmp/ov/usr/up" "$tmp/ov/etc/up" -name '*looptrace*' | head -5)
[[ -z $left ]] || fail "dpkg -r left: $left"
echo "test-install: ok: dpkg -r leaves nothing behind" >&2
EOF
