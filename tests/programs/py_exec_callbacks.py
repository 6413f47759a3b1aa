#!/usr/bin/python3
"""GLib timeouts whose callbacks exec() makes one at a time and drops once
they ran, for looptrace's test of Python names read at sample time
(tests/integration/python_exec_test.cpp).

Round N compiles a new function cb_N from a file named gen_N.py whose
first N lines are blank (its def is on line N + 1), adds it as a one-shot
GLib timeout due after --gap-ms and keeps no reference of its own: once
the callback has run (a busy loop of --stall-ms) and returned False, GLib
drops it and its code object is freed, and the next round's code object
may take its memory. Run with Debian's /usr/bin/python3 (python3-gi).

Ground truth (--log, JSON lines, CLOCK_MONOTONIC ns, written at the end):
  {"event":"stall","index":N,"name":"cb_N","file":"gen_N.py",
   "def_line":N+1,"start_ns","end_ns","pid","tid"}
                          start/end taken at the very start and end of
                          cb_N, in cb_N itself

Usage: py_exec_callbacks.py [--rounds N] [--stall-ms MS] [--gap-ms MS]
                            [--log FILE]
Prints "py_exec_callbacks: ready pid=N" to stderr at startup. Exit 0 when
the rounds are done, 2 on bad arguments (one line on stderr).
"""

import argparse
import json
import os
import sys
import threading
import time

import gi

gi.require_version("GLib", "2.0")
from gi.repository import GLib  # noqa: E402

# cb_N's source after N blank lines: the stall is in cb_N's own frame.
SOURCE = """def cb_{n}():
    start = now_ns()
    deadline = start + STALL_NS
    while now_ns() < deadline:
        pass
    done({n}, start, now_ns())
    return False
"""


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write("py_exec_callbacks: error: %s\n" % message)
        sys.exit(2)


class Rounds:
    def __init__(self, args):
        self.args = args
        self.loop = GLib.MainLoop()
        self.records = []
        self.pid = os.getpid()
        self.tid = threading.get_native_id()

    def next_round(self, n):
        if n >= self.args.rounds:
            self.loop.quit()
            return False
        name = "gen_%d.py" % n
        code = compile("\n" * n + SOURCE.format(n=n), name, "exec")
        ns = {"now_ns": now_ns, "STALL_NS": self.args.stall_ms * 1000000,
              "done": self.done}
        exec(code, ns)
        # GLib holds the only reference to cb_N (and so to its globals).
        GLib.timeout_add(self.args.gap_ms, ns.pop("cb_%d" % n))
        return False

    def done(self, n, start, end):
        self.records.append({"event": "stall", "index": n,
                             "name": "cb_%d" % n, "file": "gen_%d.py" % n,
                             "def_line": n + 1, "start_ns": start,
                             "end_ns": end, "pid": self.pid,
                             "tid": self.tid})
        GLib.idle_add(self.next_round, n + 1)


def main():
    p = OneLineParser()
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--stall-ms", type=int, default=60)
    p.add_argument("--gap-ms", type=int, default=20)
    p.add_argument("--log")
    args = p.parse_args()
    if args.rounds <= 0 or args.stall_ms <= 0 or args.gap_ms < 0:
        p.error("--rounds and --stall-ms must be > 0, --gap-ms >= 0")
    r = Rounds(args)
    sys.stderr.write("py_exec_callbacks: ready pid=%d\n" % r.pid)
    sys.stderr.flush()
    GLib.idle_add(r.next_round, 0)
    r.loop.run()
    if args.log:
        with open(args.log, "w") as f:
            for rec in r.records:
                f.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
