#!/usr/bin/python3
"""A Qt Quick window (Debian's PyQt5 or PyQt6 with QtQuick, --qt 5|6, under
Xvfb) animating, its GUI thread stalled now and then, for the Qt Quick
frames test.

The window (a QML Window loaded by QQmlApplicationEngine) holds a
rectangle that a NumberAnimation moves, looping forever once the run has
started, so the scene graph's render loop draws frames back to back until
just before the program exits; before the run the window is drawn once,
then idle (no frame while a tracer attaches). Under Xvfb with Mesa's
llvmpipe Qt picks the threaded render loop (frames on a render thread; Qt
5's not throttled, a few ms apart); QSG_RENDER_LOOP=basic forces the
single-threaded one (frames on the GUI thread). A Python QTimer on the
GUI thread ticks every --tick ms (not a QML Timer: that one runs on the
animation clock, fast in the threaded loop). Once the process gets
SIGUSR1 (with --no-wait: once it is ready) the run starts: the animation,
and every --stall-every th tick from then on is busy (a CPU loop, no
sleep) for --stall-ms, the first of them the --stall-every th tick of the
run; after --duration ms the stalls stop, --linger ms later the
animation, and the program quits 200 ms after that (once its render loop
is idle).

QQuickWindow::frameSwapped is connected with Qt.DirectConnection: the slot
runs on the thread that emits it (the render thread in the threaded loop,
the GUI thread in the basic one) and only stores the time and thread in
preallocated lists. With QSG_RENDER_TIMING=1 Qt itself writes a line per
frame on stderr (qt.scenegraph.time.renderloop: Qt 5's "Frame rendered
with 'threaded' renderloop in Nms, sync=..., render=..., swap=...", Qt 6's
"[render thread 0x...] syncAndRender: frame rendered in Nms, ...").

Ground truth (--log, JSON lines, CLOCK_MONOTONIC ns, written at exit):
  {"event":"swap","n","t_ns","tid"}   each frameSwapped, as its slot ran
  {"event":"stall","n","start_ns","end_ns","tick","tid"}   each busy tick
  {"event":"run","qt","pid","gui_tid","render_tids","render_loop",
   "qsg_render_loop","start_ns","end_ns","ticks","swaps","swaps_dropped"}
     render_loop: "threaded" when the swaps came on another thread than
     the GUI thread, else "basic"; start_ns the run's start (the animation
     started), end_ns the stalls' end; swaps_dropped the swaps past the
     preallocated lists (not logged)
Prints "qt_quick_frames: ready pid=N" to stderr once the first frame has
been swapped.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--qt", type=int, choices=(5, 6), default=5)
ap.add_argument("--duration", type=float, default=3000)
ap.add_argument("--stall-every", type=int, default=10)
ap.add_argument("--stall-ms", type=float, default=60)
ap.add_argument("--tick", type=float, default=50)
ap.add_argument("--linger", type=float, default=300)
ap.add_argument("--timeout", type=float, default=60000)
ap.add_argument("--no-wait", action="store_true")
ap.add_argument("--log", required=True)
args = ap.parse_args()

if args.qt == 6:
    from PyQt6.QtCore import Qt, QTimer
    from PyQt6.QtGui import QGuiApplication
    from PyQt6.QtQml import QQmlApplicationEngine
    from PyQt6.QtQuick import QQuickWindow
    QML = b"""
import QtQuick
Window {
    property bool animating: false
    width: 320; height: 240; visible: true
    title: "looptrace qt_quick_frames"
    color: "white"
    Rectangle {
        y: 80; width: 40; height: 80; color: "steelblue"
        NumberAnimation on x {
            from: 0; to: 280; duration: 1000; loops: Animation.Infinite
            running: animating
        }
    }
}
"""
else:
    from PyQt5.QtCore import Qt, QTimer
    from PyQt5.QtGui import QGuiApplication
    from PyQt5.QtQml import QQmlApplicationEngine
    from PyQt5.QtQuick import QQuickWindow
    QML = b"""
import QtQuick 2.15
import QtQuick.Window 2.15
Window {
    property bool animating: false
    width: 320; height: 240; visible: true
    title: "looptrace qt_quick_frames"
    color: "white"
    Rectangle {
        y: 80; width: 40; height: 80; color: "steelblue"
        NumberAnimation on x {
            from: 0; to: 280; duration: 1000; loops: Animation.Infinite
            running: animating
        }
    }
}
"""


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def busy(ms):
    end = now_ns() + int(ms * 1e6)
    while now_ns() < end:
        pass


# The render thread's slot takes the GIL: a short switch interval keeps it
# from waiting long behind the GUI thread's Python (a busy tick).
sys.setswitchinterval(0.0005)

pid = os.getpid()
gui_tid = threading.get_native_id()
# Room for 500 frames a second for the whole life of the program: the
# slot never allocates (no I/O, no list growth on the render thread).
capacity = int(500 * (args.timeout + args.duration + args.linger) / 1000)
swap_t = [0] * capacity
swap_tid = [0] * capacity
state = {"swaps": 0, "dropped": 0, "ticks": 0, "run_ticks": 0,
         "running": False, "done": False, "start_ns": 0, "end_ns": 0,
         "announced": False, "quitting": False}
stalls = []


def on_swapped():
    t = now_ns()
    n = state["swaps"]
    if n < capacity:
        swap_t[n] = t
        swap_tid[n] = threading.get_native_id()
        state["swaps"] = n + 1
    else:
        state["dropped"] += 1


def on_tick():
    state["ticks"] += 1
    if not state["announced"] and state["swaps"] > 0:
        state["announced"] = True
        sys.stderr.write("qt_quick_frames: ready pid=%d\n" % pid)
        sys.stderr.flush()
        if args.no_wait:
            start()
    if not state["running"]:
        return
    state["run_ticks"] += 1
    n = state["run_ticks"]
    if args.stall_every > 0 and n % args.stall_every == 0:
        start_ns = now_ns()
        busy(args.stall_ms)
        stalls.append({"event": "stall", "n": len(stalls) + 1,
                       "start_ns": start_ns, "end_ns": now_ns(), "tick": n,
                       "tid": threading.get_native_id()})


def stop():
    state["running"] = False
    state["done"] = True
    state["end_ns"] = now_ns()
    QTimer.singleShot(int(args.linger), finish)


def finish():
    # No frame may be in flight when the window goes: its slot, on the
    # render thread, would wait for the GIL, which the GUI thread holds
    # while, destroying the window, it waits for the render thread (a
    # deadlock, a few runs in a hundred). So the animation stops, the
    # render loop goes idle, and the slot is disconnected first.
    if state["quitting"]:
        return
    state["quitting"] = True
    window.setProperty("animating", False)
    QTimer.singleShot(200, quit_now)


def quit_now():
    window.frameSwapped.disconnect(on_swapped)
    app.quit()


def start():
    if state["running"] or state["done"]:
        return
    state["running"] = True
    state["start_ns"] = now_ns()
    window.setProperty("animating", True)
    QTimer.singleShot(int(args.duration), stop)


app = QGuiApplication(sys.argv)
engine = QQmlApplicationEngine()
engine.loadData(QML)
roots = engine.rootObjects()
if not roots or not isinstance(roots[0], QQuickWindow):
    sys.stderr.write("qt_quick_frames: the QML window did not load\n")
    sys.exit(1)
window = roots[0]
window.frameSwapped.connect(on_swapped, Qt.ConnectionType.DirectConnection)

ticker = QTimer()
ticker.setTimerType(Qt.TimerType.PreciseTimer)
ticker.timeout.connect(on_tick)
ticker.start(int(args.tick))

# SIGUSR1 starts the run. The handler runs when Python next runs on the GUI
# thread: the ticker's next timeout at the latest.
signal.signal(signal.SIGUSR1, lambda s, f: QTimer.singleShot(0, start))
QTimer.singleShot(int(args.timeout), finish)
app.exec()

n = state["swaps"]
tids = sorted({swap_tid[i] for i in range(n)})
render_loop = "threaded" if any(t != gui_tid for t in tids) else "basic"
with open(args.log, "w") as f:
    for i in range(n):
        f.write(json.dumps({"event": "swap", "n": i + 1, "t_ns": swap_t[i],
                            "tid": swap_tid[i]}) + "\n")
    for s in stalls:
        f.write(json.dumps(s) + "\n")
    f.write(json.dumps({
        "event": "run", "qt": args.qt, "pid": pid, "gui_tid": gui_tid,
        "render_tids": tids, "render_loop": render_loop,
        "qsg_render_loop": os.environ.get("QSG_RENDER_LOOP", ""),
        "start_ns": state["start_ns"], "end_ns": state["end_ns"],
        "ticks": state["ticks"], "swaps": n,
        "swaps_dropped": state["dropped"]}) + "\n")
# Qt's objects go in a fixed order: the engine (and its window) before the
# application.
del window, roots
del engine
