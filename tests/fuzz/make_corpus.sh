#!/usr/bin/env bash
# tests/fuzz/make_corpus.sh - regenerates the committed seed corpora in
# tests/fuzz/corpus/<target>/ (small valid inputs; nothing from ../shared).
# Needs $BUILD/mkmodel (make mkmodel) and gcc for the ELF seeds.
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-$PWD/build}
C=tests/fuzz/corpus
MK=$BUILD/mkmodel
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

rm -rf "$C"
mkdir -p "$C"/{model,tokenizer,tokenizer_encode,daemon_config,infer_cli,perfev_list,maps,elf,events}

# -- model: tiny checkpoints of several shapes (D,H,L,NH,NKV,V,S); a negative
#    vocab means an unshared classifier.
i=0
for shape in 8,8,1,2,1,4,4 8,16,2,2,2,6,4 16,8,1,4,2,5,2 4,4,1,1,1,3,1; do
	"$MK" "$C/model/shape$i.bin" --shape "$shape" --seed $((i + 1)) >/dev/null
	i=$((i + 1))
done

# an unshared classifier: shape0 with vocab -4 and 4 x 8 more floats (mkmodel
# writes shared ones only)
{ head -c 20 "$C/model/shape0.bin"; printf '\374\377\377\377'; tail -c +25 "$C/model/shape0.bin"
  head -c 128 /dev/zero; } >"$C/model/unshared.bin"

# -- tokenizer: mkmodel's synthetic tokenizer (vocab >= 354) and a truncated copy
"$MK" "$tmp/m.bin" --shape 8,8,1,2,1,360,4 --tokenizer "$C/tokenizer/synthetic360.bin" >/dev/null
head -c 1000 "$C/tokenizer/synthetic360.bin" >"$C/tokenizer/prefix1000.bin"
# a minimal one: max_len 1, one token "a" (score 0)
printf '\001\000\000\000\000\000\000\000\001\000\000\000a' >"$C/tokenizer/one_token.bin"

# -- tokenizer_encode: text, valid and broken UTF-8
printf 'Once upon a time, there was a little girl.' >"$C/tokenizer_encode/ascii"
printf 'the thing and the other thing\n\nnext' >"$C/tokenizer_encode/merges"
printf 'caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80' >"$C/tokenizer_encode/utf8"
printf '\xff\xfe\x80\xc3\xe6\x97 \xf0\x9f\x98' >"$C/tokenizer_encode/broken_utf8"
printf '<0x41> <s> </s> <unk>' >"$C/tokenizer_encode/piece_names"

# -- daemon_config: NUL-separated words; SPANTRACE_*=... words are the environment
words() { local f=$1; shift; printf '%s\0' "$@" >"$f"; }
words "$C/daemon_config/minimal" daemon --binary /usr/bin/true
words "$C/daemon_config/full" daemon --binary=build/infer -p 42 --listen '[::1]:9000' \
	--jsonl-dir /tmp/j --slow-ms 12.5 --interval 0.5 --file-max 1M --total-max 2GiB \
	--retain 3 --level detail -v -v
words "$C/daemon_config/env" daemon SPANTRACE_BINARY=/bin/ls SPANTRACE_SLOW_PCT=99.9 \
	SPANTRACE_FILE_MAX_BYTES=64K SPANTRACE_TOTAL_MAX_BYTES=1G SPANTRACE_LISTEN=0.0.0.0:0 \
	SPANTRACE_LEVEL=coarse SPANTRACE_INTERVAL_SECS=10 SPANTRACE_RETAIN_FILES=8 --slow-ms 3
words "$C/daemon_config/help" daemon -h

# -- infer_cli: NUL-separated argv
words "$C/infer_cli/ids" infer model.bin --ids -t 0 -n 64 -b cpu
words "$C/infer_cli/text" infer model.bin -z tok.bin -i 'hello' -p 0.5 -s 7 --threads 2 --stats s.json
words "$C/infer_cli/serve" infer model.bin -z tok.bin --serve --cl-platform 0 --cl-device 1 -b opencl

# -- perfev_list: first byte = the list's maximum length, then the --events text
printf '\010task-clock,page-faults' >"$C/perfev_list/default"
printf '\004cpu-clock' >"$C/perfev_list/one"
printf '\0011234' >"$C/perfev_list/pid"

# -- maps: /proc/PID/maps text (lines naming this harness's libraries get symbolized)
cat >"$C/maps/typical" <<'MAPS'
555555554000-555555556000 r--p 00000000 fe:01 1234                       /usr/bin/true
555555556000-55555555a000 r-xp 00002000 fe:01 1234                       /usr/bin/true
7ffff7dd3000-7ffff7df9000 r--p 00000000 fe:01 5678                       /lib/x86_64-linux-gnu/libc.so.6
7ffff7df9000-7ffff7f4e000 r-xp 00026000 fe:01 5678                       /lib/x86_64-linux-gnu/libc.so.6
7ffff7fc1000-7ffff7fc5000 r--p 00000000 00:00 0                          [vvar]
7ffff7fc5000-7ffff7fc7000 r-xp 00000000 00:00 0                          [vdso]
7ffff7fd0000-7ffff7fd1000 r-xp 00000000 00:00 0 
7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0                          [stack]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
MAPS
cat >"$C/maps/deleted" <<'MAPS'
7f0000000000-7f0000001000 r-xp 00001000 00:05 99                         /memfd:jit (deleted)
7f0000001000-7f0000002000 r-xp 00000000 fe:01 77                         /tmp/gone.so (deleted)
MAPS

# -- elf: small binaries with USDT notes, a build id and symbols
cat >"$tmp/usdt.c" <<'SRC'
#include <sys/sdt.h>
unsigned short infer_token_begin_semaphore __attribute__((section(".probes")));
int work(int x) { DTRACE_PROBE2(infer, token_begin, x, x * 2); return x + 1; }
int main(int argc, char **argv) { (void)argv; DTRACE_PROBE(infer, request_end); return work(argc); }
SRC
gcc -Os -g0 -Wl,--build-id -o "$C/elf/usdt_exe" "$tmp/usdt.c"
gcc -Os -g0 -m32 -o "$C/elf/usdt_exe32" "$tmp/usdt.c" 2>/dev/null || true
gcc -Os -g0 -shared -fPIC -o "$C/elf/usdt_lib.so" "$tmp/usdt.c"
strip -o "$C/elf/usdt_stripped" "$C/elf/usdt_exe"
gcc -Os -g0 -shared -fPIC -Wl,-rpath,'$ORIGIN/lib' -o "$C/elf/needs_lib.so" -x c - <<'SRC'
int f(void) { return 1; }
SRC
# -- events: [type][length][bytes] records (fuzz_events.c): one of each type
#    at its exact size (zeros are valid field values), then all of them in one
#    input, then a short one
cat >"$tmp/sizes.c" <<'SRC'
#include <stdio.h>
#include <linux/types.h>
#include "spantrace.h"
int main(void)
{
	printf("1 %zu\n2 %zu\n3 %zu\n4 %zu\n5 %zu\n6 %zu\n7 %zu\n8 %zu\n", sizeof(struct span_event),
	       sizeof(struct token_event), sizeof(struct request_event), sizeof(struct alloc_event),
	       sizeof(struct alloc_event), sizeof(struct kv_event), sizeof(struct kernel_event),
	       sizeof(struct sample_event));
	return 0;
}
SRC
gcc -DSPANTRACE_USER_SPANS -Ibpf -Iinclude -o "$tmp/sizes" "$tmp/sizes.c"
"$tmp/sizes" | while read -r t n; do
	printf "\\$(printf %03o "$t")\\$(printf %03o "$n")" >"$C/events/type$t"
	cat "$C/events/type$t" >>"$C/events/all_types"
done
printf '\001\020' >"$C/events/short_span"

find "$C" -type f -size +64k -printf 'make_corpus: large seed %p (%s bytes)\n'
echo "seeds: $(find "$C" -type f | wc -l) files, $(du -sk "$C" | cut -f1) KiB"
