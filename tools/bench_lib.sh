# shellcheck shell=bash
# tools/bench_lib.sh - sourced by tools/bench_{probes,daemon,profile}.sh:
# paths, medians, engine runs, and the "ratio" lines tools/bench.sh tabulates.
#
# A section prints whatever it likes for people, plus one machine line per
# figure that goes into the final table:
#   ratio NAME VALUE TARGET      (TARGET like ">=0.99", or "info" for none)
# shellcheck disable=SC2034  # the variables are for the sourcing scripts
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
MODELS=${MODELS:-$(cd "$ROOT/.." && pwd)/shared/models}
INFER=$BUILD/infer
SPANTRACE=$BUILD/spantrace
DEMO_MODEL=$BUILD/models/demo15M.bin
REPEAT=${REPEAT:-5}
# engine tok/s comparisons are noisier than anything else here: twice the rounds
ROUNDS=${ROUNDS:-$((2 * REPEAT))}
TMP=$(mktemp -d /tmp/spantrace-bench.XXXXXX)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}  # spinning OpenMP collapses on a shared 2-core box
trap 'bench_cleanup' EXIT

# Sections register extra cleanup by redefining this hook.
bench_cleanup_hook() { :; }
bench_cleanup() {
	bench_cleanup_hook
	jobs -p | xargs -r kill 2>/dev/null
	# a child killed with us may still be writing into TMP: retry once
	rm -rf "$TMP" 2>/dev/null || { sleep 1; rm -rf "$TMP"; }
}

# skipped WHY: the section cannot run here; not an error for `make bench`.
# cpu_model: the CPU the figures were measured on (llama.cpp's speed moves
# with it: the ggml variant it loads, AMX or not)
cpu_model() { sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1; }
skipped() { echo "skipped: $*"; exit 0; }
die() { echo "${BENCH_NAME:-bench}: error: $*" >&2; exit 1; }

# median: of the numbers on stdin (mean of the middle two for an even count);
# prints "n/a" for no input.
median() {
	sort -g | awk '{v[NR] = $1}
		END { if (!NR) print "n/a"; else if (NR % 2) print v[(NR + 1) / 2];
		      else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# div A B: A/B to 3 decimals, "n/a" when either is missing or B is 0.
div() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || b + 0 == 0) print "n/a"; else printf "%.3f\n", a / b }'; }

# paired_ratio A B: median of A[i]/B[i] over the lines of files A and B
# (round i's traced figure over the same round's untraced one).
paired_ratio() {
	paste "$1" "$2" | awk '$2 > 0 { print $1 / $2 }' | median |
		awk '{ if ($1 == "n/a") print; else printf "%.3f\n", $1 }'
}

# paired_list A B: every round's A[i]/B[i], to show the spread.
paired_list() { paste "$1" "$2" | awk '$2 > 0 { printf "%s%.3f", sep, $1 / $2; sep = " " } END { print "" }'; }

ratio() { echo "ratio $1 $2 $3"; }
# rotate3 R A B C: round R of three runs, each first in turn (A B C, then
# B C A, then C A B), so that no run always follows the same one.
rotate3() {
	case $(($1 % 3)) in
	1) "$2"; "$3"; "$4" ;;
	2) "$3"; "$4"; "$2" ;;
	0) "$4"; "$2"; "$3" ;;
	esac
}
# KV_TYPE (auto, the engine's default, f32 or f16: --kv-type for our
# engine) and KV_SUFFIX, what ratio names gain for it (auto keeps the old
# names: they always meant the default).
kv_type_from_env() {
	KV_TYPE=${KV_TYPE:-auto}
	case $KV_TYPE in
	auto) KV_SUFFIX= ;;
	f32) KV_SUFFIX=_kvf32 ;;
	f16) KV_SUFFIX=_kvf16 ;;
	*) die "KV_TYPE=$KV_TYPE: auto, f32 or f16" ;;
	esac
}

# CACHE_PROMPT (false, the default: every prompt is prefilled, though the
# rounds repeat them; true: the servers' prefix caches reuse them) and
# CACHE_SUFFIX, what ratio names gain for true.
cache_prompt_from_env() {
	CACHE_PROMPT=${CACHE_PROMPT:-false}
	case $CACHE_PROMPT in
	false) CACHE_SUFFIX= ;;
	true) CACHE_SUFFIX=_cached ;;
	*) die "CACHE_PROMPT=$CACHE_PROMPT: true or false" ;;
	esac
}

# expected_ratio HITS NS TOKS: tok/s ratio if each token pays HITS x NS on
# top of 1/TOKS seconds.
expected_ratio() {
	awk -v h="$1" -v c="${2:-}" -v t="$3" 'BEGIN { if (c + 0 <= 0 || t + 0 <= 0) print "n/a"; else printf "%.4f\n", 1 / (1 + h * c * 1e-9 * t) }'
}

# tok_s FILE: the engine's "achieved tok/s: X (N tokens ...)" -> X
tok_s() { sed -n 's/^achieved tok\/s: \([0-9.]*\) .*/\1/p' "$1" | tail -n1; }
# tok_n FILE: ... -> N (the tokens the engine counted)
tok_n() { sed -n 's/^achieved tok\/s: [0-9.]* (\([0-9]*\) tokens.*/\1/p' "$1" | tail -n1; }

# make_requests FILE N: N empty lines, i.e. N BOS-prompt requests for
# `infer --serve`. Several requests per run make each timed run seconds long,
# which the noise on a shared 2-core box needs.
make_requests() { local i; : >"$1"; for ((i = 0; i < $2; i++)); do echo >>"$1"; done; }

# engine_backend MODEL: "opencl" when the default backend runs MODEL here,
# else "cpu" (a machine without an OpenCL device still benches).
engine_backend() {
	if timeout 60 "$INFER" "$1" -n 4 -t 0 --ids >/dev/null 2>&1; then echo opencl; else echo cpu; fi
}

# wait_until SECONDS CMD...: polls CMD every 0.1 s. (Locals are prefixed:
# bash scoping is dynamic, and CMD may read its caller's variables.)
wait_until() {
	local _wu_polls=$(($1 * 10)) _wu_i
	shift
	for ((_wu_i = 0; _wu_i < _wu_polls; _wu_i++)); do "$@" && return 0; sleep 0.1; done
	return 1
}

# wait_deadline PID SECONDS: waits for background job PID, killing it after
# SECONDS; returns its status. (`timeout CMD &` would give timeout's pid, not
# the engine's, and the pid is what the tracer labels.)
wait_deadline() {
	local _wd_polls=$(($2 * 10))
	while kill -0 "$1" 2>/dev/null && ((_wd_polls-- > 0)); do sleep 0.1; done
	kill -0 "$1" 2>/dev/null && { echo "${BENCH_NAME:-bench}: pid $1 ran past $2 s: killed" >&2; kill "$1"; }
	wait "$1"
}

need_built() {
	local f
	for f in "$@"; do [ -x "$f" ] || die "no $f: run make first"; done
}

# make_s110m PREFIX TYPE...: the stories110M shape (dim 768, hidden 2048, 12
# layers and heads, vocab 32000), generated (seed 7, its own tokenizer), as
# PREFIX_TYPE.gguf for each GGUF type; the checkpoint goes after.
make_s110m() {
	local prefix=$1 t
	shift
	"$BUILD/mkmodel" "$TMP/s110m.bin" --shape 768,2048,12,12,12,32000,1024 --seed 7 \
		--tokenizer "$TMP/s110m_tok.bin" >/dev/null || die "mkmodel: the stories110M shape"
	for t in "$@"; do
		"$BUILD/mkmodel" "${prefix}_$t.gguf" --gguf "$t" --from "$TMP/s110m.bin" \
			--vocab "$TMP/s110m_tok.bin" >/dev/null || die "mkmodel --gguf $t"
	done
	rm -f "$TMP/s110m.bin"
}
