#!/usr/bin/python3
"""A GLib main loop whose callbacks wait on a lock another thread holds, for
looptrace's off-CPU tests (who woke a blocked dispatch).

Run with Debian's /usr/bin/python3 (python3-gi). A GLib.MainLoop on the main
thread runs a 2 ms periodic timeout that does trivial work, plus one-shot
lock-stall callbacks due at AT_MS after the start, and quits after
--duration. Thread "holder" (a Python thread) owns a threading.Lock on
request. A stall callback asks the holder to take the lock and release it MS
after the callback started, waits until the holder has it, then blocks in
lock.acquire() until the holder releases it (a futex wait in the main
thread, woken by the holder's release).

Ground truth (--log, JSON lines, CLOCK_MONOTONIC ns; stall lines are kept in
memory and written when the loop ends, so no file I/O lengthens a dispatch):
  {"event":"start","pid","tid","t0_ns","duration_ms","tick_ms",
   "holder_tid","stalls":[{"index","requested_ms","at_ms"}]}
  {"event":"stall","kind":"lock","requested_ms","at_ms","index","start_ns",
   "wait_ns","end_ns","duration_ns","release_ns","holder_tid","pid","tid"}
     start_ns/end_ns: first and last thing in the callback; wait_ns: just
     before the blocking lock.acquire(); release_ns: the holder's clock just
     before lock.release(); holder_tid: threading.get_native_id() of the
     holder thread (the waker)
  {"event":"summary","pid","tid","reason":"duration|signal","ticks","stalls",
   "run_delay_ns"}                  the loop thread's whole run-queue wait
                                    (/proc/thread-self/schedstat), -1 unknown

Usage:
  glib_lock.py [--duration MS] [--stall MS@AT_MS]... [--log FILE]
Prints "glib_lock: ready pid=N" to stderr at startup. Exit 0 at the end and
after SIGTERM/SIGINT, 2 on bad arguments (one line on stderr).
"""

import argparse
import json
import os
import signal
import sys
import threading
import time

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
        sys.stderr.write("glib_lock: error: %s\n" % message)
        sys.exit(2)


def parse_stall(text):
    """MS@AT_MS -> (ms, at_ms)."""
    if "@" not in text:
        raise ValueError("expected MS@AT_MS")
    ms_text, at_text = text.split("@", 1)
    ms, at_ms = int(ms_text), int(at_text)
    if ms <= 0 or at_ms < 0:
        raise ValueError("MS must be > 0 and AT_MS >= 0")
    return ms, at_ms


class Holder:
    """A thread that takes `lock` when asked and releases it at a given
    time, logging when it did."""

    def __init__(self):
        self.lock = threading.Lock()
        self.cv = threading.Condition()
        self.unlock_at_ns = None  # a request, while not yet taken
        self.held = 0  # requests whose lock is taken
        self.stop = False
        self.native_id = None
        self.releases = []  # release_ns per request, in order
        self.thread = threading.Thread(target=self.run, name="holder")

    def start(self):
        self.thread.start()
        with self.cv:
            self.cv.wait_for(lambda: self.native_id is not None)

    def run(self):
        with self.cv:
            self.native_id = threading.get_native_id()
            self.cv.notify_all()
        while True:
            with self.cv:
                self.cv.wait_for(
                    lambda: self.stop or self.unlock_at_ns is not None)
                if self.stop:
                    return
                unlock_at = self.unlock_at_ns
                self.unlock_at_ns = None
                self.lock.acquire()
                self.held += 1
                self.cv.notify_all()
            left = unlock_at - now_ns()
            if left > 0:
                time.sleep(left / 1e9)
            self.releases.append(now_ns())
            self.lock.release()

    def hold_until(self, unlock_at_ns):
        """Returns once the holder has the lock."""
        with self.cv:
            want = self.held + 1
            self.unlock_at_ns = unlock_at_ns
            self.cv.notify_all()
            self.cv.wait_for(lambda: self.held >= want)

    def shutdown(self):
        with self.cv:
            self.stop = True
            self.cv.notify_all()
        self.thread.join()


class App:
    def __init__(self, args, stalls):
        self.args = args
        self.stalls = stalls
        self.loop = GLib.MainLoop()
        self.log = open(args.log, "w") if args.log else None
        self.holder = Holder()
        self.ticks = 0
        self.stalls_done = 0
        self.reason = "duration"
        self.pid = os.getpid()
        self.tid = threading.get_native_id()
        self.pending = []

    def write(self, record):
        if self.log:
            self.log.write(json.dumps(record) + "\n")
            self.log.flush()

    def tick(self):
        self.ticks += 1  # trivial work
        return GLib.SOURCE_CONTINUE

    def stall(self, index):
        start = now_ns()
        ms, at_ms = self.stalls[index]
        self.holder.hold_until(start + ms * 1000000)
        wait = now_ns()
        self.holder.lock.acquire()  # blocks until the holder releases it
        self.holder.lock.release()
        end = now_ns()
        self.stalls_done += 1
        # Written after the loop ends: file I/O here would lengthen the
        # dispatch span beyond what the callback measured.
        self.pending.append({"event": "stall", "kind": "lock",
                             "requested_ms": ms, "at_ms": at_ms,
                             "index": index, "start_ns": start,
                             "wait_ns": wait, "end_ns": end,
                             "duration_ns": end - start,
                             "holder_tid": self.holder.native_id,
                             "pid": self.pid, "tid": self.tid})
        return GLib.SOURCE_REMOVE

    def quit(self, reason):
        self.reason = reason
        self.loop.quit()
        return GLib.SOURCE_REMOVE

    def run(self):
        self.holder.start()
        for sig in (signal.SIGTERM, signal.SIGINT):
            GLib.unix_signal_add(GLib.PRIORITY_HIGH, sig, self.quit, "signal")
        t0 = now_ns()
        self.write({"event": "start", "pid": self.pid, "tid": self.tid,
                    "t0_ns": t0, "duration_ms": self.args.duration,
                    "tick_ms": TICK_MS, "holder_tid": self.holder.native_id,
                    "stalls": [{"index": i, "requested_ms": ms, "at_ms": at}
                               for i, (ms, at) in enumerate(self.stalls)]})
        GLib.timeout_add(TICK_MS, self.tick)
        for i, (_, at_ms) in enumerate(self.stalls):
            GLib.timeout_add(at_ms, self.stall, i)
        GLib.timeout_add(self.args.duration, self.quit, "duration")
        sys.stderr.write("glib_lock: ready pid=%d\n" % self.pid)
        sys.stderr.flush()
        self.loop.run()
        self.holder.shutdown()
        # Stalls run one at a time, each waiting for its release: the
        # holder's releases are in the same order.
        for record, release in zip(self.pending, self.holder.releases):
            record["release_ns"] = release
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
    p.add_argument("--stall", action="append", default=[],
                   metavar="MS@AT_MS",
                   help="a lock stall of MS ms due AT_MS ms after the start "
                        "(repeatable)")
    p.add_argument("--log", help="ground-truth log (JSON lines)")
    args = p.parse_args()
    if args.duration < 0:
        p.error("--duration must be >= 0")
    stalls = []
    for text in args.stall:
        try:
            ms, at_ms = parse_stall(text)
        except ValueError as e:
            p.error("--stall %s: %s" % (text, e))
        if at_ms >= args.duration:
            p.error("--stall %s: not before --duration %d" %
                    (text, args.duration))
        stalls.append((ms, at_ms))
    try:
        App(args, stalls).run()
    except OSError as e:
        sys.stderr.write("glib_lock: error: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
