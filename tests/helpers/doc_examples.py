#!/usr/bin/python3
# doc_examples.py - runs the examples of README.md and docs/*.md, for
# t_doc_examples.sh (which starts the peers they name and passes them in the
# environment).
#
# An indented block holding a command (spantrace, build/..., make, perf,
# curl, node, bpftrace...) must be marked just above it:
#   <!-- example: run -->                 every line of it is run, in order
#   <!-- example: not run: REASON -->     said, and skipped
# An unmarked block fails. Commands run in a scratch directory with build/
# and tests/ linked in and `spantrace` on PATH, after these substitutions:
#   $(pidof NAME)         the pid of the peer t_doc_examples.sh started (or
#                         of the server an earlier line of the block started)
#   MODEL, OUT.gguf       the demo model, a GGUF made from it
#   --duration N          --duration 3
#   ports 8000 9464 4318  free ports (4318: the test's OTLP receiver)
#   -p 1234               a process that sleeps in nanosleep (spans_example)
#   app.mjs, my_pyopencl_script.py, myapp, /path/to/libllama.v0.5.0.so,
#   /var/log/spantrace    the suite's node-llama-cpp program, pyopencl
#                         program, its running copy, node-llama-cpp's
#                         libllama, a scratch directory
# What each command must do: exit 0 (a live view or a tracer by pid that
# runs until stopped gets Ctrl-C after 3 s, a daemon SIGTERM, and must then
# exit 0); every file it names with -o, --chrome or > exists and is not
# empty; a JSONL starts with the session record and holds a record of what
# was traced; a Chrome trace parses with events in it; a daemon serves
# /metrics. A line after a daemon (curl ... | grep) is retried for 15 s.
import json, os, re, shlex, signal, subprocess, sys, time, pty, select

ROOT = os.environ["ROOT"]
WORK = os.environ["WORK"]
ENV = dict(os.environ)
PIDS = {"infer": os.environ["EPID"], "llama-server": os.environ["LPID"], "python3": os.environ["PYPID"],
        "myapp": os.environ["CLPID"]}
CMD = re.compile(r'^\s*(sudo |\$ )?(spantrace|build/|make|perf|curl|node|npx|python3|bpftrace|readelf)\b(?!:)')
failures, ran, notrun = [], 0, []


def blocks(path):
    """(line, marker, [lines]) of each indented block holding a command."""
    lines = open(path).read().split("\n")
    i, out = 0, []
    while i < len(lines):
        if lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or
                                      (not lines[j].strip() and j + 1 < len(lines) and lines[j + 1].startswith("    "))):
                j += 1
            body = [l[4:] for l in lines[i:j]]
            if any(CMD.match(l) for l in body):
                k = i - 1
                while k >= 0 and not lines[k].strip():
                    k -= 1
                m = re.match(r"<!-- example: (.*) -->$", lines[k]) if k >= 0 else None
                out.append((i + 1, m.group(1) if m else None, body))
            i = j
        else:
            i += 1
    return out


def commands(body):
    """The block's commands: comments cut, continuations joined."""
    out, cur = [], ""
    for l in body:
        if not l.strip():
            continue
        l = re.sub(r"\s+#\s.*$", "", l).rstrip()
        if l.endswith("\\"):
            cur += l[:-1] + " "
            continue
        out.append(cur + l)
        cur = ""
    return out


def substitute(c):
    for name, pid in PIDS.items():
        c = c.replace("$(pidof %s)" % name, pid)
    m = re.search(r"\$\(pidof ([^)]*)\)", c)
    if m:
        raise ValueError("no peer for pidof " + m.group(1))
    c = re.sub(r"\bMODEL\b", os.environ["DEMO_MODEL"], c)
    c = c.replace("OUT.gguf", os.environ["GGUF"])
    c = re.sub(r"--duration \d+", "--duration 3", c)
    c = c.replace("127.0.0.1:8000", "127.0.0.1:" + os.environ["P8000"])
    c = c.replace("9464", os.environ["P9464"]).replace("4318", os.environ["OTLP_PORT"])
    # 1234: a process that sleeps for a nanosleep span, else the engine
    c = re.sub(r"-p 1234\b", "-p " + (os.environ["SLEEPER"] if "nanosleep" in c else PIDS["infer"]), c)
    c = c.replace("node app.mjs", os.environ["NODE_APP"])
    c = c.replace("my_pyopencl_script.py", os.environ["PYOPENCL_SCRIPT"])
    c = c.replace("/path/to/libllama.v0.5.0.so", os.environ["LIBLLAMA"])
    c = c.replace("/var/log/spantrace", os.path.join(WORK, "var-log-spantrace"))
    return c


def words_of(c):
    try:
        return shlex.split(c)
    except ValueError:   # not one command line (a failure says so later)
        return c.split()


def outputs(c):
    """Files the command says it writes."""
    words = words_of(c)
    files = []
    for i, w in enumerate(words[:-1]):
        if w in ("-o", "--chrome", "--summary", "--csv", ">") and words[i + 1] != "--":
            files.append(words[i + 1])
        if w == "--":
            break
    if ">" in words and words.index(">") + 1 < len(words):
        files.append(words[words.index(">") + 1])
    return sorted(set(files))


def check_file(f, what):
    p = os.path.join(WORK, f)
    if os.path.isdir(p):
        if not os.listdir(p):
            return f"{what}: {f}/ is empty"
        return None
    if not os.path.exists(p) or os.path.getsize(p) == 0:
        return f"{what}: {f} missing or empty"
    if f.endswith(".jsonl"):
        recs = [json.loads(l) for l in open(p) if l.strip()]
        if recs[0].get("type") != "session":
            return f"{what}: {f} does not start with the session record"
        if not [r for r in recs if r.get("type") not in ("session", "summary", "drops")]:
            return f"{what}: {f} holds nothing traced"
    if f.endswith(".json") and "trace" in f:
        t = json.load(open(p))
        if not t.get("traceEvents"):
            return f"{what}: {f} has no trace events"
    return None


def traced(path):
    """Does the JSONL at path hold a record past the session's?"""
    try:
        return sum(1 for l in open(path) if l.strip()) > 1
    except OSError:
        return False


def live(c):
    words = words_of(c)
    if len(words) < 2 or words[0] not in ("spantrace", "build/spantrace"):
        return None
    if words[1] == "daemon":
        return "daemon"
    if words[1] == "top" and "-b" not in words:
        return "tty"
    if words[1] in ("record", "profile") and "-p" in words and "--duration" not in words:
        return "interrupt"
    return None


def wait_metrics(proc, log, secs=30):
    end = time.time() + secs
    while time.time() < end:
        if proc.poll() is not None:
            return False
        if "metrics at http" in open(log).read():
            return True
        time.sleep(0.1)
    return False


def wait_tty(pid, fd, secs):
    """Drains pid's terminal until it exits or secs pass: its status, or None."""
    end = time.time() + secs
    tty_open = True
    while time.time() < end:
        if tty_open:
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                try:
                    os.read(fd, 65536)
                except OSError:
                    tty_open = False   # the terminal closed: the process is ending
        else:
            time.sleep(0.2)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
    return None


def run_tty(c, secs):
    """A live view on a terminal of its own: Ctrl-C after secs; its status."""
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(WORK)
        os.execvpe("bash", ["bash", "-c", "exec " + c], ENV)
    status = wait_tty(pid, fd, secs)
    if status is None:
        os.kill(pid, signal.SIGINT)
        status = wait_tty(pid, fd, 15)
    if status is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        status = -9
    os.close(fd)
    return status


def run_block(where, body):
    global ran
    daemon = None   # (proc, command, log)
    servers = []

    def stop_daemon():
        nonlocal daemon
        if not daemon:
            return
        proc, c, log = daemon
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = "hung"
        if rc != 0:
            failures.append(f"{where}: `{c}` exited {rc} on SIGTERM: {open(log).read()[-300:]}")
        daemon = None

    for raw in commands(body):
        try:
            c = substitute(raw)
        except ValueError as e:
            failures.append(f"{where}: `{raw}`: {e}")
            continue
        ran += 1
        kind = live(c)
        if kind or c.split()[0] in ("spantrace", "build/spantrace"):
            stop_daemon()
        log = os.path.join(WORK, "cmd.log")
        print(f"  $ {c}", flush=True)
        if c.endswith("&"):   # a server for the block's later lines
            slog = os.path.join(WORK, "server%d.log" % len(servers))
            p = subprocess.Popen(["bash", "-c", "exec " + c[:-1]], cwd=WORK, env=ENV,
                                 stdout=open(slog, "w"), stderr=subprocess.STDOUT)
            servers.append(p)
            ready = lambda: re.search(r"listening on|^Attaching", open(slog).read(), re.M)
            end = time.time() + 30
            while time.time() < end and not ready() and p.poll() is None:
                time.sleep(0.1)
            if not ready():
                failures.append(f"{where}: `{raw}` did not start: {open(slog).read()[-300:]}")
                continue
            if "build/infer" in c:
                PIDS["infer"] = str(p.pid)
            continue
        if kind == "daemon":
            p = subprocess.Popen(["bash", "-c", "exec " + c], cwd=WORK, env=ENV, stdout=open(log, "w"),
                                 stderr=subprocess.STDOUT)
            if not wait_metrics(p, log):
                failures.append(f"{where}: `{raw}` did not serve /metrics: {open(log).read()[-300:]}")
                p.kill()
                p.wait()
                continue
            daemon = (p, c, log)
            continue
        if kind == "tty":
            rc = run_tty(c, 3)
        elif kind == "interrupt":
            p = subprocess.Popen(["bash", "-c", "exec " + c], cwd=WORK, env=ENV, stdout=open(log, "w"),
                                 stderr=subprocess.STDOUT)
            # until it has written something traced (an engine profile's
            # programs take seconds to load; its file is flushed each
            # second), at most 20 s, and at least 3
            first = [os.path.join(WORK, f) for f in outputs(c) if f.endswith(".jsonl")]
            start, end = time.time(), time.time() + 20
            while time.time() < end and p.poll() is None and \
                    (time.time() < start + 3 or first and not traced(first[0])):
                time.sleep(0.2)
            p.send_signal(signal.SIGINT)
            try:
                rc = p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = "hung"
        else:
            tries = 15 if daemon else 1   # a daemon's series come with its traffic
            for _ in range(tries):
                try:
                    rc = subprocess.run(["bash", "-o", "pipefail", "-c", c], cwd=WORK, env=ENV,
                                        stdout=open(log, "w"), stderr=subprocess.STDOUT, timeout=300).returncode
                except subprocess.TimeoutExpired:
                    rc = "timed out"
                if rc == 0:
                    break
                time.sleep(1)
        if rc != 0:
            out = open(log).read()[-400:] if os.path.exists(log) else ""
            failures.append(f"{where}: `{raw}` exited {rc}: {out}")
            continue
        for f in outputs(c):
            bad = check_file(f, f"{where}: `{raw}`")
            if bad:
                failures.append(bad)
    stop_daemon()
    if any(c.startswith("perf probe") for c in commands(body)):   # the next block adds them again
        subprocess.run(["perf", "probe", "-q", "-d", "sdt_infer:*"], cwd=WORK, env=ENV,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for p in servers:   # Ctrl-C: bpftrace prints its maps, a server stops
        p.send_signal(signal.SIGINT)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
    PIDS["infer"] = os.environ["EPID"]


def main():
    docs = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))
    only = os.environ.get("ONLY")
    for d in docs:
        for line, marker, body in blocks(os.path.join(ROOT, d)):
            where = f"{d}:{line}"
            if only and only not in where:
                continue
            if marker is None:
                failures.append(f"{where}: a block of commands with no <!-- example: ... --> marker")
            elif marker.startswith("not run:"):
                notrun.append(f"{where}: {marker}")
            elif marker == "run":
                print(f"{where}:", flush=True)
                run_block(where, body)
            else:
                failures.append(f"{where}: unknown marker '{marker}'")
    for n in notrun:
        print("not run:", n)
    for f in failures:
        print("FAIL:", f)
    print(f"{ran} commands run, {len(notrun)} blocks not run (each says why), {len(failures)} failures")
    sys.exit(1 if failures or not ran else 0)


main()
