#!/usr/bin/python3
"""A GLib main loop that reads input from a unix stream socket, the way an
X11 or Wayland client does: no FINISHED replies, so looptrace's raw-channel
mode takes consumption to be the end of the dispatch that read the bytes.

A server thread listens on --socket PATH; the loop's client socket is
connected to it and watched with GLib.io_add_watch. After --start-delay the
server writes --events messages of 32 bytes (the index, then the text
SECRET-KEYSTROKE, standing for what a user typed), --interval ms apart; the watch
callback reads each with sock.recv and, for the index given by --stall-at,
sleeps --stall-ms before returning.

Ground truth (--log, JSON lines, CLOCK_MONOTONIC ns, written at exit):
  {"event":"read","index","received_ns","end_ns","pid","tid"}
     received_ns right after recv returns, end_ns just before the callback
     returns
Prints "glib_input: ready pid=N" to stderr at startup.
"""

import argparse
import json
import os
import socket
import sys
import threading
import time

import gi

gi.require_version("GLib", "2.0")
from gi.repository import GLib  # noqa: E402


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


ap = argparse.ArgumentParser()
ap.add_argument("--socket", required=True)
ap.add_argument("--events", type=int, default=10)
ap.add_argument("--interval", type=float, default=50)
ap.add_argument("--start-delay", type=float, default=1500)
ap.add_argument("--stall-at", type=int, default=-1)
ap.add_argument("--stall-ms", type=float, default=100)
ap.add_argument("--log", required=True)
args = ap.parse_args()

server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(args.socket)
server.listen(1)
client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
client.connect(args.socket)
conn, _ = server.accept()
lines = []
loop = GLib.MainLoop()
seen = [0]


def serve():
    time.sleep(args.start_delay / 1000)
    for i in range(args.events):
        # Its index, then bytes that stand for what a user typed: they
        # must never reach looptrace's outputs.
        conn.sendall(bytes([i]) + (b"SECRET-KEYSTROKE" * 2)[:31])
        time.sleep(args.interval / 1000)
    time.sleep(0.3)
    GLib.idle_add(loop.quit)


def on_input(source, condition):
    data = client.recv(4096)
    received = now_ns()
    index = data[0] if data else -1
    if index == args.stall_at:
        time.sleep(args.stall_ms / 1000)
    lines.append({"event": "read", "index": index, "bytes": len(data),
                  "received_ns": received, "end_ns": now_ns(),
                  "pid": os.getpid(), "tid": threading.get_native_id()})
    seen[0] += 1
    return True


GLib.io_add_watch(client.fileno(), GLib.IO_IN, on_input)
sys.stderr.write("glib_input: ready pid=%d\n" % os.getpid())
sys.stderr.flush()
threading.Thread(target=serve, daemon=True).start()
loop.run()
with open(args.log, "w") as f:
    for line in lines:
        f.write(json.dumps(line) + "\n")
