#!/usr/bin/python3
"""hostile_http.py PORT CASE - hostile traffic for an HTTP server on
127.0.0.1:PORT (t_req_socket_hostile.sh). Bounded in count and time; prints
one line saying what it did.

CASE:
  garbage   binary bytes, then close
  ssh       another protocol's greeting
  tls       a TLS ClientHello's first bytes
  badline   a malformed request line
  slow      a request sent a byte every 0.1 s (about 4 s in all)
  storm N   N connections opened and dropped: a third close at once, a
            third send half a request line and close, a third reset (RST)
  hold N S  N connections, each with half a request line, held S seconds, then closed
  reset     a streaming completion, reset after its first event
  huge      a 1.5 MiB body (over the server's 1 MiB limit)
"""
import socket
import struct
import sys
import time

HOST = "127.0.0.1"


def conn(port, timeout=10):
    s = socket.create_connection((HOST, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def rst_close(s):
    """Close with RST: SO_LINGER on, timeout 0."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def read_some(s):
    try:
        return s.recv(65536)
    except OSError:
        return b""


def main():
    port, case = int(sys.argv[1]), sys.argv[2]
    if case in ("garbage", "ssh", "tls", "badline"):
        payload = {
            "garbage": bytes(range(256)) * 4,
            "ssh": b"SSH-2.0-OpenSSH_9.2\r\n",
            "tls": bytes.fromhex("16030100a5010000a10303") + b"\x00" * 32,
            "badline": b"GET\r\n\r\n",
        }[case]
        s = conn(port)
        s.sendall(payload)
        s.settimeout(2)
        got = read_some(s)
        s.close()
        print(f"{case}: sent {len(payload)} bytes, got {len(got)} back")
    elif case == "slow":
        s = conn(port)
        req = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
        for b in req:
            s.send(bytes([b]))
            time.sleep(0.1)
        s.settimeout(5)
        got = read_some(s)
        s.close()
        print(f"slow: {len(req)} bytes one by one, got {got[:12]!r}")
    elif case == "storm":
        n = int(sys.argv[3])
        t0 = time.time()
        for i in range(n):
            s = conn(port)
            if i % 3 == 1:
                s.send(b"GET /hea")
                s.close()
            elif i % 3 == 2:
                rst_close(s)
            else:
                s.close()
        print(f"storm: {n} connections in {time.time() - t0:.1f} s")
    elif case == "hold":
        n, secs = int(sys.argv[3]), float(sys.argv[4])
        held = [conn(port) for _ in range(n)]
        for s in held:
            s.send(b"GET /hea")
        time.sleep(secs)
        for s in held:
            s.close()
        print(f"hold: {n} connections held {secs:.0f} s")
    elif case == "reset":
        body = b'{"prompt":"Once upon a time","max_tokens":200,"stream":true}'
        s = conn(port)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        seen = b""
        while b"data:" not in seen:
            chunk = s.recv(4096)
            if not chunk:
                break
            seen += chunk
        rst_close(s)
        print(f"reset: after {len(seen)} bytes")
    elif case == "huge":
        body = b"x" * (1536 * 1024)
        s = conn(port)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body))
        try:
            s.sendall(body)
        except OSError:
            pass   # the server may answer 413 and close before the body is in
        s.settimeout(5)
        got = read_some(s)
        s.close()
        print(f"huge: got {got[:12]!r}")
    else:
        sys.exit(f"unknown case {case}")


if __name__ == "__main__":
    main()
