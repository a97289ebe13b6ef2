#!/usr/bin/env python3
"""The dependency graph of tools/virtiofsd, and whether it has a cycle.

A file depends on another when it includes its header or calls (or reads)
something the other defines.  Calls are read from the compiled objects
(nm: the symbols an object leaves undefined, and those another defines),
so a call made through a macro or an inline counts too; includes are read
from the sources.  x.c and x.h are one node, "x".

The daemon is meant to be layers whose dependencies only point down
(docs/devel/virtiofsd-layers.rst): a cycle means some lower file reaches
back up, and then no file of the cycle can be changed, tested or read
without all the others.  Also checked: a header declares only functions
its own .c defines, so that including a header never means depending on
another file's API.

And the order itself: docs/devel/virtiofsd-layers.rst lists the layers,
top first, in the literal block after "The order, as checked"; each file
may depend only on files of the lines below its own, and files of one
line not on each other.  A file missing from that list, or named there
but not in the tree, fails too: a new file takes its place in the doc.

Prints the graph (each node, the nodes it depends on, and why), then any
cycle, misplaced declaration or upward dependency, and exits 1 if there
is one.

    mk/layers.py [--objdir DIR] [--src DIR] [--dot]
"""

import argparse
import os
import re
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(TOP, "tools", "virtiofsd")
BUILD = os.environ.get("BUILD", os.path.join(TOP, "build"))
OBJDIR = os.path.join(BUILD, "qemu", "tools", "virtiofsd")

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
DOC = os.path.join(TOP, "docs", "devel", "virtiofsd-layers.rst")
ORDER_MARK = "The order, as checked"


def documented_order(path=DOC):
    """[[node, ...], ...]: the layers the doc lists, top first."""
    with open(path) as f:
        text = f.read()
    at = text.find(ORDER_MARK)
    if at < 0:
        sys.exit(f"mk/layers.py: {path} has no \"{ORDER_MARK}\" block")
    lines = text[at:].split("\n")
    # the literal block: indented lines after the paragraph ending in ::
    i = next(k for k, line in enumerate(lines) if line.rstrip().endswith("::"))
    layers = []
    for line in lines[i + 1:]:
        if not line.strip():
            if layers:
                break
            continue
        if not line.startswith(" "):
            break
        layers.append([os.path.splitext(w)[0] for w in line.split()])
    return layers


def order_violations(edges, layers):
    """Upward or sideways dependencies, and files the order misses."""
    level = {}
    out = []
    for k, layer in enumerate(layers):
        for n in layer:
            if n in level:
                out.append(f"ORDER: {n} is listed twice")
            level[n] = k
    for n in sorted(edges):
        if n not in level:
            out.append(f"ORDER: {n} is not in the documented order "
                       f"({os.path.relpath(DOC, TOP)})")
    for n in sorted(level):
        if n not in edges:
            out.append(f"ORDER: {n} is documented but not in the tree")
    for a in sorted(edges):
        for b in sorted(edges[a]):
            if a in level and b in level and level[b] <= level[a]:
                how = "beside" if level[b] == level[a] else "above"
                why = ", ".join(sorted(edges[a][b])[:3])
                out.append(f"ORDER: {a} depends on {b}, {how} it ({why})")
    return out


def sources():
    """{node: [files]} of the daemon's own .c and .h files."""
    nodes = {}
    for f in sorted(os.listdir(SRC)):
        stem, ext = os.path.splitext(f)
        if ext in (".c", ".h"):
            nodes.setdefault(stem, []).append(f)
    return nodes


def objects(objdir, nodes):
    """{node: object file}; fails on a .c without a fresh object."""
    found = {}
    for dirpath, _, files in os.walk(objdir):
        for f in files:
            m = re.match(r"^(.*)\.c\.o$", f)
            if m and m.group(1) in nodes:
                found[m.group(1)] = os.path.join(dirpath, f)
    missing = []
    for node, files in nodes.items():
        c = node + ".c"
        if c not in files:
            continue
        obj = found.get(node)
        # The build compiles build/src's copy (make prepare): the object
        # must be newer than that copy, and the copy what we read here
        built = os.path.join(BUILD, "src", "tools", "virtiofsd", c)
        if not obj:
            missing.append(f"{c}: no object under {objdir}")
        elif not os.path.exists(built) or not same_file(built,
                                                        os.path.join(SRC, c)):
            missing.append(f"{c}: {built} is not this source")
        elif os.path.getmtime(obj) < os.path.getmtime(built):
            missing.append(f"{c}: {obj} is older than its source")
    if missing:
        sys.exit("mk/layers.py: build tools/virtiofsd first (make qemu):\n  " +
                 "\n  ".join(missing))
    return found


def same_file(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def nm(obj):
    """(defined, undefined) global symbols of OBJ."""
    out = subprocess.run(["nm", "-g", obj], check=True, capture_output=True,
                         text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] not in ("U", "w", "v"):
            defined.add(parts[2])
    return defined, undefined


def strip_comments(text):
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)


def declared_functions(header_text):
    """Functions a header declares (prototypes, not static inlines)."""
    text = strip_comments(header_text)
    # Macro bodies are no declarations
    text = re.sub(r"^\s*#.*?(?<!\\)$", " ", text, flags=re.M | re.S)
    # Nor are GLib's declaration macros, which end without a semicolon
    text = re.sub(r"\bG_[A-Z_]+\([^)]*\)", ";", text)
    names = set()
    for stmt in re.split(r"[;{}]", text):
        stmt = " ".join(stmt.split())
        if not stmt or "static" in stmt.split() or "typedef" in stmt.split():
            continue
        m = re.match(r"^[A-Za-z_][\w\s\*]*?\b(\w+)\s*\(", stmt)
        if m:
            names.add(m.group(1))
    return names


def main():
    global SRC
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objdir", default=OBJDIR)
    ap.add_argument("--src", default=SRC,
                    help="the sources the objects were built from")
    ap.add_argument("--dot", action="store_true",
                    help="print the graph for graphviz, nothing else")
    args = ap.parse_args()
    SRC = args.src

    nodes = sources()
    objs = objects(args.objdir, nodes)
    syms = {n: nm(o) for n, o in objs.items()}
    owner = {}
    for n, (defined, _) in syms.items():
        for s in defined:
            owner[s] = n

    # edges[a][b] = set of reasons
    edges = {n: {} for n in nodes}
    for n, files in nodes.items():
        for f in files:
            with open(os.path.join(SRC, f)) as fh:
                text = fh.read()
            for inc in INCLUDE.findall(text):
                stem = os.path.splitext(os.path.basename(inc))[0]
                if stem in nodes and stem != n and \
                        os.path.exists(os.path.join(SRC, inc)):
                    edges[n].setdefault(stem, set()).add(f"#include {inc}")
    for n, (_, undefined) in syms.items():
        for s in undefined:
            m = owner.get(s)
            if m and m != n:
                edges[n].setdefault(m, set()).add(s)

    if args.dot:
        print("digraph virtiofsd {")
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f'  "{a}" -> "{b}";')
        print("}")
        return 0

    print("tools/virtiofsd: who depends on whom (includes, and symbols "
          "from the objects)")
    for a in sorted(edges):
        deps = edges[a]
        print(f"{a}: " + (", ".join(sorted(deps)) if deps else "-"))
        for b in sorted(deps):
            calls = sorted(r for r in deps[b] if not r.startswith("#"))
            incs = sorted(r for r in deps[b] if r.startswith("#"))
            why = incs + calls[:6] + ([f"... {len(calls) - 6} more"]
                                      if len(calls) > 6 else [])
            print(f"    -> {b}: {', '.join(why)}")

    failed = False
    for scc in strongly_connected(edges):
        if len(scc) > 1:
            failed = True
            print(f"CYCLE among {len(scc)} files: {' '.join(sorted(scc))}")
            for a in sorted(scc):
                for b in sorted(edges[a]):
                    if b in scc:
                        print(f"    {a} -> {b}: "
                              f"{', '.join(sorted(edges[a][b])[:4])}")

    for n, files in sorted(nodes.items()):
        if n + ".h" not in files:
            continue
        with open(os.path.join(SRC, n + ".h")) as fh:
            declared = declared_functions(fh.read())
        mine = syms.get(n, (set(), set()))[0]
        for f in sorted(declared - mine):
            where = owner.get(f)
            if where:
                failed = True
                print(f"MISPLACED: {n}.h declares {f}(), defined in "
                      f"{where}.c")
    for v in order_violations(edges, documented_order()):
        failed = True
        print(v)
    print("FAIL" if failed else "OK: no cycle, each header declares its "
          "own file's functions, every dependency points down the "
          "documented order")
    return 1 if failed else 0


def strongly_connected(edges):
    """Tarjan's strongly connected components of EDGES."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = set()
            while True:
                w = stack.pop()
                on.discard(w)
                scc.add(w)
                if w == v:
                    break
            out.append(scc)

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    sys.exit(main())
