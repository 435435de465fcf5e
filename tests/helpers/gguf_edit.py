#!/usr/bin/python3
"""gguf_edit.py IN OUT EDIT [ARG...] - writes a damaged copy of a GGUF file
for the bad-input tests (t_gguf.sh). Edits:

  truncate BYTES          keep only the first BYTES bytes
  offset NAME OTHER       tensor NAME's offset := tensor OTHER's (overlap)
  offset_far NAME         tensor NAME's offset past the end of the file
  dim NAME VALUE          tensor NAME's first dimension := VALUE
  type NAME TYPE          tensor NAME's ggml type := TYPE (a number)
  rename NAME NEW         tensor NAME is called NEW (same length)
  string KEY VALUE        metadata string KEY := VALUE (same length)

The header is parsed here independently of the engine's reader."""
import struct
import sys


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.d, self.p)
        self.p += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("Q")
        at = self.p
        self.p += n
        return at, self.d[at:at + n].decode("utf-8", "replace")


SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "B", 10: "Q", 11: "q", 12: "d"}


def skip_value(r, t):
    if t == 8:
        r.string()
    elif t == 9:
        et, n = r.take("I"), r.take("Q")
        for _ in range(n):
            skip_value(r, et)
    else:
        r.take(SCALAR[t])


def parse(data):
    """{key: (value_offset, type)}, {tensor: {field: byte offset}}"""
    r = Reader(data)
    assert r.take("I") == 0x46554747, "not GGUF"
    r.take("I")
    nt, nkv = r.take("Q"), r.take("Q")
    kvs = {}
    for _ in range(nkv):
        _, key = r.string()
        t = r.take("I")
        kvs[key] = (r.p, t)
        skip_value(r, t)
    tensors = {}
    for _ in range(nt):
        name_at, name = r.string()
        nd = r.take("I")
        dims_at = r.p
        r.take("%dQ" % nd)
        type_at = r.p
        r.take("I")
        off_at = r.p
        off = r.take("Q")
        tensors[name] = {"name": name_at, "dims": dims_at, "type": type_at, "offset": off_at, "value": off}
    return kvs, tensors


def main():
    src, dst, edit, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    data = bytearray(open(src, "rb").read())
    kvs, t = parse(bytes(data))
    if edit == "truncate":
        data = data[:int(args[0])]
    elif edit == "offset":
        struct.pack_into("<Q", data, t[args[0]]["offset"], t[args[1]]["value"])
    elif edit == "offset_far":
        struct.pack_into("<Q", data, t[args[0]]["offset"], len(data) * 4 // 32 * 32)
    elif edit == "dim":
        struct.pack_into("<Q", data, t[args[0]]["dims"], int(args[1]))
    elif edit == "type":
        struct.pack_into("<I", data, t[args[0]]["type"], int(args[1]))
    elif edit == "rename":
        new = args[1].encode()
        assert len(new) == len(args[0].encode()), "rename keeps the length"
        data[t[args[0]]["name"]:t[args[0]]["name"] + len(new)] = new
    elif edit == "string":
        at, typ = kvs[args[0]]
        assert typ == 8
        n = struct.unpack_from("<Q", data, at)[0]
        new = args[1].encode()
        assert len(new) == n, "string keeps the length"
        data[at + 8:at + 8 + n] = new
    else:
        sys.exit("gguf_edit: unknown edit %s" % edit)
    open(dst, "wb").write(data)


if __name__ == "__main__":
    main()
