#!/usr/bin/python3
"""A GLib main loop with injected stalls, for looptrace's GLib profile tests.

Run with Debian's /usr/bin/python3 (python3-gi). A GLib.MainLoop on the main
thread runs a 2 ms periodic timeout that does trivial work, plus one-shot
stall callbacks due at AT_MS after the start that block for MS (sleep or busy
loop; --sleep-pieces N: a sleep stall is N sleeps of MS/N each), and quits
after --duration. Every callback is dispatched by
libglib-2.0.so.0:g_main_context_dispatch, whose span covers the callback plus
a little GLib/PyGObject overhead. With --source idle|io|unix-fd a stall runs
in another kind of GLib source: its timeout at AT_MS only hands it over (an
idle source, or a byte written to a pipe that an I/O watch, a
GIOChannel's, or a unix fd source watches; custom: a GLib.Source
subclass, PyGObject's own GSourceFuncs, named "lt-custom" and attached
before the loop runs, made ready), and returns.

Ground truth (--log, JSON lines, CLOCK_MONOTONIC ns; stall lines are kept in
memory and written when the loop ends, so no file I/O lengthens a dispatch):
  {"event":"start","pid","tid","t0_ns","duration_ms","kind","tick_ms",
   "source","stalls":[{"index","requested_ms","at_ms","kind"}]}
  {"event":"stall","kind","source","requested_ms","at_ms","index","start_ns",
   "end_ns","duration_ns","pieces","pid","tid"}
                                    start/end taken at the very start and end
                                    of the stall callback; pieces: time.sleep
                                    calls (sleep), 0 (busy)
  {"event":"late","index","added_ns","due_ns","due_by_ns","start_ns","pid",
   "tid"}                           --late-timer: the timeout a stall added
                                    (added_ns read just before GLib reads
                                    its clock for the due time, in
                                    g_timeout_source_new; due_by_ns that
                                    read's latest due time), and when its
                                    callback started
  {"event":"nested","at_ms","requested_ms","start_ns","end_ns","pid","tid"}
                                    --nested-loop: the timeout whose callback
                                    ran a nested GLib.MainLoop (as
                                    gtk_dialog_run does), from its callback's
                                    start to its end
  {"event":"stack","index","frames":[{"name","file","line"}]}
                                    --dump-stack: a busy stall's Python stack,
                                    outermost first, taken in busy_for as it
                                    begins (traceback.extract_stack)
  {"event":"summary","pid","tid","reason":"duration|signal","ticks","stalls",
   "run_delay_ns"}                  the loop thread's whole run-queue wait
                                    (/proc/thread-self/schedstat), -1 unknown

Usage:
  glib_loop.py [--duration MS] [--kind sleep|busy] [--stall [KIND:]MS@AT_MS]...
               [--sleep-pieces N] [--source timeout|idle|io|unix-fd|custom]
               [--nested-loop MS@AT_MS] [--start-delay MS] [--log FILE]
Prints "glib_loop: ready pid=N" to stderr at startup. Exit 0 at the end and
after SIGTERM/SIGINT, 2 on bad arguments (one line on stderr).
"""

import argparse
import json
import os
import signal
import sys
import threading
import time
import traceback

import gi

gi.require_version("GLib", "2.0")
from gi.repository import GLib  # noqa: E402

TICK_MS = 2


def run_delay_ns():
    """How long this thread has waited on a run queue (the kernel's
    schedstat), -1 if the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write("glib_loop: error: %s\n" % message)
        sys.exit(2)


def parse_stall(text, default_kind):
    """[KIND:]MS@AT_MS -> (kind, ms, at_ms)."""
    kind = default_kind
    spec = text
    if ":" in spec:
        kind, spec = spec.split(":", 1)
        if kind not in ("sleep", "busy"):
            raise ValueError("unknown kind %r (sleep|busy)" % kind)
    if "@" not in spec:
        raise ValueError("expected [KIND:]MS@AT_MS")
    ms_text, at_text = spec.split("@", 1)
    ms, at_ms = int(ms_text), int(at_text)
    if ms <= 0 or at_ms < 0:
        raise ValueError("MS must be > 0 and AT_MS >= 0")
    return kind, ms, at_ms


def busy_for(ns, stacks=None):
    if stacks is not None:
        # The interpreter's own account of where this runs (--dump-stack).
        stacks.append([{"name": f.name, "file": f.filename, "line": f.lineno}
                       for f in traceback.extract_stack()])
    deadline = now_ns() + ns
    x = 0
    while now_ns() < deadline:
        x += 1
    return x


class CustomSource(GLib.Source):
    """A source kind of the program's own: ready when a stall is handed
    over, its dispatch runs the stall."""

    def __init__(self, app):
        super().__init__()
        self.app = app
        self.ready = []

    def prepare(self):
        return (bool(self.ready), -1)

    def check(self):
        return bool(self.ready)

    def dispatch(self, callback, data):
        start = now_ns()
        self.app.stall(self.ready.pop(0), start)
        return GLib.SOURCE_CONTINUE


class App:
    def __init__(self, args, stalls):
        self.args = args
        self.stalls = stalls
        self.loop = GLib.MainLoop()
        self.log = open(args.log, "w") if args.log else None
        self.ticks = 0
        self.stalls_done = 0
        self.reason = "duration"
        self.t0_ns = 0
        self.pid = os.getpid()
        self.tid = threading.get_native_id()
        self.pending = []
        self.pipe = None
        if args.source in ("io", "unix-fd"):
            self.pipe = os.pipe()
        self.custom = None
        if args.source == "custom":
            self.custom = CustomSource(self)
            self.custom.set_name("lt-custom")
            self.custom.attach(None)

    def write(self, record):
        if self.log:
            self.log.write(json.dumps(record) + "\n")
            self.log.flush()

    def tick(self):
        self.ticks += 1  # trivial work
        return GLib.SOURCE_CONTINUE

    def stall(self, index, start=None):
        if start is None:
            start = now_ns()
        kind, ms, at_ms = self.stalls[index]
        if self.args.late_timer:
            # A one-shot timeout due during the stall: GLib reads the clock
            # for its due time right after this read.
            added = now_ns()
            source = GLib.timeout_source_new(self.args.late_timer)
            added_by = now_ns()
            source.set_name("late-%d" % index)
            source.set_callback(self.late, (index, added, added_by))
            source.attach(None)
        pieces = 0
        stacks = [] if self.args.dump_stack else None
        if kind == "busy":
            busy_for(ms * 1000000, stacks)
        else:
            pieces = self.args.sleep_pieces
            for _ in range(pieces):
                time.sleep(ms / 1000.0 / pieces)
        end = now_ns()
        self.stalls_done += 1
        # Written after the loop ends: file I/O here would lengthen the
        # dispatch span beyond what the callback measured.
        self.pending.append({"event": "stall", "kind": kind,
                    "source": self.args.source, "requested_ms": ms,
                    "at_ms": at_ms, "index": index, "start_ns": start,
                    "end_ns": end, "duration_ns": end - start,
                    "pieces": pieces, "pid": self.pid, "tid": self.tid})
        if stacks:
            self.pending.append({"event": "stack", "index": index,
                                 "frames": stacks[0]})
        return GLib.SOURCE_REMOVE

    def late(self, data):
        index, added_ns, added_by_ns = data
        ms = self.args.late_timer * 1000000
        self.pending.append({"event": "late", "index": index,
                             "added_ns": added_ns,
                             "due_ns": added_ns + ms,
                             "due_by_ns": added_by_ns + ms,
                             "start_ns": now_ns(), "pid": self.pid,
                             "tid": self.tid})
        return GLib.SOURCE_REMOVE

    def hand_over(self, index):
        """The timeout at AT_MS: the stall runs in a source of --source."""
        if self.args.source == "idle":
            GLib.idle_add(self.stall, index)
        elif self.args.source == "custom":
            self.custom.ready.append(index)
        else:
            os.write(self.pipe[1], bytes([index]))
        return GLib.SOURCE_REMOVE

    def readable(self, *_):
        """An I/O watch or unix fd source: one byte, one stall."""
        start = now_ns()
        index = os.read(self.pipe[0], 1)[0]
        self.stall(index, start)
        return GLib.SOURCE_CONTINUE

    def nested(self, data):
        """--nested-loop: a nested main loop on the same context for MS (the
        stalls due meanwhile run inside it), as a modal dialog runs one."""
        ms, at_ms = data
        start = now_ns()
        inner = GLib.MainLoop()
        GLib.timeout_add(ms, lambda: inner.quit() or GLib.SOURCE_REMOVE)
        inner.run()
        self.pending.append({"event": "nested", "at_ms": at_ms,
                             "requested_ms": ms, "start_ns": start,
                             "end_ns": now_ns(), "pid": self.pid,
                             "tid": self.tid})
        return GLib.SOURCE_REMOVE

    def quit(self, reason):
        self.reason = reason
        self.loop.quit()
        return GLib.SOURCE_REMOVE

    def start(self):
        self.t0_ns = now_ns()
        self.write({"event": "start", "pid": self.pid, "tid": self.tid,
                    "t0_ns": self.t0_ns, "duration_ms": self.args.duration,
                    "kind": self.args.kind, "tick_ms": TICK_MS,
                    "source": self.args.source,
                    "stalls": [{"index": i, "kind": k, "requested_ms": ms,
                                "at_ms": at}
                               for i, (k, ms, at) in enumerate(self.stalls)]})
        GLib.timeout_add(TICK_MS, self.tick)
        if self.args.source == "io":
            channel = GLib.IOChannel.unix_new(self.pipe[0])
            GLib.io_add_watch(channel, GLib.PRIORITY_DEFAULT,
                              GLib.IOCondition.IN, self.readable)
        elif self.args.source == "unix-fd":
            GLib.unix_fd_add_full(GLib.PRIORITY_DEFAULT, self.pipe[0],
                                  GLib.IOCondition.IN, self.readable)
        first = self.stall if self.args.source == "timeout" else self.hand_over
        for i, (_, _, at_ms) in enumerate(self.stalls):
            if self.args.name_sources:
                # g_source_set_name: what looptrace's glib profile reads.
                source = GLib.timeout_source_new(at_ms)
                source.set_name("stall-%d" % i)
                source.set_callback(first, i)
                source.attach(None)
            else:
                GLib.timeout_add(at_ms, first, i)
        if self.args.nested_loop:
            ms, at_ms = self.args.nested_loop
            GLib.timeout_add(at_ms, self.nested, (ms, at_ms))
        GLib.timeout_add(self.args.duration, self.quit, "duration")
        return GLib.SOURCE_REMOVE

    def run(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            GLib.unix_signal_add(GLib.PRIORITY_HIGH, sig, self.quit, "signal")
        if self.args.start_delay > 0:
            GLib.timeout_add(self.args.start_delay, self.start)
        else:
            self.start()
        sys.stderr.write("glib_loop: ready pid=%d\n" % self.pid)
        sys.stderr.flush()
        self.loop.run()
        for record in self.pending:
            self.write(record)
        self.write({"event": "summary", "pid": self.pid, "tid": self.tid,
                    "reason": self.reason, "ticks": self.ticks,
                    "stalls": self.stalls_done,
                    "run_delay_ns": run_delay_ns()})
        if self.log:
            self.log.close()


def main():
    p = OneLineParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=int, default=5000,
                   help="run time in ms after the start (default 5000)")
    p.add_argument("--kind", choices=("sleep", "busy"), default="sleep",
                   help="how stalls block (default sleep)")
    p.add_argument("--stall", action="append", default=[],
                   metavar="[KIND:]MS@AT_MS",
                   help="a stall of MS ms due AT_MS ms after the start "
                        "(repeatable)")
    p.add_argument("--sleep-pieces", type=int, default=1, metavar="N",
                   help="a sleep stall is N sleeps of MS/N each (default 1)")
    p.add_argument("--source",
                   choices=("timeout", "idle", "io", "unix-fd", "custom"),
                   default="timeout",
                   help="the kind of GLib source a stall runs in "
                        "(default timeout)")
    p.add_argument("--late-timer", type=int, default=0, metavar="MS",
                   help="each stall adds a timeout of MS ms named "
                        "late-INDEX, due while it stalls")
    p.add_argument("--name-sources", action="store_true",
                   help="name each stall's timeout source stall-INDEX "
                        "(g_source_set_name)")
    p.add_argument("--start-delay", type=int, default=0,
                   help="ms before the scenario starts (default 0)")
    p.add_argument("--nested-loop", metavar="MS@AT_MS",
                   help="at AT_MS, a timeout runs a nested main loop for MS")
    p.add_argument("--dump-stack", action="store_true",
                   help="a busy stall logs its Python stack as the "
                        "interpreter sees it (traceback.extract_stack) as "
                        "it begins: a \"stack\" line")
    p.add_argument("--log", help="ground-truth log (JSON lines)")
    args = p.parse_args()
    if args.nested_loop:
        try:
            ms, at_ms = (int(x) for x in args.nested_loop.split("@"))
        except ValueError:
            p.error("--nested-loop %s: expected MS@AT_MS" % args.nested_loop)
        if ms <= 0 or at_ms < 0 or at_ms + ms >= args.duration:
            p.error("--nested-loop %s: must end before --duration %d" %
                    (args.nested_loop, args.duration))
        args.nested_loop = (ms, at_ms)
    if args.duration < 0 or args.start_delay < 0:
        p.error("--duration and --start-delay must be >= 0")
    if args.sleep_pieces < 1:
        p.error("--sleep-pieces must be >= 1")
    stalls = []
    for text in args.stall:
        try:
            kind, ms, at_ms = parse_stall(text, args.kind)
        except ValueError as e:
            p.error("--stall %s: %s" % (text, e))
        if at_ms >= args.duration:
            p.error("--stall %s: not before --duration %d" %
                    (text, args.duration))
        stalls.append((kind, ms, at_ms))
    try:
        App(args, stalls).run()
    except OSError as e:
        sys.stderr.write("glib_loop: error: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
