#!/usr/bin/env bash
# t_doc_examples.sh - every example in README.md and docs/ runs as written
# (issue 48). tests/helpers/doc_examples.py finds each indented block of
# commands, which must be marked `<!-- example: run -->` or `<!-- example:
# not run: REASON -->`, runs the runnable ones in a scratch directory and
# checks what they exit with and write (its header has the substitutions
# and the checks). This script starts the peers the examples name, with
# traffic for each while they run: our engine, llama-server, a Python HTTP
# server, a pyopencl program, a process that sleeps (nanosleep), and an
# OTLP receiver.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/serve_lib.sh"
source "$(dirname "$0")/opencl_lib.sh"
need_bpf
need_node
need_pyopencl
need_tracefs
for c in jq:jq curl:curl perf:linux-perf bpftrace:bpftrace clpeak:clpeak hashcat:hashcat readelf:binutils; do
	need_cmd "${c%%:*}" "${c#*:}"
done
[ -r "$DEMO_MODEL" ] || fail "no $DEMO_MODEL (make models)"
LLAMA=$ROOT/tests/llama
LIBLLAMA=$(ls "$LLAMA"/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libllama.v*.so 2>/dev/null | head -n 1)
[ -r "$LIBLLAMA" ] || fail "no node-llama-cpp (make deps)"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# the scratch directory the examples run in, as a user's checkout
WORK=$TMP/work
mkdir -p "$WORK" "$TMP/bin"
ln -s "$BUILD" "$WORK/build"
ln -s "$ROOT/tests" "$WORK/tests"
ln -s "$SPANTRACE" "$TMP/bin/spantrace"
"$MKMODEL" "$TMP/d15.gguf" --gguf f32 --from "$DEMO_MODEL" --vocab "$DEMO_TOK" >/dev/null ||
	fail "mkmodel gguf"

# the peers
start_engine "$DEMO_MODEL" -z "$DEMO_TOK" -b cpu --threads 1 --max-seqs 4
start_llama_server
python3 -m http.server --bind 127.0.0.1 0 --directory "$WORK" >"$TMP/py.log" 2>&1 &
pypid=$!
wait_for grep -q "Serving HTTP" "$TMP/py.log" || fail "python3 http.server did not start"
pyport=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$TMP/py.log" | head -n 1)
cat >"$TMP/cl_loop.py" <<'PY'
# an OpenCL program that keeps working: argv[1] iterations (default 40), or "forever"
import sys, time
import numpy as np
import pyopencl as cl
n = sys.argv[1] if len(sys.argv) > 1 else "40"
ctx = cl.Context(cl.get_platforms()[0].get_devices())
q = cl.CommandQueue(ctx)
prg = cl.Program(ctx, "__kernel void inc(__global float *x) { x[get_global_id(0)] += 1.0f; }").build()
host = np.zeros(1024, dtype=np.float32)
buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)
print("ready", flush=True)
i = 0
while n == "forever" or i < int(n):
    prg.inc(q, host.shape, None, buf)
    cl.enqueue_copy(q, host, buf)
    q.finish()
    time.sleep(0.05)
    i += 1
PY
/usr/bin/python3 "$TMP/cl_loop.py" forever >"$TMP/cl.log" 2>&1 &
clpid=$!
wait_for grep -q ready "$TMP/cl.log" || fail "the pyopencl program did not start: $(cat "$TMP/cl.log")"
"$BUILD/spans_example" 1000000 >/dev/null 2>&1 &
sleeper=$!
node "$ROOT/tests/node/otlp_receiver.js" "$TMP/otlp.recv" >"$TMP/otlp.log" 2>&1 &
wait_for grep -q listening "$TMP/otlp.log" || fail "OTLP receiver did not start: $(cat "$TMP/otlp.log")"
oport=$(awk '/listening/ {print $2; exit}' "$TMP/otlp.log")

# traffic for each server while the examples run (the doc's own infer
# server, on the port that replaces 8000, too), a loop each, so that one
# server gone or slow holds up no other
p8000=$(free_port)
for url in "$BASE" "http://127.0.0.1:$lport" "http://127.0.0.1:$p8000"; do
	while :; do
		curl -s -m 5 "$url/v1/completions" -H 'Content-Type: application/json' \
			-d '{"prompt":"Once upon","max_tokens":4,"stream":true}' >/dev/null
		sleep 0.3   # load: a streamed request every 0.3 s while the examples run
	done &
done
while :; do curl -s -m 5 -o /dev/null "http://127.0.0.1:$pyport/"; sleep 0.3; done &   # load, as above

# a daemon the docs start without --listen takes the variable (the flag would win)
export SPANTRACE_LISTEN=127.0.0.1:$(free_port)
export ROOT WORK EPID LPID=$lpid PYPID=$pypid CLPID=$clpid SLEEPER=$sleeper DEMO_MODEL GGUF=$TMP/d15.gguf \
	P8000=$p8000 P9464=$(free_port) OTLP_PORT=$oport LIBLLAMA \
	NODE_APP="node $LLAMA/generate.mjs $TMP/d15.gguf 256 8 31" PYOPENCL_SCRIPT=$TMP/cl_loop.py \
	PATH=$TMP/bin:$PATH
/usr/bin/python3 "$ROOT/tests/helpers/doc_examples.py" || fail "the docs' examples do not all run as written"
ok "every runnable example in README.md and docs/ ran as written"
kill "$lpid" "$pypid" "$clpid" "$sleeper" 2>/dev/null
stop_engine
