#!/usr/bin/env python3
"""hostile_nginx.py PORT CASE - byte paths and pipelining that must not
merge requests, against nginx (t_req_socket_hostile.sh). Prints one line.
  flood     100 GETs in one write (more than the tracer's queue of 64)
  big_next  GET of the 20 MiB file (sendfile) and a GET of k1.html in one write
  abort     GET of the 20 MiB file, 64 KiB read, then a reset
  half      half a request line, then a close"""
import socket
import struct
import sys

port, case = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port), timeout=20)


def get(path, close=False):
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n".encode()


def drain():
    data = b""
    while True:
        d = s.recv(1 << 20)
        if not d:
            return data
        data += d


if case == "flood":
    s.sendall(get("/k1.html") * 99 + get("/k1.html", close=True))
    print(f"flood: {drain().count(b'HTTP/1.1 200')} of 100 answered")
elif case == "big_next":
    s.sendall(get("/big.bin") + get("/k1.html", close=True))
    data = drain()
    print(f"big_next: {data.count(b'HTTP/1.1 200')} answered, {len(data)} bytes")
elif case == "abort":
    s.sendall(get("/big.bin"))
    got = 0
    while got < 65536:
        d = s.recv(65536)
        if not d:
            break
        got += len(d)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    print(f"abort: reset after {got} bytes")
elif case == "half":
    s.sendall(b"GET /k1.ht")
    s.close()
    print("half: closed after half a request line")
else:
    sys.exit(f"unknown case {case}")
