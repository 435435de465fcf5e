#!/usr/bin/env bash
# fast
# t_lint_comment_paths.sh - every file a comment names exists: a comment
# that sends the reader to a moved or deleted file is a stale comment.
#   Each name ending in .c, .h, .bpf.c, .sh, .md, .cl, .def, .py or .mjs in
#   a comment of a tracked source or script must resolve: as written, from
#   the file's folder or a source root (inference/, user/, bpf/, include/,
#   tests/, tools/), as a system header, or, written without a folder, to a
#   tracked file of that name. Names of other projects' files are listed
#   below with whose they are. A planted stale name must fail.
source "$(dirname "$0")/lib.sh"
need_cmd python3 python3
need_cmd git git
cd "$ROOT" || fail "no $ROOT"

check() {   # check FILE...: prints each stale name, exits 1 if any
	python3 - "$@" <<'PY'
import os, re, subprocess, sys

# other projects' files, named as their source trees name them
foreign = {
    "llama2.c": "karpathy's project", "run.c": "llama2.c's", "test.c": "llama2.c's",
    "uprobes.c": "the kernel's arch/x86/kernel/", "usdt.bpf.h": "libbpf's",
    "vmlinux.h": "made by make from the kernel's BTF", "version.h": "made by make",
    "sdt.h": "systemtap's sys/sdt.h",
    # placeholders the comments explain
    "a.c": "fuzz/run.sh's example", "b.c": "fuzz/run.sh's example",
    "app.mjs": "the docs' example program", "my_pyopencl_script.py": "the docs' example program",
}
tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
names = {os.path.basename(t) for t in tracked}
pat = re.compile(r"(?<![\w./<$-])((?:[\w.-]+/)*[\w-]+(?:\.bpf)?\.(?:c|h|sh|md|cl|def|py|mjs))\b(?![\w(/-])")
roots = ("inference", "user", "bpf", "include", "include/spantrace", "tests", "tools")

def comments(path, text):
    if path.endswith((".sh", ".py")):
        return [l.split("#", 1)[1] for l in text.splitlines() if "#" in l and not l.startswith("#!")]
    return re.findall(r"/\*.*?\*/|//[^\n]*", text, re.S)

def exists(f, name):
    cands = [name, os.path.join(os.path.dirname(f), name)] + [os.path.join(r, name) for r in roots]
    cands += ["/usr/include/" + name, "/usr/include/x86_64-linux-gnu/" + name]
    return any(os.path.exists(c) for c in cands) or ("/" not in name and name in names)

bad = seen = 0
for f in sys.argv[1:]:
    for c in comments(f, open(f, errors="replace").read()):
        for name in pat.findall(c):
            seen += 1
            if re.search(r"\b[A-Z]{3,}\b", name):   # a placeholder: tests/helpers/NAME.c
                continue
            if not exists(f, name) and os.path.basename(name) not in foreign:
                print(f"FAIL: {f}: a comment names {name}, which is not there"); bad += 1
print(f"{seen} file names in comments, {bad} stale")
sys.exit(1 if bad else 0)
PY
}

mapfile -t files < <(git ls-files '*.c' '*.h' '*.sh' '*.cl' '*.def' '*.py' '*.mjs' | grep -v '^tests/fuzz/corpus')
assert_ge "files whose comments are read" "${#files[@]}" 200
out=$(check "${files[@]}" 2>&1) || fail "stale file names in comments: $out"
ok "$out"
assert_ge "file names found in comments" "$(grep -o '^[0-9]*' <<<"$out")" 100

# the control: a comment naming a file that moved
printf '/* planted.c - see user/nowhere/gone.c. */\n' >"$TMP/planted.c"
out=$(check "$TMP/planted.c" 2>&1) && fail "a comment naming a missing file passed: $out"
grep -q 'names user/nowhere/gone.c' <<<"$out" || fail "the planted stale name was not named: $out"
ok "the planted stale name fails"
