#!/usr/bin/env python3
"""Prints the first of N consecutive loopback ports free now (N from argv, default 3), for the
perf scripts to start a launcher and its processes on."""
import random
import socket
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
while True:
    p = random.randint(20000, 30000)
    socks = []
    try:
        for q in range(p, p + n):
            s = socket.socket()
            s.bind(("127.0.0.1", q))
            socks.append(s)
        print(p)
        break
    except OSError:
        pass
    finally:
        for s in socks:
            s.close()
