#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layers of src/ (src/layers: one folder each, lowest first).

check-layers.py LAYERS OBJDIR      fail on a call between src/ files that
    points up (read from each object file with nm, so a call that a header
    hides is seen too), on an #include that points up or reaches into
    another folder past its one header (<layer>/<layer>.h), and on a .c
    file outside every layer's folder.
check-layers.py --link LAYERS ARCHIVEDIR [CC [FLAGS...]]  link each
    layer's archive (ARCHIVEDIR/libgh-<layer>.a) whole, with those below it
    and nothing else, into a shared object with -z defs: a call that
    points up is an undefined symbol and fails the link.
check-layers.py --includes LAYERS SRCDIR  the include rules alone, on
    the tree SRCDIR (its folders).
check-layers.py --measure [SRCDIR]  the include graph of SRCDIR (default
    src, src/kmod left out) in figures: import loops, arrows that point up
    (against src/layers when SRCDIR is laid out in its folders, else the
    order of its README's table is not known and only loops are counted),
    the largest file and the largest function.  Nothing fails."""
import glob
import os
import re
import subprocess
import sys

INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_layers(path):
    rank, extra = {}, {}
    for line in open(path):
        line = line.split("#")[0].strip()
        if not line:
            continue
        name, units = line.split(":", 1)
        name = name.strip()
        rank[name] = len(rank)
        extra[name] = units.split()
    return rank, extra


def lib_files(srcdir="src"):
    """Every .c and .h of the library below srcdir (not the module)."""
    out = []
    for root, dirs, files in os.walk(srcdir):
        dirs[:] = [d for d in dirs if d != "kmod"]
        out += [os.path.join(root, f) for f in files
                if f.endswith((".c", ".h"))]
    return sorted(out)


def folder_of(path, srcdir="src"):
    rel = os.path.relpath(path, srcdir)
    return rel.split(os.sep)[0] if os.sep in rel else ""


def check_includes(rank, bad, srcdir="src"):
    for f in lib_files(srcdir):
        mine = folder_of(f, srcdir)
        if mine not in rank:
            if f.endswith(".c") or mine:
                bad.append("%s: in no layer's folder (src/layers)" % f)
            continue
        for inc in INC.findall(open(f).read()):
            if "/" not in inc:
                # Same folder, or from include/ and build/gen (data).
                continue
            other, name = inc.split("/", 1)
            if other not in rank:
                continue
            if rank[other] > rank[mine]:
                bad.append("%s (%s) includes %s: points up"
                           % (f, mine, inc))
            elif other != mine and name != other + ".h":
                bad.append("%s (%s) includes %s: another folder's only "
                           "header is %s/%s.h" % (f, mine, inc, other, other))


def check_calls(rank, extra, objdir, bad):
    layer_of = {}
    for name in rank:
        for src in glob.glob("src/%s/*.c" % name):
            layer_of[src[len("src/"):-2]] = name
        for unit in extra[name]:
            layer_of[unit] = name
    defs, uses = {}, {}
    for unit in layer_of:
        path = os.path.join(objdir, unit + ".o") if unit.startswith("gen/") \
            else os.path.join(objdir, "src", unit + ".o")
        if not os.path.exists(path):
            bad.append("%s: no object file (build the library first)" % path)
            continue
        out = subprocess.run(["nm", path], capture_output=True, text=True,
                             check=True).stdout
        u = set()
        for row in out.splitlines():
            col = row.split()
            if len(col) == 3 and col[1] in "TDBRVWC":
                defs[col[2]] = unit
            elif len(col) == 2 and col[0] == "U":
                u.add(col[1])
        uses[unit] = u
    up = {}
    for unit, syms in uses.items():
        for s in syms:
            d = defs.get(s)
            if d and d != unit and rank[layer_of[d]] > rank[layer_of[unit]]:
                up.setdefault((unit, d), []).append(s)
    for (a, b), syms in sorted(up.items()):
        bad.append("%s (%s) calls up into %s (%s): %s" % (
            a, layer_of[a], b, layer_of[b], " ".join(sorted(syms))))
    return len(layer_of)


def include_graph(srcdir):
    files = lib_files(srcdir)
    by_rel = {os.path.relpath(f, srcdir): f for f in files}
    by_base = {}
    for f in files:
        by_base.setdefault(os.path.basename(f), []).append(f)
    graph = {}
    for f in files:
        out = set()
        for inc in INC.findall(open(f).read()):
            here = os.path.join(os.path.dirname(f), inc)
            if here in files:
                out.add(here)
            elif inc in by_rel:
                out.add(by_rel[inc])
            elif len(by_base.get(inc, [])) == 1:
                out.add(by_base[inc][0])
        graph[f] = out
    # A .c and its .h are one unit: an arrow into x.h is an arrow into x.
    def unit(f):
        return f[:-2]
    ugraph = {}
    for f, outs in graph.items():
        ugraph.setdefault(unit(f), set()).update(
            unit(o) for o in outs if unit(o) != unit(f))
    return ugraph


def sccs(graph):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)
    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def largest_function(files):
    """The longest function body, by a brace-depth scan of each .c (its
    name: the last identifier before '(' on the lines that open it)."""
    best = (0, "")
    for f in files:
        if not f.endswith(".c"):
            continue
        text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"),
                      open(f).read(), flags=re.S)
        text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
        text = re.sub(r"'(\\.|[^'\\\n])*'", "''", text)
        lines = text.split("\n")
        depth, start, name = 0, 0, ""
        for n, ln in enumerate(lines):
            opens, closes = ln.count("{"), ln.count("}")
            if depth == 0 and opens > closes:
                head = " ".join(lines[max(0, n - 4):n + 1])
                head = re.sub(r"__attribute__\s*\(\(.*?\)\)", "", head)
                ids = re.findall(r"(\w+)\s*\(", head)
                if ids and "=" not in head.split(ids[-1])[0][-40:]:
                    start, name = n, ids[0] if ids else ""
                    start = n - 1 if lines[n].strip() == "{" else n
                else:
                    name = ""
            depth += opens - closes
            if depth == 0 and name and opens + closes:
                size = n - start + 1
                if size > best[0]:
                    best = (size, "%s:%d %s()" % (f, start + 1, name))
                name = ""
    return best


def check_link(layers_path, adir, cc):
    """Each layer's archive whole with those below it alone, -z defs."""
    import tempfile
    rank, _ = read_layers(layers_path)
    order = sorted(rank, key=rank.get)
    bad, acc = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in order:
            acc.append(os.path.join(adir, "libgh-%s.a" % name))
            out = os.path.join(tmp, "check-%s.so" % name)
            r = subprocess.run(cc + ["-shared", "-o", out, "-Wl,-z,defs",
                                     "-Wl,--whole-archive"] + acc +
                               ["-Wl,--no-whole-archive", "-ldl",
                                "-lpthread"],
                               capture_output=True, text=True)
            if r.returncode:
                und = sorted(set(re.findall(r"undefined reference to `([^']+)'",
                                            r.stderr)))
                bad.append("layer %s does not link with the layers below "
                           "it alone: undefined %s" % (
                               name, " ".join(und) or r.stderr.strip()))
    for b in bad:
        print("check-layers: " + b, file=sys.stderr)
    if bad:
        return 1
    print("check-layers: every layer links with the layers below it alone")
    return 0


def measure(srcdir):
    g = include_graph(srcdir)
    loops = sccs(g)
    print("include graph of %s: %d units (a .c with its .h), %d arrows"
          % (srcdir, len(g), sum(len(v) for v in g.values())))
    print("import loops: %d%s" % (len(loops), "".join(
        "\n  %d units: %s" % (len(c), " ".join(sorted(
            os.path.relpath(u, srcdir) for u in c))) for c in loops)))
    layers = os.path.join(srcdir, "layers")
    if os.path.exists(layers):
        rank, _ = read_layers(layers)
        up = []
        for a, outs in g.items():
            fa = folder_of(a, srcdir)
            for b in outs:
                fb = folder_of(b, srcdir)
                if fa in rank and fb in rank and rank[fb] > rank[fa]:
                    up.append("%s -> %s" % (os.path.relpath(a, srcdir),
                                            os.path.relpath(b, srcdir)))
        print("upward arrows (src/layers): %d%s" % (len(up), "".join(
            "\n  " + u for u in sorted(up))))
    files = lib_files(srcdir)
    big = max(files, key=lambda f: sum(1 for _ in open(f)))
    print("largest file: %s, %d lines" % (
        big, sum(1 for _ in open(big))))
    n, where = largest_function(files)
    print("largest function: %s, %d lines" % (where, n))
    return 0


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--measure":
        return measure(sys.argv[2] if len(sys.argv) > 2 else "src")
    if len(sys.argv) >= 4 and sys.argv[1] == "--link":
        return check_link(sys.argv[2], sys.argv[3],
                          sys.argv[4:] or ["cc"])
    if len(sys.argv) == 4 and sys.argv[1] == "--includes":
        rank, _ = read_layers(sys.argv[2])
        bad = []
        check_includes(rank, bad, sys.argv[3])
        for b in bad:
            print("check-layers: " + b, file=sys.stderr)
        return 1 if bad else 0
    layers_path, objdir = sys.argv[1], sys.argv[2]
    rank, extra = read_layers(layers_path)
    bad = []
    check_includes(rank, bad)
    n = check_calls(rank, extra, objdir, bad)
    for b in bad:
        print("check-layers: " + b, file=sys.stderr)
    if bad:
        return 1
    print("check-layers: %d units in %d layers, no call or include "
          "points up" % (n, len(rank)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
