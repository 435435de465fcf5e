# spantrace - an eBPF tracer for inference engines, and the engine it traces.
#
#   make            build everything into build/
#   make check      build, make the test models, run every test (no apt-get)
#   make test       install missing packages (deps), then `make check`
#   make demo       deps, build, make the demo model, run the engine under the tracer
#   make bench      deps, build, print the speed ratios (tools/bench.sh)
#   make fuzz       libFuzzer targets for a fixed budget each
#   make deps       install missing Debian packages (needs root)
#   make install    binaries, libinfer.so, report.py, man pages, the docs (the
#                   systemd unit's Documentation=) and the unit itself under
#                   $(DESTDIR)$(PREFIX) (PREFIX defaults to /usr/local)
#
# Knobs: NO_PROBES=1 compiles the probes out; SANITIZE=1 builds with ASan+UBSan.
#
# Layout: inference/ (the engine, by role: base format text model backend engine
# serve; inference/README.md) -> libinfer.so, infer, mkmodel;
# bpf/*.bpf.c -> build/bpf/*.bpf.o -> (linked) -> build/spantrace.skel.h; user/*/*.c (the tracer,
# by role) -> libspantrace.a + user/commands/main.c -> spantrace.

# A recipe that fails leaves no half-written target behind.
.DELETE_ON_ERROR:

# A sanitizer build gets its own directory: objects don't record their flags.
ifeq ($(SANITIZE),1)
BUILD      ?= build-san
endif
BUILD      ?= build
CC         ?= gcc
CLANG      ?= clang
BPFTOOL    ?= bpftool

# The BPF target architecture (bpf_tracing.h's __TARGET_ARCH_*) and the
# multiarch include directory of the build machine (asm/ headers for BPF).
MACHINE    := $(shell uname -m)
ARCH       := $(or $(patsubst x86_64,x86,$(filter x86_64,$(MACHINE))), \
                   $(patsubst aarch64,arm64,$(filter aarch64,$(MACHINE))), \
                   $(patsubst ppc64le,powerpc,$(filter ppc64le,$(MACHINE))), \
                   $(patsubst s390x,s390,$(filter s390x,$(MACHINE))), \
                   $(patsubst riscv64,riscv,$(filter riscv64,$(MACHINE))), \
                   $(patsubst loongarch64,loongarch,$(filter loongarch64,$(MACHINE))), \
                   $(MACHINE))
MULTIARCH  := $(shell $(CC) -print-multiarch 2>/dev/null || $(CC) -dumpmachine)

WARN       := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wformat=2
CFLAGS     ?= -O2 -g
CFLAGS     += -std=gnu11 $(WARN) -D_GNU_SOURCE -Iinclude -I$(BUILD)
# Every object records the headers it read (build/**/*.d, included below).
DEPFLAGS    = -MMD -MP
LDFLAGS    ?=

# -O1, as ASan's authors advise: at -O2 gcc 12 took 56 s on backend_cpu.c alone
# (the CPU backend before its split into backend/cpu/) under ASan+UBSan (22 s
# at -O1, 6.6 s unsanitized), most of CI's sanitizer pass.
ifeq ($(SANITIZE),1)
SAN_FLAGS  := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
CFLAGS     += $(SAN_FLAGS) -O1
LDFLAGS    += $(SAN_FLAGS)
endif

# ---- the engine ----
# -mno-red-zone because an optimized uprobe turns the 5-byte probe nop into a
# call, which writes below %rsp (see inference/base/usdt.h). Frame pointers:
# `spantrace profile` walks user stacks with them.
ENGINE_CFLAGS := $(CFLAGS) -Iinference -fPIC -mno-red-zone -fopenmp -fno-omit-frame-pointer
ifeq ($(NO_PROBES),1)
ENGINE_CFLAGS += -DINFER_NO_PROBES
endif
ENGINE_LIBS   := -lOpenCL -lm -fopenmp -lpthread -ljson-c -lmicrohttpd
# Sources by role, a folder each; the backends' own one level deeper
# (inference/backend/cpu/, inference/backend/opencl/); the programs in
# inference/cmd/ link against the library, not into it.
ENGINE_SRCS   := $(filter-out inference/backend/cpu/matmul_kernel.c inference/backend/cpu/quantize_kernel.c \
                 inference/cmd/%,$(wildcard inference/*/*.c inference/*/*/*.c))
# The CPU backend's products and their input's quantizing, built once per
# x86-64 level (matmul.c picks one for the CPU at load); elsewhere once, for
# the compiler's default.
ifeq ($(MACHINE),x86_64)
MATMUL_LEVELS := v4vnni v4 v3 base
else
MATMUL_LEVELS := base
endif
MATMUL_MARCH_v4vnni := -march=x86-64-v4 -mavx512vnni
MATMUL_MARCH_v4   := -march=x86-64-v4
MATMUL_MARCH_v3   := -march=x86-64-v3
MATMUL_MARCH_base :=
MATMUL_OBJS   := $(patsubst %,$(BUILD)/inference/backend/cpu/matmul_kernel_%.o,$(MATMUL_LEVELS))
QUANT_OBJS    := $(patsubst %,$(BUILD)/inference/backend/cpu/quantize_kernel_%.o,$(MATMUL_LEVELS))
ENGINE_OBJS   := $(patsubst %.c,$(BUILD)/%.o,$(ENGINE_SRCS)) $(BUILD)/inference/cl_source.o $(MATMUL_OBJS) \
                 $(QUANT_OBJS)
CL_SOURCES    := inference/backend/opencl/cl_layout.h $(sort $(wildcard inference/backend/opencl/kernels/*.cl))

# ---- BPF ----
# Each bpf/*.bpf.c is one object; they are linked into one (bpftool gen
# object) and that one into the skeleton the tracer loads.
BPF_SRCS      := $(wildcard bpf/*.bpf.c)
BPF_OBJS      := $(patsubst bpf/%.bpf.c,$(BUILD)/bpf/%.bpf.o,$(BPF_SRCS))
BPF_LINKED    := $(BUILD)/bpf/spantrace.linked.o
BPF_SKELS     := $(BUILD)/spantrace.skel.h
BPF_CFLAGS    := -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -Wall \
                 -I$(BUILD) -Ibpf -Iinclude -I/usr/include/$(MULTIARCH)

# ---- the tracer ----
USER_CFLAGS   := $(CFLAGS) -Iuser -Ibpf -DSPANTRACE_USER_SPANS
USER_SRCS     := $(wildcard user/*/*.c)
USER_OBJS     := $(patsubst %.c,$(BUILD)/%.o,$(USER_SRCS))
USER_MAIN_OBJ := $(BUILD)/user/commands/main.o
USER_LIB_OBJS := $(filter-out $(USER_MAIN_OBJ),$(USER_OBJS))
USER_LIBS     := -lbpf -lelf -lz -ljson-c -lncursesw -lmicrohttpd -lcurl -lm -lpthread -lstdc++

UNIT_SRCS     := $(wildcard tests/unit/*.c)
UNIT_BINS     := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))

DEMO_MODEL    := $(BUILD)/models/demo15M.bin
DEMO_TOK      := $(BUILD)/models/demo_tokenizer.bin

.PHONY: all deps check demo test bench fuzz soak clean models install llama-server
# Keep the BPF objects and skeletons: as intermediates make would delete them
# and rebuild every user object on the next run.
.SECONDARY: $(BPF_OBJS) $(BPF_LINKED) $(BPF_SKELS)
all: $(BUILD)/libinfer.so $(BUILD)/infer $(BUILD)/mkmodel $(BUILD)/spantrace $(UNIT_BINS) $(BUILD)/spans_example \
     $(BUILD)/probedoc.stamp

# ---- Debian packages: install only what is missing, quietly ----
DEB_PKGS := build-essential clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev \
            libjson-c-dev ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo \
            systemtap-sdt-dev libncurses-dev libmicrohttpd-dev libcurl4-openssl-dev bpftrace linux-perf \
            prometheus tmux valgrind libclang-rt-14-dev python3-pandas python3-altair python3-matplotlib groff-base jq binutils curl bc libcap2-bin iproute2 \
            clpeak clblast-utils python3-pyopencl hashcat cmake ninja-build \
            nginx-light apache2-utils wrk golang-go python3-fastapi python3-uvicorn python3-jsonschema
# npm (tests/node): the official OpenAI client for the HTTP engine's tests,
# demo and bench; the Vercel AI SDK and LangChain with zod, applications'
# frameworks as witnesses; vega-lite, vega and resvg to save Altair charts
# as PNG; the OTLP protobuf types for the OTLP receiver of the tests.
# node and npm are checked as commands: a node from elsewhere (nodesource)
# bundles npm and conflicts with Debian's npm package.
NODE_DIR := tests/node
NODE_PKGS := openai ai @ai-sdk/openai-compatible @langchain/openai @langchain/core zod \
             vega vega-lite @resvg/resvg-js @opentelemetry/otlp-transformer
# npm (tests/llama): llama.cpp as users get it, node-llama-cpp's prebuilt
# linux-x64 CPU libraries only (--omit=optional leaves out its CUDA, Vulkan
# and ARM builds, 650 MB; --ignore-scripts: its postinstall would offer to
# download or build other binaries), the reference and peer for GGUF. No
# lockfile: npm 11 writes none that `npm ci --omit=optional` accepts on
# Linux; package.json pins node-llama-cpp and its binaries exactly.
# tools/llama_reference.sh then makes tests/llama/ref, the same llama.cpp
# with one ggml CPU variant on every host: the tests' reference.
LLAMA_DIR := tests/llama
deps:
	@missing=$$(for p in $(DEB_PKGS); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	    echo "deps: installing $$missing"; \
	    if [ "$$(id -u)" != 0 ]; then echo "deps: need root to apt-get install $$missing" >&2; exit 1; fi; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get update -qq >/dev/null && \
	    apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
	fi
	@command -v node >/dev/null && command -v npm >/dev/null || { \
	    echo "deps: installing nodejs npm"; \
	    export DEBIAN_FRONTEND=noninteractive; apt-get update -qq >/dev/null && \
	    apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null; }
	@(for p in $(NODE_PKGS); do [ -d $(NODE_DIR)/node_modules/$$p ] || exit 1; done) || \
	    (cd $(NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error >/dev/null) || \
	    { echo "deps: npm ci in $(NODE_DIR) failed" >&2; exit 1; }
	@[ -d $(LLAMA_DIR)/node_modules/@node-llama-cpp/linux-x64 ] || \
	    (cd $(LLAMA_DIR) && npm install --no-package-lock --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null) || \
	    { echo "deps: npm ci in $(LLAMA_DIR) failed" >&2; exit 1; }
	@tools/llama_reference.sh >/dev/null

# ---- the engine ----
$(BUILD)/inference/%.o: inference/%.c
	@mkdir -p $(@D)
	$(CC) $(ENGINE_CFLAGS) $(DEPFLAGS) -c $< -o $@

# Static patterns, the products' builds and the quantizing's with the same
# flags: only these targets (make would otherwise chain them into remaking
# the .d files, as matmul_kernel_v4.d.o). Its many inlined shapes
# overflow GCC's variable tracking, which then starts over without it:
# asking for none up front builds each level in 6.8 s instead of 10.2 (42
# instead of 50 under ASan). Frames and lines stay; profile unwinds by
# frame pointers.
# Under UBSan the plain (base) build's vectors become scalar lanes, each
# sum and product with its own signed-overflow check: that object took 12
# minutes to compile, 1m40s without those checks. The kernels' integer
# sums are bounded below 2^24 by design and checked bit for bit by
# test_matmul; every other check stays. They stay at -O2 there: test_matmul
# checks their FMA chains bit for bit against -O2's, and -O1 orders a tail's
# sums otherwise.
MATMUL_SAN := $(if $(filter 1,$(SANITIZE)),-fno-sanitize=signed-integer-overflow -O2)
LEVEL_CC    = $(CC) $(ENGINE_CFLAGS) $(MATMUL_SAN) -fno-var-tracking-assignments $(MATMUL_MARCH_$*) \
              -DMATMUL_LEVEL=$* $(DEPFLAGS) -c $< -o $@
$(MATMUL_OBJS): $(BUILD)/inference/backend/cpu/matmul_kernel_%.o: inference/backend/cpu/matmul_kernel.c
	@mkdir -p $(@D)
	$(LEVEL_CC)
$(QUANT_OBJS): $(BUILD)/inference/backend/cpu/quantize_kernel_%.o: inference/backend/cpu/quantize_kernel.c
	@mkdir -p $(@D)
	$(LEVEL_CC)

$(BUILD)/kernels.cl: $(CL_SOURCES)
	@mkdir -p $(@D)
	cat $(CL_SOURCES) > $@

# The kernels are embedded as one NUL-terminated string, infer_cl_source.
$(BUILD)/inference/cl_source.o: $(BUILD)/kernels.cl
	@mkdir -p $(@D)
	printf '\t.section .rodata\n\t.globl infer_cl_source\n\t.type infer_cl_source,@object\ninfer_cl_source:\n\t.incbin "%s"\n\t.byte 0\n\t.size infer_cl_source,.-infer_cl_source\n\t.section .note.GNU-stack,"",@progbits\n' $< > $(BUILD)/inference/cl_source.S
	$(CC) -c $(BUILD)/inference/cl_source.S -o $@

$(BUILD)/libinfer.so: $(ENGINE_OBJS)
	$(CC) -shared -o $@ $^ $(LDFLAGS) $(ENGINE_LIBS)

# The programs link the library from their own directory (the build tree) or
# from ../lib (installed: PREFIX/bin and PREFIX/lib).
LINK_ENGINE_PROGRAM = $(CC) $(ENGINE_CFLAGS) $(DEPFLAGS) -MF $@.d -o $@ $< -L$(BUILD) -linfer \
                      -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../lib' $(LDFLAGS) -lm
$(BUILD)/infer: inference/cmd/main.c $(BUILD)/libinfer.so $(BUILD)/version.h
	$(LINK_ENGINE_PROGRAM)

# --version of both programs: VERSION and the commit built (rewritten only
# when that changes, so nothing recompiles for nothing)
$(BUILD)/version.h: FORCE
	@mkdir -p $(@D)
	@v="$$(cat VERSION) ($$(git describe --always --dirty --abbrev=12 2>/dev/null || echo 'not a git checkout'))"; \
	 printf '#define SPANTRACE_VERSION "%s"\n' "$$v" >$@.tmp; cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp
.PHONY: FORCE
FORCE:
$(BUILD)/mkmodel: inference/cmd/mkmodel.c $(BUILD)/libinfer.so
	$(LINK_ENGINE_PROGRAM)

# ---- BPF: vmlinux.h -> object -> skeleton ----
$(BUILD)/vmlinux.h:
	@mkdir -p $(@D)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c $(BUILD)/vmlinux.h
	@mkdir -p $(@D)
	$(CLANG) $(BPF_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(BPF_LINKED): $(BPF_OBJS)
	$(BPFTOOL) gen object $@ $^

$(BUILD)/spantrace.skel.h: $(BPF_LINKED)
	$(BPFTOOL) gen skeleton $< name spantrace_bpf > $@

# ---- the tracer: the skeleton exists before any user object is compiled;
# the .d files make the objects that include it rebuild when it changes ----
$(BUILD)/user/%.o: user/%.c | $(BPF_SKELS)
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) $(DEPFLAGS) -c $< -o $@
$(USER_MAIN_OBJ): $(BUILD)/version.h

$(BUILD)/libspantrace.a: $(USER_LIB_OBJS)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/spantrace: $(USER_MAIN_OBJ) $(BUILD)/libspantrace.a
	$(CC) -o $@ $^ $(LDFLAGS) $(USER_LIBS)

# An engine of someone else's: spans through the public header only.
$(BUILD)/spans_example: examples/spans_example.c include/spantrace/spans.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Iinclude -o $@ $<

# ---- the probe tables of the docs, made from probes.def (tools/probedoc.c);
# probedoc rewrites only the text between its markers, and only if it changed ----
PROBE_DOCS := docs/probes.md man/spantrace.1 docs/llamacpp.md
$(BUILD)/probedoc: tools/probedoc.c include/spantrace/probes.h include/spantrace/probes.def \
                   include/spantrace/llamacpp.def
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $<
$(BUILD)/probedoc.stamp: $(BUILD)/probedoc include/spantrace/probes.def include/spantrace/llamacpp.def
	$(BUILD)/probedoc --update $(PROBE_DOCS)
	@touch $@

# ---- unit tests link the tracer's library and the engine ----
$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libspantrace.a $(BUILD)/libinfer.so
	@mkdir -p $(@D)
	$(CC) $(USER_CFLAGS) $(DEPFLAGS) -MF $@.d -Itests/unit -Iinference -o $@ $< $(BUILD)/libspantrace.a \
	    -L$(BUILD) -linfer -Wl,-rpath,'$$ORIGIN/..' $(LDFLAGS) $(USER_LIBS) -lOpenCL

# ---- models: deterministic, made here ----
$(DEMO_MODEL): $(BUILD)/mkmodel
	@mkdir -p $(@D)
	$(BUILD)/mkmodel $@ --shape stories15M --seed 1 --tokenizer $(DEMO_TOK)
models: $(DEMO_MODEL)

# ---- running things ----
check: all models
	$(if $(filter 1,$(SANITIZE)),. tools/sanitize.env &&) BUILD=$(abspath $(BUILD)) tests/run.sh

# llama-server, built from the llama.cpp source node-llama-cpp ships (~7 min
# on 2 vCPUs), once: cached outside the tree, keyed by the source's commit,
# so a clean clone (CI) reuses it. A test fixture and the serving peer; its
# llama-quantize, built beside it, writes GGUF files as users get them.
LLAMA_SERVER_CACHE ?= /var/cache/spantrace/llama-server
export LLAMA_SERVER_CACHE
llama-server: deps
	@tools/build_llama_server.sh "$(LLAMA_SERVER_CACHE)" >/dev/null

# the build on every core first (the tests then run one at a time)
test: deps llama-server
	$(MAKE) -j$$(nproc) all models
	$(MAKE) check

demo: deps
	$(MAKE) -j$$(nproc) all models
	tools/demo.sh

# llama-bench too (the llamabench section's peer), built the same way.
bench: deps llama-server
	@tools/build_llama_server.sh --bench "$(LLAMA_SERVER_CACHE)" >/dev/null
	$(MAKE) all models
	tools/bench.sh

fuzz: deps
	$(MAKE) all
	tests/fuzz/run.sh

soak: deps
	$(MAKE) all models
	tools/soak.sh

# ---- install: DESTDIR for staging (packages), PREFIX for the layout ----
PREFIX  ?= /usr/local
DESTDIR ?=
install: $(BUILD)/spantrace $(BUILD)/infer $(BUILD)/mkmodel $(BUILD)/libinfer.so
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/share/spantrace \
	    $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0755 $(BUILD)/spantrace $(BUILD)/infer $(BUILD)/mkmodel $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 $(BUILD)/libinfer.so $(DESTDIR)$(PREFIX)/lib/
	install -m 0644 user/report/report.py $(DESTDIR)$(PREFIX)/share/spantrace/
	install -m 0644 man/spantrace.1 man/infer.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -d $(DESTDIR)$(PREFIX)/share/doc/spantrace/docs
	install -m 0644 README.md $(DESTDIR)$(PREFIX)/share/doc/spantrace/
	install -m 0644 docs/*.md $(DESTDIR)$(PREFIX)/share/doc/spantrace/docs/
	install -m 0644 tools/spantrace-daemon.service $(DESTDIR)$(PREFIX)/share/spantrace/

clean:
	rm -rf $(BUILD)

DEPS := $(ENGINE_OBJS:.o=.d) $(BPF_OBJS:.o=.d) $(USER_OBJS:.o=.d) $(UNIT_BINS:=.d) \
        $(BUILD)/infer.d $(BUILD)/mkmodel.d
-include $(DEPS)
