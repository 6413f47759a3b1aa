#!/usr/bin/python3
"""A GTK 3 or GTK 4 window (Debian's python3-gi, under Xvfb) animating
with a tick callback, some of its draws stalled, for the frame tests.

The window holds a drawing area; once the process gets SIGUSR1 a tick
callback (widget.add_tick_callback) queues a redraw on every frame-clock
tick for --duration ms, then stops, and the program quits --linger ms
later. Every --stall-every th draw is busy for --stall-ms (the first of
them the --stall-every th draw after the start). --gtk 4 uses GTK 4
(gir1.2-gtk-4.0: Gtk.DrawingArea.set_draw_func); the frame clock has the
same signals in both.

Ground truth (--log, JSON lines, CLOCK_MONOTONIC ns, written at exit):
  {"event":"frame","counter","start_ns","end_ns","frame_time_us",
   "refresh_us","presentation_us","animating","pid","tid"}
     one per paint cycle of the window's frame clock: start_ns at its
     before-paint signal, end_ns at its after-paint signal; counter is the
     clock's frame counter, frame_time_us its frame time (g_get_monotonic_time,
     us), refresh_us/presentation_us what get_refresh_info gives for it,
     runq_start_ns/runq_end_ns the thread's run-queue wait so far (its
     schedstat, read just after start_ns and end_ns)
  {"event":"draw","n","counter","start_ns","end_ns","stall_ms","pid","tid"}
     each draw: the handler's entry and return, n counted from the start of
     the animation (0 before it), stall_ms how long it was busy on purpose
  {"event":"animation","start_ns","end_ns"} when the ticks began and ended
Prints "gtk_frames: ready pid=N" to stderr once the window is mapped.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time

import gi

ap = argparse.ArgumentParser()
ap.add_argument("--gtk", type=int, choices=(3, 4), default=3)
ap.add_argument("--duration", type=float, default=3000)
ap.add_argument("--stall-ms", type=float, default=50)
ap.add_argument("--stall-every", type=int, default=40)
ap.add_argument("--linger", type=float, default=300)
ap.add_argument("--timeout", type=float, default=60000)
ap.add_argument("--log", required=True)
args = ap.parse_args()

gi.require_version("Gtk", "%d.0" % args.gtk)
from gi.repository import GLib, Gtk  # noqa: E402

if args.gtk == 4:
    Gtk.init()


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def busy(ms):
    end = now_ns() + int(ms * 1e6)
    while now_ns() < end:
        pass


pid = os.getpid()
lines = []
state = {"animating": False, "draws": 0, "frame": None, "tick": None,
         "anim_start": 0, "anim_end": 0, "announced": False, "clock": None}
loop = GLib.MainLoop()


def run_delay_ns():
    # The kernel's schedstat of this thread: ns spent runnable, waiting
    # for a CPU (the second field).
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1])


def on_before_paint(clock):
    start = now_ns()
    state["frame"] = {"event": "frame", "counter": clock.get_frame_counter(),
                      "start_ns": start, "runq_start_ns": run_delay_ns(),
                      "animating": state["animating"],
                      "pid": pid, "tid": threading.get_native_id()}


def on_after_paint(clock):
    end = now_ns()
    f = state["frame"]
    state["frame"] = None
    if f is None:
        return
    f["end_ns"] = end
    f["runq_end_ns"] = run_delay_ns()
    f["frame_time_us"] = clock.get_frame_time()
    refresh = clock.get_refresh_info(f["frame_time_us"])
    f["refresh_us"] = refresh[0]
    f["presentation_us"] = refresh[1]
    lines.append(f)


def draw(cr, width, height):
    start = now_ns()
    stall = 0.0
    n = 0
    if state["animating"]:
        state["draws"] += 1
        n = state["draws"]
        if args.stall_every > 0 and n % args.stall_every == 0:
            stall = args.stall_ms
            busy(stall)
    # Something that moves: a bar across the area.
    x = (state["draws"] * 4) % max(width, 1)
    cr.set_source_rgb(1, 1, 1)
    cr.paint()
    cr.set_source_rgb(0.2, 0.3, 0.8)
    cr.rectangle(x, 0, 20, height)
    cr.fill()
    clock = state["clock"]
    lines.append({"event": "draw", "n": n,
                  "counter": clock.get_frame_counter() if clock else -1,
                  "start_ns": start, "end_ns": now_ns(), "stall_ms": stall,
                  "pid": pid, "tid": threading.get_native_id()})


def on_tick(widget, clock):
    if not state["animating"]:
        return False
    widget.queue_draw()
    return True


def stop():
    state["animating"] = False
    state["anim_end"] = now_ns()
    GLib.timeout_add(int(args.linger), loop.quit)
    return False


def start():
    if not state["animating"] and not state["anim_start"]:
        state["animating"] = True
        state["anim_start"] = now_ns()
        area.add_tick_callback(on_tick)
        GLib.timeout_add(int(args.duration), stop)
    return True


def on_mapped(widget):
    if state["announced"]:
        return
    state["announced"] = True
    clock = widget.get_frame_clock()
    state["clock"] = clock
    clock.connect("before-paint", on_before_paint)
    clock.connect("after-paint", on_after_paint)
    sys.stderr.write("gtk_frames: ready pid=%d\n" % pid)
    sys.stderr.flush()


if args.gtk == 3:
    win = Gtk.Window(title="looptrace gtk_frames")
    area = Gtk.DrawingArea()
    area.connect("draw", lambda w, cr: draw(cr, w.get_allocated_width(),
                                            w.get_allocated_height()) or True)
    win.add(area)
    win.set_default_size(200, 100)
    win.connect("map-event", lambda w, e: on_mapped(w) or False)
    win.connect("destroy", lambda w: loop.quit())
    win.show_all()
    win.present()
else:
    win = Gtk.Window(title="looptrace gtk_frames")
    area = Gtk.DrawingArea()
    area.set_draw_func(lambda a, cr, w, h: draw(cr, w, h))
    area.set_content_width(200)
    area.set_content_height(100)
    win.set_child(area)
    # The frame clock exists once the surface does (after map).
    win.connect("map", lambda w: GLib.idle_add(lambda: on_mapped(w)))
    win.connect("close-request", lambda w: loop.quit() or False)
    win.present()

GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR1, start)
GLib.timeout_add(int(args.timeout), loop.quit)
loop.run()
lines.append({"event": "animation", "start_ns": state["anim_start"],
              "end_ns": state["anim_end"]})
with open(args.log, "w") as f:
    for line in lines:
        f.write(json.dumps(line) + "\n")
