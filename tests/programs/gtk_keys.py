#!/usr/bin/python3
"""A GTK 3 window (Debian's python3-gi, under Xvfb) whose key handler
stalls on some keys, for key presses typed with xdotool.

The window's key-press-event handler logs every press; for the keys in
--stall-keys (key names, "b,c") it is busy for --stall-ms first. Its
key-release-event handler logs every release (never busy). A GLib
timeout every --tick ms does a little work too, so the loop runs other
sources between the keys. The key q quits (after --linger ms).

Ground truth (--log, JSON lines, CLOCK_MONOTONIC ns, written at exit):
  {"event":"key","key","start_ns","end_ns","stalled","time","pid","tid"}
     start_ns/end_ns at the handler's entry and return; time is the X
     server's timestamp of the event (ms)
  {"event":"key_release", the same fields} for each release
With --frames the window draws the name of the last key pressed (the
press handler queues a redraw) and logs its frame clock's paint cycles:
  {"event":"frame","start_ns","end_ns"} at before-paint and after-paint
and every key line gets "frame_end_ns": the end (after-paint) of the
first frame whose before-paint came after the handler's end, null if
none did.
Prints "gtk_keys: ready pid=N window=XID" to stderr once the window is
mapped (give it the focus: xdotool windowfocus --sync XID).
"""

import argparse
import json
import os
import sys
import threading
import time

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
from gi.repository import GLib, Gdk, Gtk  # noqa: E402


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


ap = argparse.ArgumentParser()
ap.add_argument("--stall-keys", default="")
ap.add_argument("--stall-ms", type=float, default=60)
ap.add_argument("--tick", type=float, default=50)
ap.add_argument("--linger", type=float, default=300)
ap.add_argument("--timeout", type=float, default=30000)
ap.add_argument("--frames", action="store_true")
ap.add_argument("--log", required=True)
args = ap.parse_args()

stall_keys = {k for k in args.stall_keys.split(",") if k}
lines = []
frames = []  # (before-paint, after-paint) of each paint cycle
shown = {"text": "", "painting": None}
area = None


def busy(ms):
    end = now_ns() + int(ms * 1e6)
    while now_ns() < end:
        pass


def on_key(widget, event):
    start = now_ns()
    name = Gdk.keyval_name(event.keyval)
    stalled = name in stall_keys
    if stalled:
        busy(args.stall_ms)
    lines.append({"event": "key", "key": name, "start_ns": start,
                  "end_ns": now_ns(), "stalled": stalled,
                  "time": event.time, "pid": os.getpid(),
                  "tid": threading.get_native_id()})
    if name == "q":
        GLib.timeout_add(int(args.linger), Gtk.main_quit)
    if area is not None:
        shown["text"] = name
        area.queue_draw()
    return True


def on_draw(widget, cr):
    cr.set_source_rgb(1, 1, 1)
    cr.paint()
    cr.set_source_rgb(0, 0, 0)
    cr.move_to(10, 50)
    cr.set_font_size(30)
    cr.show_text(shown["text"])
    return True


def on_before_paint(clock):
    shown["painting"] = now_ns()


def on_after_paint(clock):
    if shown["painting"] is not None:
        frames.append((shown["painting"], now_ns()))
    shown["painting"] = None


def on_release(widget, event):
    start = now_ns()
    lines.append({"event": "key_release",
                  "key": Gdk.keyval_name(event.keyval), "start_ns": start,
                  "end_ns": now_ns(), "stalled": False, "time": event.time,
                  "pid": os.getpid(), "tid": threading.get_native_id()})
    return True


def tick():
    busy(0.05)
    return True


announced = [False]


def on_map(widget, event):
    if not announced[0]:
        announced[0] = True
        xid = widget.get_window().get_xid()
        if args.frames:
            clock = widget.get_frame_clock()
            clock.connect("before-paint", on_before_paint)
            clock.connect("after-paint", on_after_paint)
        sys.stderr.write("gtk_keys: ready pid=%d window=%d\n"
                         % (os.getpid(), xid))
        sys.stderr.flush()
    return False


win = Gtk.Window(title="looptrace gtk_keys")
win.set_default_size(200, 100)
win.connect("key-press-event", on_key)
win.connect("key-release-event", on_release)
win.connect("map-event", on_map)
win.connect("destroy", Gtk.main_quit)
if args.frames:
    area = Gtk.DrawingArea()
    area.connect("draw", on_draw)
    win.add(area)
win.show_all()
win.present()
GLib.timeout_add(int(args.tick), tick)
GLib.timeout_add(int(args.timeout), Gtk.main_quit)
Gtk.main()
if args.frames:
    for line in lines:
        after = [f for f in frames if f[0] >= line["end_ns"]]
        line["frame_end_ns"] = min(after)[1] if after else None
    lines += [{"event": "frame", "start_ns": b, "end_ns": e}
              for b, e in frames]
with open(args.log, "w") as f:
    for line in lines:
        f.write(json.dumps(line) + "\n")
