#!/usr/bin/python3
"""gguf_edit.py IN OUT EDIT [ARG...] - writes a damaged copy of a GGUF file
for the bad-input tests (t_gguf.sh). Edits:

  truncate BYTES          keep only the first BYTES bytes
  offset NAME OTHER       tensor NAME's offset := tensor OTHER's (overlap)
  offset_far NAME         tensor NAME's offset past the end of the file
  dim NAME VALUE [I]      tensor NAME's dimension I (default 0) := VALUE
  type NAME TYPE          tensor NAME's ggml type := TYPE (a number)
  rename NAME NEW         tensor NAME is called NEW (same length)
  string KEY VALUE        metadata string KEY := VALUE (same length)
  rename_key KEY NEW      metadata KEY is called NEW (same length)
  bool KEY 0|1            metadata bool KEY := the value
  token ID TEXT           tokenizer.ggml.tokens[ID] := TEXT (same length)
  add_f32 KEY VALUE       one more metadata key, an f32 (the header grows)
  add_str KEY VALUE       one more metadata key, a string (the header grows)
  kv_type KEY TYPE        metadata KEY's value type := TYPE, of the same size

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
    """{key: (value_offset, type)}, {tensor: {field: byte offset}}; KEYS_AT
    gets each key's name offset, and the ends of the metadata and of the
    tensor infos."""
    r = Reader(data)
    assert r.take("I") == 0x46554747, "not GGUF"
    r.take("I")
    nt, nkv = r.take("Q"), r.take("Q")
    kvs = {}
    for _ in range(nkv):
        key_at, key = r.string()
        KEYS_AT[key] = key_at
        t = r.take("I")
        kvs[key] = (r.p, t)
        skip_value(r, t)
    KEYS_AT["<end of metadata>"] = r.p
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
    KEYS_AT["<end of tensor infos>"] = r.p
    return kvs, tensors


KEYS_AT = {}


def add_kv(data, kvs, key, vtype, packed):
    """data with KEY := a value of VTYPE (its bytes PACKED) appended to the
    metadata; the data section moves to the next alignment boundary (tensor
    offsets are relative)."""
    align = 32
    if "general.alignment" in kvs:
        align = struct.unpack_from("<I", data, kvs["general.alignment"][0])[0]
    kv_end, infos_end = KEYS_AT["<end of metadata>"], KEYS_AT["<end of tensor infos>"]
    old_start = (infos_end + align - 1) // align * align
    k = key.encode()
    extra = struct.pack("<Q", len(k)) + k + struct.pack("<I", vtype) + packed
    head = bytearray(data[:kv_end]) + extra + data[kv_end:infos_end]
    struct.pack_into("<Q", head, 16, struct.unpack_from("<Q", data, 16)[0] + 1)
    head += bytes(-len(head) % align)
    return head + data[old_start:]


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
        index = int(args[2]) if len(args) > 2 else 0
        struct.pack_into("<Q", data, t[args[0]]["dims"] + 8 * index, int(args[1]))
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
    elif edit == "rename_key":
        new = args[1].encode()
        at = KEYS_AT[args[0]]
        assert len(new) == struct.unpack_from("<Q", data, at - 8)[0], "rename_key keeps the length"
        data[at:at + len(new)] = new
    elif edit == "bool":
        at, typ = kvs[args[0]]
        assert typ == 7
        data[at] = int(args[1])
    elif edit == "token":
        at, typ = kvs["tokenizer.ggml.tokens"]
        r = Reader(bytes(data))
        r.p = at + 12   # past the element type and the count
        for _ in range(int(args[0])):
            r.string()
        n = struct.unpack_from("<Q", data, r.p)[0]
        new = args[1].encode()
        assert len(new) == n, "token keeps the length"
        data[r.p + 8:r.p + 8 + n] = new
    elif edit == "add_f32":
        data = add_kv(data, kvs, args[0], 6, struct.pack("<f", float(args[1])))
    elif edit == "add_str":
        v = args[1].encode()
        data = add_kv(data, kvs, args[0], 8, struct.pack("<Q", len(v)) + v)
    elif edit == "kv_type":
        # a value's type, for one of the same size (uint32 to int32, ...)
        at, typ = kvs[args[0]]
        size = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
        assert size.get(typ) is not None and size.get(typ) == size.get(int(args[1])), \
            "kv_type keeps the value's size"
        struct.pack_into("<I", data, at - 4, int(args[1]))
    else:
        sys.exit("gguf_edit: unknown edit %s" % edit)
    open(dst, "wb").write(data)


if __name__ == "__main__":
    main()
