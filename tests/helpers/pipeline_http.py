#!/usr/bin/env python3
"""pipeline_http.py PORT N PATH [TAIL] - HTTP/1.1 pipelining as a client
does it: N GETs of PATH in one write on one connection (the last asks to
close), then TAIL (raw bytes, e.g. garbage) if given; prints how many
responses came back before the server closed."""
import socket
import sys

port, n, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
tail = sys.argv[4].encode() if len(sys.argv) > 4 else b""
one = f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
last = f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(one * (n - 1) + (one + tail if tail else last))
data = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
print(data.count(b"HTTP/1.1 "))
