#!/usr/bin/env bash
# fast
# t_layers.sh - the tree's dependencies go one way:
#   - nothing under user/ or bpf/ includes a header of the engine (inference/);
#     they share the vocabulary through include/spantrace/ only;
#   - no two .c files include each other's headers (an include cycle);
#   - user/'s stages depend downward only: core <- analysis <- output <-
#     commands, and top on core and analysis;
#   - inference/'s folders too: base <- format <- text <- model <- backend
#     <- engine <- serve (backend needs no text), the programs (cmd/:
#     main.c, mkmodel.c) on top; every engine source is in a folder (a file in a
#     subfolder, as backend/cpu/, is of its top folder's layer); the
#     backends' folders (backend/cpu/, backend/opencl/) share backend/'s
#     own headers, never each other's.
# A back-include planted in either half must fail it.
source "$(dirname "$0")/lib.sh"
need_cmd python3 python3
cd "$ROOT" || fail "no $ROOT"

# layers: the check, run in the current directory (a tree's root)
layers() {
python3 - <<'PY'
import collections, glob, os, re, sys

engine = glob.glob("inference/*/*.[ch]") + glob.glob("inference/*/*/*.[ch]")
files = glob.glob("user/*/*.[ch]") + glob.glob("bpf/*.[ch]") + glob.glob("inference/*.[ch]") + engine
assert len(files) > 100, len(files)
inc = {f: re.findall(r'^#include "([^"]+)"', open(f).read(), re.M) for f in files}

def resolve(f, h):
    for d in (os.path.dirname(f), "user", "bpf", "include", "inference"):
        p = os.path.normpath(os.path.join(d, h))
        if os.path.exists(p):
            return p
    return None

bad = 0
for f in files:
    if f.startswith(("user/", "bpf/")):
        for h in inc[f]:
            r = resolve(f, h)
            if r and r.startswith("inference/"):
                print(f"FAIL: {f} includes {r}"); bad += 1

pairs = set()
for f in (f for f in files if f.endswith(".c")):
    for h in inc[f]:
        r = resolve(f, h)
        if not r or not r.endswith(".h"):
            continue
        other = r[:-2] + ".c"
        if other != f and other in inc and any(
                (resolve(other, h2) or "")[:-2] == f[:-2] for h2 in inc[other]):
            pairs.add(tuple(sorted((f, other))))
for a, b in sorted(pairs):
    print(f"FAIL: {a} and {b} include each other's headers"); bad += 1

allowed = {"core": set(), "analysis": {"core"}, "output": {"core", "analysis"},
           "top": {"core", "analysis"}, "commands": {"core", "analysis", "output", "top"},
           "report": set()}
for f in glob.glob("user/*/*.[ch]"):
    d = f.split("/")[1]
    for h in inc[f]:
        r = resolve(f, h)
        if r and r.startswith("user/"):
            d2 = r.split("/")[1]
            if d2 != d and d2 not in allowed.get(d, set()):
                print(f"FAIL: {f} ({d}) includes {r} ({d2})"); bad += 1
order = ["base", "format", "text", "model", "backend", "engine", "serve", "cmd"]
below = {d: set(order[:i]) for i, d in enumerate(order)}
below["backend"].discard("text")
for f in glob.glob("inference/*.[ch]"):
    print(f"FAIL: {f} is in no folder of inference/"); bad += 1
for f in engine:
    d = f.split("/")[1]
    if d not in below:
        print(f"FAIL: {f}: inference/{d}/ is no layer"); bad += 1
        continue
    for h in inc[f]:
        r = resolve(f, h)
        if r and r.startswith("inference/") and r.count("/") >= 2:
            d2 = r.split("/")[1]
            if d2 != d and d2 not in below[d]:
                print(f"FAIL: {f} ({d}) includes {r} ({d2})"); bad += 1
for f in glob.glob("inference/backend/*/*.[ch]"):
    for h in inc[f]:
        r = resolve(f, h)
        if r and r.startswith("inference/backend/") and r.count("/") == 3 and \
                r.split("/")[2] != f.split("/")[2]:
            print(f"FAIL: {f} includes {r}, another backend's"); bad += 1
if not bad:
    print(f"ok: {len(files)} files: no engine header in user/ or bpf/, no include cycle between "
          f".c files, user/ layered core <- analysis <- output <- commands, inference/ layered "
          f"{' <- '.join(order)}")
sys.exit(1 if bad else 0)
PY
}
layers || fail "a dependency goes the wrong way"

# A planted back-include in either half must fail, and be named: the check
# run on a copy of the sources, with one include that goes up a layer.
for plant in "inference/base/error.c:serve/serve.h:inference/base/error.c (base) includes inference/serve/serve.h (serve)" \
	"user/core/log.c:output/prom.h:user/core/log.c (core) includes user/output/prom.h (output)"; do
	IFS=: read -r file hdr want <<<"$plant"
	rm -rf "$TMP/tree" && mkdir -p "$TMP/tree"
	cp -r user bpf include inference "$TMP/tree/" || fail "cannot copy the tree"
	[ -f "$TMP/tree/$file" ] && [ -f "$TMP/tree/${file%%/*}/$hdr" ] || fail "the plant's files are gone: $file, $hdr"
	sed -i "0,/^#include/s|^#include|#include \"$hdr\"\n#include|" "$TMP/tree/$file"
	out=$(cd "$TMP/tree" && layers 2>&1) && fail "a planted back-include ($file -> $hdr) passed: $out"
	grep -qF "FAIL: $want" <<<"$out" || fail "the planted back-include was not named: $out"
	ok "a planted back-include is found: $want"
done
