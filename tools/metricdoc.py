#!/usr/bin/python3
# tools/metricdoc.py - docs/daemon.md's table of every Prometheus family,
# made from the code that serves them (user/output/metricset.c: each
# family's name and its HELP text), between the markers
# <!-- metric families: begin --> and <!-- metric families: end -->.
#
#   tools/metricdoc.py            rewrite the table
#   tools/metricdoc.py --check    exit 1 if the table is not what the code makes (t_docs.sh)
import re, sys, os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "user/output/metricset.c")
DOC = os.path.join(ROOT, "docs/daemon.md")
BEGIN, END = "<!-- metric families: begin -->", "<!-- metric families: end -->"


def families():
    """(name, help) of each family, in the code's order: the help is the
    first string literal after the name that reads as a sentence."""
    src = open(SRC).read()
    out, seen = [], set()
    for m in re.finditer(r'"(spantrace_[a-z0-9_]+)"', src):
        name = m.group(1)
        if name in seen:
            continue
        # the first string after the name, its adjacent pieces joined as C
        # joins them, that ends a sentence
        helps = [re.sub(r'"\s*"', "", h.group(0))[1:-1] for h in
                 re.finditer(r'"(?:[^"\\]|\\.)*"(?:\s*"(?:[^"\\]|\\.)*")*', src[m.end():m.end() + 600])]
        helps = [h for h in helps if h.endswith(".")]
        if not helps:
            sys.exit(f"metricdoc: no HELP text after {name} in {SRC}")
        seen.add(name)
        out.append((name, helps[0].replace("|", "\\|")))
    return out


def labels():
    """Every label name the code sets."""
    return sorted(set(re.findall(r'\blabel(?:_str)?\(\w+, "([a-z_]+)"', open(SRC).read())))


def table():
    rows = ["| family | HELP (from the code) |", "|---|---|"]
    rows += [f"| `{n}` | {h} |" for n, h in families()]
    return "\n".join([BEGIN, ""] + rows + ["", END])


def main():
    doc = open(DOC).read()
    if BEGIN not in doc or END not in doc:
        sys.exit(f"metricdoc: {DOC} has no {BEGIN} ... {END}")
    new = doc[:doc.index(BEGIN)] + table() + doc[doc.index(END) + len(END):]
    if "--check" in sys.argv[1:]:
        if new != doc:
            sys.exit(f"metricdoc: {DOC}'s family table is not what {SRC} serves (run tools/metricdoc.py)")
        said = re.search(r"^Labels: (.*?)\n\n", doc, re.M | re.S)
        missing = [l for l in labels() if not said or f"`{l}`" not in said.group(1)]
        if missing:
            sys.exit(f"metricdoc: {DOC}'s 'Labels:' paragraph lacks {', '.join(missing)}, which the code sets")
        print(f"ok: {len(families())} families and {len(labels())} labels in {DOC}, as the code serves them")
        return
    open(DOC, "w").write(new)


main()
