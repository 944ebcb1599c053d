#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layers of src/ (src/layers: one folder each, lowest first).

check-layers.py [--srcdir DIR] LAYERS OBJDIR [CC [FLAGS...]]  fail on a
    call between src/ files that points up (read from each object file
    with nm, so a call that a header hides is seen too), on an #include
    that points up, reaches into another folder past its one header
    (<layer>/<layer>.h) or goes round the rules with "../", on an #include
    whose functions and variables the file never uses (the object file
    tells; CC and FLAGS, the library's compile flags, let the compiler say
    what each header declares: see unused_includes), and on a .c file
    outside every layer's folder.
check-layers.py --link LAYERS ARCHIVEDIR [CC [FLAGS...]]  link each
    layer's archive (ARCHIVEDIR/libgh-<layer>.a) whole, with those below it
    and nothing else, into a shared object with -z defs: a call that
    points up is an undefined symbol and fails the link.
check-layers.py --includes LAYERS SRCDIR  the include rules alone, on
    the tree SRCDIR (its folders).
check-layers.py --measure [SRCDIR [OBJDIR]]  the include graph of SRCDIR
    (default src, src/kmod left out) in figures: import loops, arrows that
    point up (against src/layers when SRCDIR is laid out in its folders,
    else the order of its README's table is not known and only loops are
    counted), the largest file and the largest function; and, from the
    object files under OBJDIR (default build/obj when it exists), the call
    loops inside each folder: between files and between functions.
    Nothing fails.
check-layers.py --help  this text."""
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
            if ".." in inc.split("/"):
                # "../x/y.h" names a folder's file from the side: the rules
                # below read the first component as the folder.
                bad.append("%s (%s) includes %s: \"../\" goes round the "
                           "layer rules; name the header from src/ (%s)"
                           % (f, mine, inc, "<layer>/<layer>.h"))
                continue
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


def check_calls(rank, extra, objdir, bad, srcdir="src"):
    layer_of = {}
    for name in rank:
        for src in glob.glob(os.path.join(srcdir, name, "*.c")):
            layer_of[os.path.relpath(src, srcdir)[:-2]] = name
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


# Includes the unused-include rule knows of and lets pass, one line each,
# (file, header): what to include instead; files other work is rewriting
# now (the liveness protocol, the memory-window routes).  Each line goes
# when its include does; a line whose include is gone, or used, fails
# the check until it is taken out, so the list only shrinks.
KNOWN_UNUSED = {
    ("pin/mwin.c", "registry/registry.h"):
        "base/base.h and platform/platform.h instead",
    ("rcache/rcache_spankeys.c", "pin/pin.h"): "registry/registry.h instead",
    ("rcache/rcache_wrap.c", "pin/pin.h"): "base/base.h, "
        "platform/platform.h and registry/registry.h instead",
    ("hooks/call.c", "rcache/rcache.h"): "base/base.h, evlog/evlog.h, "
        "platform/platform.h and registry/registry.h instead",
}


def strip_c(text, strings=True):
    """Comments (and string/char literals) out, line count kept."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"),
                  text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    if not strings:
        return text
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])*'", "''", text)


def header_names(text):
    """What a header gives that no object file shows: macros, struct,
    union and enum tags, enum constants, typedefs, static (inline)
    functions; and its extern variables (these the object file shows)."""
    text = strip_c(text)
    names = set(re.findall(r"^\s*#\s*define\s+(\w+)", text, re.M))
    code = re.sub(r"^\s*#.*?(?<!\\)$", "", text, flags=re.M | re.S)
    names |= set(re.findall(r"\b(?:struct|union|enum)\s+(\w+)\s*\{", code))
    for body in re.findall(r"\benum\s*(?:\w+\s*)?\{([^}]*)\}", code):
        names |= set(re.findall(r"(?:^|,)\s*(\w+)", body))
    names |= set(re.findall(r"\bstatic\b[^;{=]*?\b(\w+)\s*\([^;{]*\)\s*\{",
                            code))
    code = re.sub(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)", "", code)
    # Top-level statements: bodies of functions, structs, enums flattened.
    flat, depth = [], 0
    for ch in code:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            flat.append(ch)
    variables = set()
    for stmt in "".join(flat).split(";"):
        stmt = " ".join(stmt.split())
        if stmt.startswith("typedef"):
            m = re.search(r"\(\s*\*\s*(\w+)\s*\)", stmt) or \
                re.search(r"(\w+)\s*(?:\[[^\]]*\]\s*)*$", stmt)
            if m:
                names.add(m.group(1))
        elif re.match(r"extern\b", stmt):
            m = re.search(r"\(\s*\*\s*(\w+)\s*\)", stmt)
            if not m and "(" not in stmt:
                m = re.search(r"(\w+)\s*(?:\[[^\]]*\]\s*)*$", stmt)
            if m:
                variables.add(m.group(1))
    return names, variables


def aux_functions(cfile, cc):
    """{header: (extern functions, static functions)} as the compiler saw
    them while compiling cfile (gcc -aux-info: every function declared in
    every file the unit read, with that file's name)."""
    import tempfile
    fd, aux = tempfile.mkstemp(suffix=".aux")
    os.close(fd)
    try:
        r = subprocess.run(cc + ["-fsyntax-only", "-aux-info", aux, cfile],
                           capture_output=True, text=True)
        text = open(aux).read() if os.path.exists(aux) else ""
    finally:
        if os.path.exists(aux):
            os.unlink(aux)
    if r.returncode:
        err = [ln for ln in r.stderr.splitlines() if "error:" in ln]
        raise RuntimeError((err or ["exit %d" % r.returncode])[0])
    out = {}
    for m in re.finditer(r"^/\* (\S+):\d+:[NO][CF] \*/ (.*?)(\w+) \(",
                         text, re.M):
        path, head, name = os.path.normpath(m.group(1)), m.group(2), m.group(3)
        ext, sta = out.setdefault(path, (set(), set()))
        (sta if re.search(r"\bstatic\b", head) else ext).add(name)
    return out


def unused_includes(rank, objdir, cc, bad, srcdir="src"):
    """The rule "include what you use", judged per .c from its object file:
    an #include "h" is used when the object references (calls, reads,
    defines) a function or variable h declares, or the file's own text
    names a macro, type, enum constant or static function of h.  h counts
    with the headers of its own folder it includes (a layer header gathers
    those), never with another folder's: a file that uses only base/
    through platform/platform.h does not use platform/.
    Exact for a header that declares functions or variables; what it
    cannot judge: a header of macros, types and inline functions only (no
    symbol to look for: passed), a header's own includes (no object file),
    and a use that comes from another header's macro or inline function
    (it counts as a use of the header that declares the symbol)."""
    incdirs = [srcdir] + [a[2:] for a in cc if a.startswith("-I")]
    cc = cc[:1] + ["-I" + srcdir] + cc[1:]
    facts, clos = {}, {}

    def resolve(f, inc):
        for d in [os.path.dirname(f)] + incdirs:
            p = os.path.normpath(os.path.join(d, inc))
            if os.path.exists(p):
                return p
        return None

    def closure(h):
        if h not in clos:
            clos[h] = {h}
            home = folder_of(h, srcdir) if h.startswith(srcdir + os.sep) \
                else None
            for inc in INC.findall(strip_c(open(h).read(), False)):
                g = resolve(h, inc)
                if not g:
                    continue
                gh = folder_of(g, srcdir) if g.startswith(srcdir + os.sep) \
                    else None
                if gh is None or gh == home:
                    clos[h] |= closure(g)
        return clos[h]

    def header(h, aux):
        if h not in facts:
            names, variables = header_names(open(h).read())
            facts[h] = (names, variables)
        names, variables = facts[h]
        ext, sta = aux.get(h, (set(), set()))
        return names | sta, variables | ext

    seen = set()
    for name in rank:
        for f in sorted(glob.glob(os.path.join(srcdir, name, "*.c"))):
            unit = os.path.relpath(f, srcdir)[:-2]
            obj = os.path.join(objdir, "src", unit + ".o")
            if not os.path.exists(obj):
                bad.append("%s: no object file (build the library first)"
                           % obj)
                continue
            syms = set()
            for row in subprocess.run(["nm", obj], capture_output=True,
                                      text=True, check=True).stdout.splitlines():
                syms.add(row.split()[-1])
            text = strip_c(open(f).read())
            words = set(re.findall(r"\w+", re.sub(
                r"^\s*#\s*include.*$", "", text, flags=re.M)))
            try:
                aux = aux_functions(f, cc)
            except RuntimeError as e:
                bad.append("%s: does not compile (%s): the include rule "
                           "needs it to" % (f, e.args[0]))
                seen |= {k for k in KNOWN_UNUSED
                         if k[0] == os.path.relpath(f, srcdir)}
                continue
            rel = os.path.relpath(f, srcdir)
            for inc in INC.findall(strip_c(open(f).read(), False)):
                h = resolve(f, inc)
                if not h:
                    continue
                names, symbols = set(), set()
                for g in closure(h):
                    n, s = header(g, aux)
                    names |= n
                    symbols |= s
                if not symbols:
                    continue	# macros, types, inline functions: not judged
                used = symbols & syms or (names | symbols) & words
                key = (rel, inc)
                if key in KNOWN_UNUSED:
                    seen.add(key)
                    if used:
                        bad.append("%s: uses %s now; take its line out of "
                                   "KNOWN_UNUSED (scripts/check-layers.py)"
                                   % (f, inc))
                    continue
                if not used:
                    bad.append("%s includes %s: uses none of it (no function "
                               "or variable it declares in the object file, "
                               "no name of it in the source)" % (f, inc))
    for rel, inc in sorted(set(KNOWN_UNUSED) - seen):
        bad.append("%s: no longer includes %s; take its line out of "
                   "KNOWN_UNUSED (scripts/check-layers.py)"
                   % (os.path.join(srcdir, rel), inc))


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


def call_graph(objdir, srcdir="src"):
    """Who references whom, read from the object files' disassembly
    (objdump -dr): a call or jump to a named function, and every
    relocation against a symbol (a call to another unit, a function whose
    address is taken).  Nodes are "unit:function"; only functions defined
    in a library unit are kept.  A static function reached only through
    an address relocated against its section (.text+0x..) is not seen."""
    objs = {}
    for f in lib_files(srcdir):
        if f.endswith(".c"):
            unit = os.path.relpath(f, srcdir)[:-2]
            o = os.path.join(objdir, "src", unit + ".o")
            if os.path.exists(o):
                objs[unit] = o
    fn_re = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")
    ref_re = re.compile(r"\s(?:call|jmp)\w*\s+[0-9a-f]+ <([^>+]+)>$")
    rel_re = re.compile(r"^\s+[0-9a-f]+: R_\w+\s+([^\s+-]+)")
    base = lambda n: n.split(".")[0]	# fn.cold, fn.part.0, fn.isra.0
    local, glob_def, data_def, refs = {}, {}, {}, {}
    for unit, o in objs.items():
        nm = subprocess.run(["nm", "--defined-only", o], capture_output=True,
                            text=True, check=True).stdout
        local[unit] = set()
        for row in nm.splitlines():
            col = row.split()
            if len(col) == 3 and col[1] in "Tt":
                local[unit].add(base(col[2]))
                if col[1] == "T":
                    glob_def[col[2]] = unit
            elif len(col) == 3 and col[1] in "DBRVC":
                data_def[col[2]] = unit
        out = subprocess.run(["objdump", "-dr", "--no-show-raw-insn", o],
                             capture_output=True, text=True, check=True).stdout
        cur = None
        for line in out.splitlines():
            m = fn_re.match(line)
            if m:
                cur = (unit, base(m.group(1)))
                refs.setdefault(cur, set())
                continue
            if cur is None:
                continue
            m = ref_re.search(line) or rel_re.match(line)
            if m:
                refs[cur].add(base(m.group(1)))
    graph, shared = {}, {}
    for (unit, fn), names in refs.items():
        node = "%s:%s" % (unit, fn)
        graph.setdefault(node, set())
        for n in names:
            if n in local[unit]:
                graph[node].add("%s:%s" % (unit, n))
            elif n in glob_def:
                graph[node].add("%s:%s" % (glob_def[n], n))
            elif n in data_def and data_def[n] != unit:
                shared.setdefault(unit, set()).add(data_def[n])
    return graph, shared


def call_loops(objdir, srcdir="src"):
    """Call loops inside one folder: between files (a file calls into
    another that calls back into it, maybe through others), the same with
    a use of another file's variable counted as a call (files that share
    one writable global), and between functions (mutual recursion, and a
    function that calls itself)."""
    g, shared = call_graph(objdir, srcdir)
    folder = lambda node: node.split("/")[0] if "/" in node else ""
    fg = {}
    for a, outs in g.items():
        for b in outs:
            fa, fb = a.split(":")[0], b.split(":")[0]
            if fa != fb and folder(fa) == folder(fb):
                fg.setdefault(fa, set()).add(fb)
    fng = {a: {b for b in outs if folder(a) == folder(b)}
           for a, outs in g.items()}
    selfrec = sorted(a for a, outs in g.items() if a in outs)
    dg = {a: set(outs) for a, outs in fg.items()}
    for a, outs in shared.items():
        dg.setdefault(a, set()).update(b for b in outs
                                       if folder(a) == folder(b))
    return sccs(fg), sccs(dg), sccs(fng), selfrec


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


def measure(srcdir, objdir=None):
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
    if objdir is None:
        print("call loops: not measured (no object files: build first, "
              "or name OBJDIR)")
        return 0
    floops, dloops, fnloops, selfrec = call_loops(objdir, srcdir)
    print("call loops between the files of one folder (%s): %d%s" % (
        objdir, len(floops), "".join(
            "\n  %d files: %s" % (len(c), " ".join(sorted(c)))
            for c in sorted(floops, key=sorted))))
    print("the same, a use of another file's variable counted: %d%s" % (
        len(dloops), "".join(
            "\n  %d files: %s" % (len(c), " ".join(sorted(c)))
            for c in sorted(dloops, key=sorted))))
    print("call loops between functions of one folder: %d%s" % (
        len(fnloops), "".join(
            "\n  %d functions: %s" % (len(c), " ".join(sorted(c)))
            for c in sorted(fnloops, key=sorted))))
    print("functions that call themselves (or take their own address): "
          "%d%s" % (
        len(selfrec), "".join("\n  " + f for f in selfrec)))
    return 0


def default_cc(objdir):
    """The library's include flags when the Makefile passed none."""
    cc = ["cc", "-std=gnu11", "-D_GNU_SOURCE", "-Iinclude", "-Isrc",
          "-I" + os.path.join(os.path.dirname(objdir.rstrip("/")), "gen")]
    for d in (os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"),
                           "include"), "/usr/include"):
        if os.path.exists(os.path.join(d, "cuda.h")):
            return cc + ["-I" + d]
    return cc


def usage(err=None):
    if err:
        print("check-layers: %s (--help says how)" % err, file=sys.stderr)
        return 2
    print(__doc__)
    return 0


def main():
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        return usage("no arguments" if not args else None)
    if args[0] == "--measure":
        if len(args) > 3:
            return usage("--measure takes SRCDIR and OBJDIR at most")
        srcdir = args[1] if len(args) > 1 else "src"
        objdir = args[2] if len(args) > 2 else \
            ("build/obj" if srcdir == "src" and os.path.isdir("build/obj")
             else None)
        return measure(srcdir, objdir)
    if args[0] == "--link":
        if len(args) < 3:
            return usage("--link needs LAYERS and ARCHIVEDIR")
        return check_link(args[1], args[2], args[3:] or ["cc"])
    if args[0] == "--includes":
        if len(args) != 3:
            return usage("--includes needs LAYERS and SRCDIR")
        rank, _ = read_layers(args[1])
        bad = []
        check_includes(rank, bad, args[2])
        for b in bad:
            print("check-layers: " + b, file=sys.stderr)
        return 1 if bad else 0
    srcdir = "src"
    if args[0] == "--srcdir":
        if len(args) < 2:
            return usage("--srcdir needs DIR")
        srcdir, args = args[1], args[2:]
    if len(args) < 2 or args[0].startswith("-"):
        return usage("unknown arguments: %s" % " ".join(args))
    layers_path, objdir = args[0], args[1]
    cc = args[2:] or default_cc(objdir)
    rank, extra = read_layers(layers_path)
    bad = []
    check_includes(rank, bad, srcdir)
    n = check_calls(rank, extra, objdir, bad, srcdir)
    unused_includes(rank, objdir, cc, bad, srcdir)
    for b in bad:
        print("check-layers: " + b, file=sys.stderr)
    if bad:
        return 1
    print("check-layers: %d units in %d layers, no call or include "
          "points up, none goes round by \"../\", none is unused%s" % (
              n, len(rank), " (%d known, KNOWN_UNUSED)" % len(KNOWN_UNUSED)
              if KNOWN_UNUSED else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
