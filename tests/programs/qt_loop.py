#!/usr/bin/python3
"""A Qt 5 or Qt 6 event loop (Debian's PyQt5 or PyQt6, --qt 5|6,
QT_QPA_PLATFORM=offscreen) with timers and posted events on a QObject
subclass, some of whose handlers stall.

A Worker(QObject) gets a timer event every --interval ms (startTimer) and a
posted event (QEvent type 1001) every --interval ms, shifted by half an
interval, for --duration ms after --start-delay ms. The handlers of the
timer events numbered in --stall-timers and of the posted events numbered
in --stall-posted stall: busy for --stall-ms, then, from inside the handler,
send (QCoreApplication.sendEvent) an event of type 1002 to the same worker,
whose handler sleeps --nested-ms: a nested notification, part of the
outer event.

Ground truth (--log, JSON lines, CLOCK_MONOTONIC ns, written at exit):
  {"event":"handled","kind":"timer"|"posted","index","type","start_ns",
   "end_ns","stalled","pid","tid"}   every outer event handled
  {"event":"nested","type":1002,"start_ns","end_ns","tid"}
Prints "qt_loop: ready pid=N" to stderr once the loop runs.
"""

import argparse
import json
import os
import sys
import threading
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


ap = argparse.ArgumentParser()
ap.add_argument("--interval", type=float, default=40)
ap.add_argument("--duration", type=float, default=1500)
ap.add_argument("--start-delay", type=float, default=1500)
ap.add_argument("--stall-timers", default="")
ap.add_argument("--stall-posted", default="")
ap.add_argument("--stall-ms", type=float, default=60)
ap.add_argument("--nested-ms", type=float, default=25)
ap.add_argument("--log", required=True)
ap.add_argument("--qt", type=int, choices=(5, 6), default=5)
args = ap.parse_args()

if args.qt == 6:
    from PyQt6.QtCore import QCoreApplication, QEvent, QObject, QTimer
else:
    from PyQt5.QtCore import QCoreApplication, QEvent, QObject, QTimer


def event_type(n):
    """QEvent.Type n: PyQt6 takes and gives enum members, PyQt5 ints."""
    return QEvent.Type(n)


def type_number(t):
    return t.value if hasattr(t, "value") else int(t)


POSTED = 1001
NESTED = 1002
stall_timers = {int(x) for x in args.stall_timers.split(",") if x}
stall_posted = {int(x) for x in args.stall_posted.split(",") if x}
lines = []


def busy(ms):
    end = now_ns() + int(ms * 1e6)
    while now_ns() < end:
        pass


class Worker(QObject):
    def __init__(self):
        super().__init__()
        self.timers = 0
        self.posted = 0
        self.timer_id = 0

    def stall(self):
        busy(args.stall_ms)
        QCoreApplication.sendEvent(self, QEvent(event_type(NESTED)))

    def handled(self, kind, index, etype, start, stalled):
        lines.append({"event": "handled", "kind": kind, "index": index,
                      "type": etype, "start_ns": start, "end_ns": now_ns(),
                      "stalled": stalled, "pid": os.getpid(),
                      "tid": threading.get_native_id()})

    def timerEvent(self, e):
        start = now_ns()
        self.timers += 1
        stalled = self.timers in stall_timers
        if stalled:
            self.stall()
        self.handled("timer", self.timers, type_number(QEvent.Type.Timer),
                     start, stalled)

    def event(self, e):
        t = type_number(e.type())
        if t == NESTED:
            start = now_ns()
            time.sleep(args.nested_ms / 1000)
            lines.append({"event": "nested", "type": NESTED, "start_ns": start,
                          "end_ns": now_ns(),
                          "tid": threading.get_native_id()})
            return True
        if t == POSTED:
            start = now_ns()
            self.posted += 1
            stalled = self.posted in stall_posted
            if stalled:
                self.stall()
            self.handled("posted", self.posted, POSTED, start, stalled)
            return True
        return super().event(e)


app = QCoreApplication(sys.argv)
worker = Worker()


def post():
    QCoreApplication.postEvent(worker, QEvent(event_type(POSTED)))


def begin():
    worker.timer_id = worker.startTimer(int(args.interval))
    QTimer.singleShot(int(args.interval / 2), start_posting)
    QTimer.singleShot(int(args.duration), finish)


poster = QTimer()
poster.timeout.connect(post)


def start_posting():
    poster.start(int(args.interval))


def finish():
    worker.killTimer(worker.timer_id)
    poster.stop()
    QTimer.singleShot(200, app.quit)


def ready():
    sys.stderr.write("qt_loop: ready pid=%d\n" % os.getpid())
    sys.stderr.flush()


QTimer.singleShot(0, ready)
QTimer.singleShot(int(args.start_delay), begin)
app.exec()
with open(args.log, "w") as f:
    for line in lines:
        f.write(json.dumps(line) + "\n")
