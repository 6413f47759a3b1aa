#!/usr/bin/env python3
"""Unrelated socket traffic for looptrace's input tests: a loopback UDP
flood and an AF_UNIX SOCK_SEQPACKET flood whose 104-byte payloads are not
InputMessages. Runs for argv[1] seconds, then prints how many messages each
carried as JSON."""
import json
import socket
import sys
import time

end = time.monotonic() + float(sys.argv[1])
udp_rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp_rx.bind(("127.0.0.1", 0))
udp_tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
junk = b"A" * 104
counts = {"udp": 0, "seqpacket": 0}
while time.monotonic() < end:
    for _ in range(100):
        udp_tx.sendto(junk, udp_rx.getsockname())
        udp_rx.recvfrom(2048)
        a.sendto(junk, 0, None) if False else a.send(junk)
        b.recv(2048)
        counts["udp"] += 1
        counts["seqpacket"] += 1
print(json.dumps(counts), flush=True)
