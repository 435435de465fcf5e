# shellcheck shell=bash
# tests/helpers/fault_lib.sh - sourced after tests/lib.sh by the t_fault_*,
# t_load_* and t_security_* scripts: the demo model, a `--serve` engine fed
# through a fifo, the probestorm load generator, JSONL and semaphore checks.
HELPERS=$ROOT/tests/helpers
LIBINFER=$(cd "$BUILD" && pwd)/libinfer.so

need_binaries() {
	local b
	for b in "$INFER" "$SPANTRACE"; do [ -x "$b" ] || fail "no $b (build first)"; done
	need_cmd jq jq
}

ensure_demo_model() {
	[ -r "$DEMO_MODEL" ] && return 0
	mkdir -p "$(dirname "$DEMO_MODEL")"
	"$MKMODEL" "$DEMO_MODEL" --shape stories15M --seed 1 --tokenizer "$DEMO_TOK" >/dev/null ||
		fail "cannot make $DEMO_MODEL"
}

# build_helper NAME: compiles tests/helpers/NAME.c against this build's
# libinfer.so into $TMP/NAME.
build_helper() {
	need_cmd gcc build-essential
	local san=
	# A sanitizer build of libinfer needs the ASan runtime loaded first.
	ldd "$LIBINFER" | grep -q libasan && san="-fsanitize=address,undefined"
	gcc -O2 -std=gnu11 -Wall -Wextra -D_GNU_SOURCE $san -I"$ROOT/include" -I"$ROOT/inference" "$HELPERS/$1.c" \
		-L"$BUILD" -linfer -Wl,-rpath,"$(dirname "$LIBINFER")" -o "$TMP/$1" ||
		fail "cannot compile $1"
}
build_probestorm() { build_helper probestorm; }

# jsonl_check FILE: FILE has at least one line, and every line is one whole
# JSON object (a torn last line fails too); prints the number of lines.
jsonl_check() {
	[ -r "$1" ] || fail "$1: no such file to check"
	/usr/bin/python3 - "$1" <<'PY' || fail "$1 is not clean JSONL"
import json, sys
data = open(sys.argv[1], "rb").read()
if not data:
    sys.exit("empty: no record at all")
if not data.endswith(b"\n"):
    sys.exit("last line is not terminated (partial write)")
lines = data.split(b"\n")[:-1]
for i, line in enumerate(lines, 1):
    try:
        if not isinstance(json.loads(line), dict):
            sys.exit("line %d is not an object" % i)
    except ValueError as e:
        sys.exit("line %d: %s: %r" % (i, e, line[:120]))
print(len(lines))
PY
}

# start_server [ARGS...]: `infer --serve` on the demo model reading the fifo
# $TMP/in through fd 3, replies in $TMP/out; sets SRV once the engine has
# mapped libinfer.so (the background shell opens the fifo before it execs
# infer, so a tracer given -p at once could find no probes: it did in CI).
# ask sends one prompt and waits for its reply line.
start_server() {
	ensure_demo_model
	mkfifo "$TMP/in"
	OMP_NUM_THREADS=1 "$INFER" "$DEMO_MODEL" -z "$DEMO_TOK" --serve -n 6 -b cpu -t 0 "$@" \
		<"$TMP/in" >"$TMP/out" 2>"$TMP/srv.err" &
	SRV=$!
	exec 3>"$TMP/in"
	wait_for grep -q libinfer "/proc/$SRV/maps" || fail "infer did not start: $(tail -n 2 "$TMP/srv.err")"
}
replies() { wc -l <"$TMP/out"; }
have_replies() { [ "$(replies)" -ge "$1" ]; }
ask() {
	local want=$(($(replies) + 1))
	echo "once upon a time" >&3
	wait_for have_replies $want || fail "no reply to request $want: $(tail -n 2 "$TMP/srv.err")"
}
# ask_timed N: sends N prompts at once and waits (polling every 10 ms, up
# to 30 s) for their replies; prints the seconds taken.
ask_timed() {
	local t0 want i
	want=$(($(replies) + $1))
	t0=$(date +%s.%N)
	for i in $(seq "$1"); do echo "once upon a time" >&3; done
	for i in $(seq 3000); do have_replies $want && break; sleep 0.01; done
	have_replies $want || fail "no reply to request $want"
	echo "$(date +%s.%N) - $t0" | bc
}
stop_server() {
	exec 3>&-
	wait "$SRV" || fail "server exited $?: $(tail -n 2 "$TMP/srv.err")"
}

# probe_state PID: probestate.py's rows for libinfer.so in PID (name,
# semaphore, site bytes); fails when it fails or finds no probe at all.
probe_state() {
	local out
	out=$("$HELPERS/probestate.py" "$1" "$LIBINFER" 2>"$TMP/probestate.err") ||
		fail "probestate.py $1: $(tail -c 300 "$TMP/probestate.err")"
	[ -n "$out" ] || fail "probestate.py found no probe of $LIBINFER in pid $1"
	printf '%s\n' "$out"
}
# sem_total PID: the sum of libinfer.so's probe semaphores in PID's memory;
# sites_patched PID: how many of its probe sites are not the original nop.
# Both fail, rather than read 0, when there is nothing to read.
sem_total() { probe_state "$1" | awk '{ s += $2 } END { print s }'; }
sites_patched() { probe_state "$1" | awk '$3 != "0f1f440000" { n++ } END { print n + 0 }'; }

# engine_events STATS: the events a tracer should see fired for an engine
# run: one per span/op end and request end, two per token end (the token's
# span and the token it emitted); alloc, free, kv_usage and cl_batch records
# come on top of these where present.
engine_events() {
	jq '.probes | .span_end + .op_end + 2 * .token_end + .request_end' "$1"
}

# wait_attached FILE ERRFILE: the session line is out (probes are armed).
wait_attached() {
	wait_for [ -s "$1" ] || fail "tracer did not attach: $(cat "$2")"
}
