#!/usr/bin/python3
"""probestate.py PID LIB - what the kernel has done to LIB's USDT probes in
process PID, one line per probe site: "NAME SEMAPHORE SITE_BYTES".

SEMAPHORE is the 2-byte counter the kernel bumps for every attached uprobe
that names it (0 = nobody attached); SITE_BYTES are the 5 bytes at the probe
address in hex: the original nop (0f1f440000) when nothing is attached, an
int3 (cc...) or a call into the uprobe trampoline (e8...) while attached.

Addresses are link-time vaddrs from LIB's stapsdt notes (readelf -n); at
run time they sit at load base + (vaddr - vaddr of the first PT_LOAD), the
load base being the start of LIB's mapping at file offset 0 in
/proc/PID/maps. Needs root (reads /proc/PID/mem)."""
import os
import re
import struct
import subprocess
import sys


def readelf(*args):
    return subprocess.run(["readelf", *args], check=True, capture_output=True, text=True).stdout


def probe_notes(lib):
    """[(name, location, semaphore)] from the stapsdt notes."""
    found, name = [], None
    for line in readelf("-nW", lib).splitlines():
        m = re.match(r"\s*Name: (\S+)", line)
        if m:
            name = m.group(1)
        m = re.search(r"Location: (0x[0-9a-f]+), Base: 0x[0-9a-f]+, Semaphore: (0x[0-9a-f]+)", line)
        if m and name:
            found.append((name, int(m.group(1), 16), int(m.group(2), 16)))
    return found


def first_load_vaddr(lib):
    for line in readelf("-lW", lib).splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            return int(f[2], 16)
    raise SystemExit("%s: no PT_LOAD segment" % lib)


def load_base(pid, lib):
    real = os.path.realpath(lib)
    with open("/proc/%d/maps" % pid) as maps:
        for line in maps:
            f = line.split(None, 5)
            if len(f) == 6 and f[5].strip() == real and int(f[2], 16) == 0:
                return int(f[0].split("-")[0], 16)
    raise SystemExit("%s is not mapped in process %d" % (real, pid))


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: probestate.py PID LIB")
    pid, lib = int(sys.argv[1]), sys.argv[2]
    notes = probe_notes(lib)
    if not notes:
        raise SystemExit("%s: no USDT probes" % lib)
    base = load_base(pid, lib) - first_load_vaddr(lib)
    with open("/proc/%d/mem" % pid, "rb") as mem:
        for name, loc, sem in notes:
            value = 0
            if sem:
                mem.seek(base + sem)
                value = struct.unpack("<H", mem.read(2))[0]
            mem.seek(base + loc)
            print(name, value, mem.read(5).hex())


main()
