# spantrace - an eBPF tracer for inference engines, and the engine it traces.
#
#   make            build everything into build/
#   make demo       install missing Debian packages, build, make the demo model,
#                   run the engine under the tracer
#   make test       install, build, run every test (tests/run.sh)
#   make bench      install, build, print the speed ratios (tools/bench.sh)
#   make fuzz       libFuzzer targets for a fixed budget each
#
# Knobs: NO_PROBES=1 compiles the probes out; SANITIZE=1 builds with ASan+UBSan.

# A sanitizer build gets its own directory: objects don't record their flags.
ifeq ($(SANITIZE),1)
BUILD      ?= build-san
endif
BUILD      ?= build
CC         ?= gcc
CLANG      ?= clang
BPFTOOL    ?= bpftool
ARCH       := $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')

WARN       := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wformat=2
CFLAGS     ?= -O2 -g
CFLAGS     += -std=gnu11 $(WARN) -D_GNU_SOURCE -Iinference -I$(BUILD)
LDFLAGS    ?=

ifeq ($(SANITIZE),1)
SAN_FLAGS  := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
CFLAGS     += $(SAN_FLAGS)
LDFLAGS    += $(SAN_FLAGS)
endif

# The engine: -mno-red-zone because an optimized uprobe turns the 5-byte probe
# nop into a call, which writes below %rsp (see inference/probes.h).
# Frame pointers: `spantrace profile` walks user stacks with them.
ENGINE_CFLAGS := $(CFLAGS) -fPIC -mno-red-zone -fopenmp -fno-omit-frame-pointer
ifeq ($(NO_PROBES),1)
ENGINE_CFLAGS += -DINFER_NO_PROBES
endif
ENGINE_LIBS   := -lOpenCL -lm -fopenmp -lpthread -ljson-c -lmicrohttpd

ENGINE_MAINS  := inference/main.c inference/mkmodel.c
ENGINE_SRCS   := $(filter-out $(ENGINE_MAINS),$(wildcard inference/*.c))
ENGINE_OBJS   := $(patsubst inference/%.c,$(BUILD)/inference/%.o,$(ENGINE_SRCS)) \
                 $(BUILD)/inference/cl_source.o
CL_SOURCES    := $(sort $(wildcard inference/kernels/*.cl))

BPF_SRCS      := $(wildcard bpf/*.bpf.c)
BPF_OBJS      := $(patsubst bpf/%.bpf.c,$(BUILD)/bpf/%.bpf.o,$(BPF_SRCS))
BPF_SKELS     := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))
BPF_CFLAGS    := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall \
                 -I$(BUILD) -Ibpf -Iinference -I/usr/include/$(shell uname -m)-linux-gnu

USER_CFLAGS   := $(CFLAGS) -Iuser -Ibpf -DINFER_PROBE_NAMES_ONLY
USER_SRCS     := $(wildcard user/*.c)
USER_OBJS     := $(patsubst user/%.c,$(BUILD)/user/%.o,$(USER_SRCS))
USER_LIB_OBJS := $(filter-out $(BUILD)/user/main.o,$(USER_OBJS))
USER_LIBS     := -lbpf -lelf -lz -ljson-c -lncursesw -lmicrohttpd -lm -lpthread

UNIT_SRCS     := $(wildcard tests/unit/*.c)
UNIT_BINS     := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))

DEMO_MODEL    := $(BUILD)/models/demo15M.bin
DEMO_TOK      := $(BUILD)/models/demo_tokenizer.bin

.PHONY: all deps demo test bench fuzz soak clean models
# Keep the BPF objects and skeletons: as intermediates make would delete them
# and rebuild every user object on the next run.
.SECONDARY: $(BPF_OBJS) $(BPF_SKELS)
all: $(BUILD)/libinfer.so $(BUILD)/infer $(BUILD)/mkmodel $(BUILD)/spantrace $(UNIT_BINS)

# ---- Debian packages: install only what is missing, quietly ----
DEB_PKGS := build-essential clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev \
            libjson-c-dev ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo \
            systemtap-sdt-dev libncurses-dev libmicrohttpd-dev bpftrace linux-perf \
            prometheus tmux valgrind libclang-rt-14-dev python3-pandas jq binutils curl bc libcap2-bin iproute2
# The official OpenAI client (npm) for the HTTP engine's tests, demo and bench.
# node and npm are checked as commands: a node from elsewhere (nodesource)
# bundles npm and conflicts with Debian's npm package.
NODE_DIR := tests/node
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
	@[ -d $(NODE_DIR)/node_modules/openai ] || \
	    (cd $(NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error >/dev/null) || \
	    { echo "deps: npm ci in $(NODE_DIR) failed" >&2; exit 1; }

# ---- the engine ----
$(BUILD)/inference/%.o: inference/%.c $(wildcard inference/*.h) | $(BUILD)/inference
	$(CC) $(ENGINE_CFLAGS) -c $< -o $@

$(BUILD)/kernels.cl: $(CL_SOURCES) | $(BUILD)
	cat $(CL_SOURCES) > $@

# The kernels are embedded as one NUL-terminated string, infer_cl_source.
$(BUILD)/inference/cl_source.o: $(BUILD)/kernels.cl | $(BUILD)/inference
	printf '\t.section .rodata\n\t.globl infer_cl_source\n\t.type infer_cl_source,@object\ninfer_cl_source:\n\t.incbin "%s"\n\t.byte 0\n\t.size infer_cl_source,.-infer_cl_source\n\t.section .note.GNU-stack,"",@progbits\n' $< > $(BUILD)/inference/cl_source.S
	$(CC) -c $(BUILD)/inference/cl_source.S -o $@

$(BUILD)/libinfer.so: $(ENGINE_OBJS)
	$(CC) -shared -o $@ $^ $(LDFLAGS) $(ENGINE_LIBS)

$(BUILD)/infer: inference/main.c $(BUILD)/libinfer.so
	$(CC) $(ENGINE_CFLAGS) -o $@ $< -L$(BUILD) -linfer -Wl,-rpath,'$$ORIGIN' $(LDFLAGS) -lm

$(BUILD)/mkmodel: inference/mkmodel.c $(BUILD)/libinfer.so
	$(CC) $(ENGINE_CFLAGS) -o $@ $< -L$(BUILD) -linfer -Wl,-rpath,'$$ORIGIN' $(LDFLAGS) -lm

# ---- BPF: vmlinux.h -> object -> skeleton ----
$(BUILD)/vmlinux.h: | $(BUILD)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h) inference/probes.h $(BUILD)/vmlinux.h | $(BUILD)/bpf
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/%.skel.h: $(BUILD)/bpf/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@.tmp && mv $@.tmp $@

# ---- the tracer: user objects depend on every skeleton ----
$(BUILD)/user/%.o: user/%.c $(wildcard user/*.h bpf/*.h) inference/probes.h $(BPF_SKELS) | $(BUILD)/user
	$(CC) $(USER_CFLAGS) -c $< -o $@

$(BUILD)/libspantrace.a: $(USER_LIB_OBJS)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/spantrace: $(BUILD)/user/main.o $(BUILD)/libspantrace.a
	$(CC) -o $@ $^ $(LDFLAGS) $(USER_LIBS)

# ---- unit tests link the tracer's library and the engine ----
$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libspantrace.a $(BUILD)/libinfer.so | $(BUILD)/tests
	$(CC) $(USER_CFLAGS) -Itests/unit -o $@ $< $(BUILD)/libspantrace.a -L$(BUILD) -linfer \
	    -Wl,-rpath,'$$ORIGIN/..' $(LDFLAGS) $(USER_LIBS)

$(BUILD) $(BUILD)/inference $(BUILD)/bpf $(BUILD)/user $(BUILD)/tests $(BUILD)/models:
	mkdir -p $@

# ---- models: deterministic, made here ----
$(DEMO_MODEL): $(BUILD)/mkmodel | $(BUILD)/models
	$(BUILD)/mkmodel $@ --shape stories15M --seed 1 --tokenizer $(DEMO_TOK)
models: $(DEMO_MODEL)

demo: deps
	$(MAKE) all models
	tools/demo.sh

test: deps
	$(MAKE) all models
	$(if $(filter 1,$(SANITIZE)),. tools/sanitize.env &&) BUILD=$(abspath $(BUILD)) tests/run.sh

bench: deps
	$(MAKE) all models
	tools/bench.sh

fuzz: deps
	$(MAKE) all
	tests/fuzz/run.sh

soak: deps
	$(MAKE) all models
	tools/soak.sh

clean:
	rm -rf $(BUILD)
