#!/usr/bin/python3
# cl_pyopencl.py - a small pyopencl program (Debian's python3-pyopencl, not
# our engine) for t_opencl_pyopencl.sh: it sets OpenCL up, prints "ready",
# waits until the file argv[1] exists (the tracer has attached by pid), then
# builds, enqueues, reads back, waits and frees, and prints as JSON what it
# did and the device time it read itself from its profiling events. With a
# third argument it then waits until that file exists before exiting.
import json, os, sys, time
import numpy as np
import pyopencl as cl

go, iters = sys.argv[1], int(sys.argv[2])
ctx = cl.Context(cl.get_platforms()[0].get_devices())
q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
n = 4096
host = np.arange(n, dtype=np.float32)
print("ready", os.getpid(), flush=True)
while not os.path.exists(go):
    time.sleep(0.02)

src = """
__kernel void scale(__global float *x, float a) { x[get_global_id(0)] *= a; }
__kernel void add_one(__global float *x) { x[get_global_id(0)] += 1.0f; }
"""
prg = cl.Program(ctx, src).build()
scale, add_one = cl.Kernel(prg, "scale"), cl.Kernel(prg, "add_one")
buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, host.nbytes)
cl.enqueue_copy(q, buf, host)                       # blocking write
out = np.empty_like(host)
device_ns = 0
for i in range(iters):
    scale.set_args(buf, np.float32(1.0))
    ev = cl.enqueue_nd_range_kernel(q, scale, (n,), (64,))
    add_one.set_args(buf)
    cl.enqueue_nd_range_kernel(q, add_one, (n,), None)
    ev.wait()
    p = ev.profile
    _ = (p.queued, p.submit)
    device_ns += p.end - p.start
    cl.enqueue_copy(q, out, buf)                    # blocking read
    tmp = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 1024 * (i + 1))
    tmp.release()
q.finish()
buf.release()
print(json.dumps({"iters": iters, "device_ns": device_ns, "last": float(out[1])}), flush=True)
while len(sys.argv) > 3 and not os.path.exists(sys.argv[3]):
    time.sleep(0.02)
