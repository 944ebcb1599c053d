#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate the hook layer from the lists in hooks/*.hooks.

From one row per intercepted symbol this writes:
  gh_hooks.h       symbol ids, families, actions
  gh_hooks.c       the wrappers and their table (gh_sym_wrappers)
  gh_symtab.c      the symbol table the resolver reads (gh_syms: names,
                   families, versions; no wrapper, so it sits below them)
  libgdrhook.map   the export map (one anonymous node: see style.md)
  symbols.txt      the exported interposed names, for `make check`
  test_symbols.c   one preload test per hooked symbol
"""
import argparse
import os
import re
import sys

ACTIONS = ("alloc", "free", "free_range", "ctx_destroy", "ctx_reset",
           "ctx_release", "ctx_retain", "pool_trim", "pool_destroy",
           "untracked", "manual", "dev_reset", "custom")
KINDS = ("device", "managed", "host", "host_registered", "pool", "vmm", "ipc",
         "graph", "global", "external")
FAMILIES = ("driver", "runtime", "libc", "verbs")


class Row:
    pass


def die(path, lineno, msg):
    sys.exit("%s:%d: %s" % (path, lineno, msg))


def base_name(name):
    return re.sub(r"(_v\d+)?(_pt(sz|ds))?$", "", name)


def parse(paths):
    rows = []
    seen = {}
    for path in paths:
        family = None
        with open(path) as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                if line.startswith("@family"):
                    family = line.split()[1]
                    if family not in FAMILIES:
                        die(path, lineno, "unknown family " + family)
                    continue
                if family is None:
                    die(path, lineno, "row before @family")
                cols = [c.strip() for c in line.split("|")]
                if len(cols) != 4:
                    die(path, lineno, "want 4 columns: name|ret|params|action")
                r = Row()
                r.name, r.ret, params, action = cols
                r.family = family
                r.path, r.lineno = path, lineno
                if r.name in seen:
                    die(path, lineno, "duplicate " + r.name)
                seen[r.name] = r
                r.params = [] if params == "void" else \
                    [p.strip() for p in params.split(",")]
                r.args = []
                for i, p in enumerate(r.params):
                    if p == "..." and i == len(r.params) - 1 and i > 0 \
                            and action == "manual":
                        continue    # variadic (execl): hand-written only
                    m = re.search(r"([A-Za-z_]\w*)\s*$", p)
                    if not m:
                        die(path, lineno, "bad parameter " + p)
                    r.args.append(m.group(1))
                words = action.split()
                r.action = words[0]
                if r.action not in ACTIONS:
                    die(path, lineno, "unknown action " + r.action)
                r.kind = None
                r.opts = {}
                for w in words[1:]:
                    if "=" in w:
                        k, v = w.split("=", 1)
                        r.opts[k] = v
                    elif r.action == "alloc" and w in KINDS:
                        r.kind = w
                    else:
                        die(path, lineno, "bad action word " + w)
                if r.action == "alloc" and (r.kind is None or "ptr" not in r.opts
                                            or "size" not in r.opts):
                    die(path, lineno, "alloc needs KIND ptr= size=")
                if r.action == "custom" and not ("pre" in r.opts or "post" in r.opts):
                    die(path, lineno, "custom needs pre=FN and/or post=FN")
                r.base = base_name(r.name)
                rows.append(r)
    return rows


def proto(r, fname):
    params = ", ".join(r.params) if r.params else "void"
    return "%s %s(%s)" % (r.ret, fname, params)


def typedef(r):
    params = ", ".join(r.params) if r.params else "void"
    return "typedef %s (*gh_pfn_%s)(%s);" % (r.ret, r.name, params)


def call_args(r):
    return ", ".join(r.args)


def wrapper(r):
    sid = "GH_SYM_" + r.name
    o = r.opts
    out = []
    out.append(typedef(r))
    out.append("GH_EXPORT %s;" % proto(r, r.name))
    out.append("GH_EXPORT %s" % proto(r, r.name))
    out.append("{")
    if r.family == "runtime":
        # A runtime may be in a library's local scope: look there too.
        out.append("\tgh_pfn_%s real = (gh_pfn_%s)gh_real_get_for(%s, __builtin_return_address(0));"
                   % (r.name, r.name, sid))
    else:
        out.append("\tgh_pfn_%s real = (gh_pfn_%s)gh_real_get(%s);" % (r.name, r.name, sid))
    out.append("\tstruct gh_call c;")
    # ended as gh_leave would, if an exception unwinds this frame
    out.append("\tstruct gh_call *unw __attribute__((cleanup(gh_call_unwound))) = NULL;")
    out.append("\t%s rc;" % r.ret)
    out.append("")
    out.append("\tif (!real)")
    out.append("\t\treturn %s;" % ("CUDA_ERROR_NOT_INITIALIZED" if r.family == "driver"
                                   else "cudaErrorInitializationError"))
    a = r.action
    out.append("\tswitch (gh_enter(&c, %s)) {" % sid)
    out.append("\tcase GH_PASS:")
    out.append("\t\treturn real(%s);" % call_args(r))
    out.append("\tcase GH_GUARDED:")
    out += ["\t\t" + s for s in guarded(r)]
    out.append("\t}")
    out.append("\tunw = &c;")
    if a == "free" and "stream" in o:
        # A free on a capturing stream becomes a graph free node.
        out.append("\tif (!gh_graph_captured_free(&c, (uint64_t)(uintptr_t)(%s), (uint64_t)(uintptr_t)(%s)))"
                   % (o["stream"], o["ptr"]))
        out.append("\t\tgh_free_pre(&c, (uint64_t)(uintptr_t)(%s));" % o["ptr"])
    elif a == "free":
        out.append("\tgh_free_pre(&c, (uint64_t)(uintptr_t)(%s));" % o["ptr"])
    elif a == "free_range":
        out.append("\tgh_free_range_pre(&c, (uint64_t)(uintptr_t)(%s), (uint64_t)(%s));"
                   % (o["ptr"], o["size"]))
    elif a == "ctx_destroy":
        out.append("\tgh_ctx_destroy_pre(&c, (uint64_t)(uintptr_t)(%s));" % o["ctx"])
    elif a in ("ctx_reset", "ctx_release"):
        out.append("\tgh_%s_pre(&c, (int)(%s));" % (a, o["dev"]))
    elif a == "dev_reset":
        out.append("\tgh_dev_reset_pre(&c);")
    elif a in ("pool_trim", "pool_destroy"):
        out.append("\tgh_pool_pre(&c, (uint64_t)(uintptr_t)(%s));" % o["pool"])
    elif a == "custom" and "pre" in o:
        out.append("\tgh_%s(%s);" % (o["pre"], ", ".join(["&c"] + r.args)))
    out.append("\tgh_real_begin(&c);")
    out.append("\trc = real(%s);" % call_args(r))
    out.append("\tgh_real_end(&c, (int)rc);")
    if a == "alloc":
        if "stream" in o:
            # On a capturing stream: a graph alloc node, nothing backed yet.
            out.append("\tif (rc == 0 && !gh_graph_captured_alloc(&c, (uint64_t)(uintptr_t)(%s), (uint64_t)(uintptr_t)(%s), (uint64_t)(%s)))"
                       % (o["stream"], o["ptr"], o["size"]))
        else:
            out.append("\tif (rc == 0)")
        out.append("\t\tgh_alloc_post(&c, %s);" % alloc_args(r))
        out.append("\telse if (rc != 0)")
        out.append("\t\tgh_failed_post(&c, GH_EV_ALLOC);")
    elif a in ("free", "free_range", "ctx_destroy", "ctx_reset", "ctx_release",
               "dev_reset", "pool_trim", "pool_destroy"):
        out.append("\tgh_%s_post(&c);" % ("pool" if a.startswith("pool") else a))
    elif a == "ctx_retain":
        out.append("\tgh_ctx_retain_post(&c, rc == 0 ? (uint64_t)(uintptr_t)*(%s) : 0, (int)(%s));"
                   % (o["ctxp"], o["dev"]))
    elif a == "untracked":
        out.append("\tgh_untracked_post(&c);")
    elif a == "custom" and "post" in o:
        out.append("\tgh_%s(%s);" % (o["post"], ", ".join(["&c"] + r.args)))
    out.append("\tgh_leave(&c);")
    out.append("\treturn rc;")
    out.append("}")
    return "\n".join(out)


def alloc_args(r):
    o = r.opts
    size = o["size"]
    size_expr = "GH_SIZE_FROM_DRIVER" if size == "@driver" else "(uint64_t)(%s)" % size
    return "GDRHOOK_KIND_%s, (uint64_t)(uintptr_t)(%s), %s, %s, %s" % (
        r.kind.upper(), o["ptr"], size_expr,
        "(uint64_t)(uintptr_t)(%s)" % o["pool"] if "pool" in o else "0",
        "(uint64_t)(%s)" % o["handle"] if "handle" in o else "0")


def guarded(r):
    """Body of the GH_GUARDED case: call through, queue the effect."""
    sid = "GH_SYM_" + r.name
    o = r.opts
    a = r.action
    out = ["rc = real(%s);" % call_args(r)]
    if a in ("alloc", "free") and "stream" in o:
        # On a capturing stream this made a graph node: not replayable.
        out.append("if (rc == 0 && gh_guarded_captured((uint64_t)(uintptr_t)(%s)))"
                   % o["stream"])
        out.append("\tgh_guarded_untrusted(%s);" % sid)
        out.append("else if (rc == 0)")
    elif a in ("alloc", "free"):
        out.append("if (rc == 0)")
    if a == "alloc":
        out.append("\tgh_guarded_alloc(%s, %s);" % (sid, alloc_args(r)))
    elif a == "free":
        out.append("\tgh_guarded_free(%s, (uint64_t)(uintptr_t)(%s), 0, 0);"
                   % (sid, o["ptr"]))
    elif a == "free_range":
        out.append("if (rc == 0)")
        out.append("\tgh_guarded_free(%s, (uint64_t)(uintptr_t)(%s), (uint64_t)(%s), 1);"
                   % (sid, o["ptr"], o["size"]))
    elif a in ("ctx_destroy", "ctx_reset", "ctx_release", "dev_reset",
               "untracked", "custom"):
        out.append("if (rc == 0)")
        out.append("\tgh_guarded_untrusted(%s);" % sid)
    out.append("return rc;")
    return out


EV_OF = {"pool_trim": "GH_EV_POOL_TRIM", "pool_destroy": "GH_EV_POOL_DESTROY"}


def gen_header(rows):
    o = ["/* Generated by scripts/gen-hooks.py from the hooks/ lists: do not edit. */",
         "#ifndef GH_HOOKS_GEN_H", "#define GH_HOOKS_GEN_H", "",
         "enum gh_sym_id {"]
    o += ["\tGH_SYM_%s," % r.name for r in rows]
    o += ["\tGH_SYM_COUNT", "};", ""]
    o += ["enum gh_family {"]
    o += ["\tGH_FAM_%s," % f.upper() for f in FAMILIES]
    o += ["};", "", "enum gh_action {"]
    o += ["\tGH_ACT_%s," % a.upper() for a in ACTIONS]
    o += ["};", "",
          "struct gh_sym {",
          "\tconst char *name;",
          "\tconst char *base;\t/* name without _vN/_ptsz/_ptds */",
          "\tunsigned char family;\t/* enum gh_family */",
          "\tunsigned char action;\t/* enum gh_action */",
          "\tunsigned short ev;\t/* enum gh_ev of pool/ctx rows */",
          "\tconst char *version;\t/* symbol version to resolve, or NULL */",
          "};", "",
          "extern const struct gh_sym gh_syms[GH_SYM_COUNT];",
          "/* The wrapper of each row (hooks layer, gh_hooks.c). */",
          "extern void *const gh_sym_wrappers[GH_SYM_COUNT];", "",
          "#endif", ""]
    return "\n".join(o)


def gen_source(rows):
    o = ["/* Generated by scripts/gen-hooks.py from the hooks/ lists: do not edit. */",
         "#include \"hooks/hooks.h\"", ""]
    # The CUDA headers rename many entry points with macros (cuMemAlloc ->
    # cuMemAlloc_v2); the wrappers must carry the exact exported names.
    for r in rows:
        if r.family in ("driver", "runtime"):
            o.append("#undef %s" % r.name)
            if r.base != r.name:
                o.append("#undef %s" % r.base)
    o.append("")
    for r in rows:
        if r.action == "manual":
            continue
        o.append(wrapper(r))
        o.append("")
    o.append("void *const gh_sym_wrappers[GH_SYM_COUNT] = {")
    for r in rows:
        w = ("gh_manual_" + r.name) if r.action == "manual" else r.name
        o.append("\t[GH_SYM_%s] = (void *)%s," % (r.name, w))
    o.append("};")
    o.append("")
    return "\n".join(o)


def gen_symtab(rows):
    o = ["/* Generated by scripts/gen-hooks.py from the hooks/ lists: do not edit.",
         " * What the resolver reads: no wrapper is named here. */",
         "#include <stddef.h>",
         "#include \"gh_events.h\"",
         "#include \"gh_hooks.h\"", "",
         "const struct gh_sym gh_syms[GH_SYM_COUNT] = {"]
    for r in rows:
        ev = EV_OF.get(r.action, "0")
        ver = '"%s"' % r.opts["version"] if "version" in r.opts else "NULL"
        o.append("\t[GH_SYM_%s] = { \"%s\", \"%s\", GH_FAM_%s, GH_ACT_%s, %s, %s },"
                 % (r.name, r.name, r.base, r.family.upper(),
                    r.action.upper(), ev, ver))
    o.append("};")
    o.append("")
    return "\n".join(o)


def gen_manual(rows):
    o = ["/* Generated by scripts/gen-hooks.py from the hooks/ lists: do not edit.",
         " * Hand-written wrappers (action manual), defined in src/. */",
         "#ifndef GH_MANUAL_GEN_H", "#define GH_MANUAL_GEN_H", "",
         "#include <stdint.h>",
         "#include <stddef.h>", "",
         "/* verbs rows take libibverbs types: declared, never defined here */",
         "struct ibv_context;", "struct ibv_pd;", "struct ibv_mr;", ""]
    for r in rows:
        if r.action == "manual":
            o.append("%s;" % proto(r, "gh_manual_" + r.name))
    o += ["", "/* Hand-written halves of generated wrappers (action custom). */",
          "struct gh_call;"]
    done = set()
    for r in rows:
        if r.action != "custom":
            continue
        for k in ("pre", "post"):
            fn = r.opts.get(k)
            if fn and fn not in done:
                done.add(fn)
                o.append("void gh_%s(%s);" % (fn, ", ".join(["struct gh_call *c"] + r.params)))
    o += ["", "#endif", ""]
    return "\n".join(o)


def gen_map(rows):
    names = sorted(r.name for r in rows)
    o = ["/* Generated by scripts/gen-hooks.py from the hooks/ lists: do not edit.",
         " * One anonymous node: a base-version definition satisfies versioned",
         " * references (ibv_reg_mr@IBVERBS_1.1), a named node would not. */",
         "{", "\tglobal:"]
    o += ["\t\t%s;" % n for n in names]
    o += ["\t\tgdrhook_*;", "\tlocal:", "\t\t*;", "};", ""]
    return "\n".join(o)


def gen_tests(rows):
    o = ["/* Generated by scripts/gen-hooks.py from the hooks/ lists: do not edit.",
         " * One case per hooked symbol: see tests/preload/symbol_case.h. */",
         "#include \"symbol_case.h\"", ""]
    for r in rows:
        if r.family == "verbs":
            # Only the ELF route here: the dlsym/dlvsym routes run against
            # the fake libibverbs in tests/preload/test_verbs.c.
            o.append("TEST(sym_%s)\n{\n\tvoid *self = dlsym(RTLD_DEFAULT, \"%s\");\n\n"
                     "\tCHECK(self != NULL);\n\tCHECK(in_shim(self));\n}\n"
                     % (r.name, r.name))
            continue
        o.append("TEST(sym_%s)\n{\n\tsymbol_case(\"%s\", \"%s\", \"%s\", \"%s\", %d);\n}\n"
                 % (r.name, r.name, r.base, r.family, r.action, len(r.params)))
    o.append("TEST_MAIN()")
    o.append("")
    return "\n".join(o)


def write(path, text):
    old = None
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    if old != text:
        with open(path, "w") as f:
            f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("lists", nargs="+")
    a = ap.parse_args()
    rows = parse(a.lists)
    os.makedirs(a.out, exist_ok=True)
    write(os.path.join(a.out, "gh_hooks.h"), gen_header(rows))
    write(os.path.join(a.out, "gh_hooks.c"), gen_source(rows))
    write(os.path.join(a.out, "gh_symtab.c"), gen_symtab(rows))
    write(os.path.join(a.out, "gh_manual.h"), gen_manual(rows))
    write(os.path.join(a.out, "libgdrhook.map"), gen_map(rows))
    write(os.path.join(a.out, "symbols.txt"),
          "".join(n + "\n" for n in sorted(r.name for r in rows)))
    write(os.path.join(a.out, "test_symbols.c"), gen_tests(rows))


if __name__ == "__main__":
    main()
