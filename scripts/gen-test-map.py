#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The map in tests/README.md from each library source file to the tests
that call into it.

gen-test-map.py README OBJDIR          rewrite the map in README
gen-test-map.py --check README OBJDIR  fail when the map is not current
gen-test-map.py --rule [ROOT]          fail, naming each, on a module of
                                       ROOT/src (default .) with no test
                                       of its name, and on a test in both
                                       folders (RULE, below)

A test calls into a file when its source (tests/unit/test_*.c,
tests/preload/test_*.c and the test headers they include; comments and
strings left out) names a function
or variable that file's object under OBJDIR defines and exports to other
files: an internal function for a unit test, a hooked entry point or a
gdrhook_* function for a preload test.  Calls the library makes on a
test's behalf (a hooked cuMemFree reaching the registry) are not
followed: the map says where a test enters, not everything it runs.
The hooked entry points generated from hooks/*.hooks count as
build/gen/gh_hooks.c.  Each library source file's row also names its
module's own test (RULE)."""
import glob
import os
import re
import subprocess
import sys

BEGIN = "<!-- test map: scripts/gen-test-map.py writes it, make check " \
        "checks it -->"
END = "<!-- end of the test map -->"


RULE = """One test per module, named after it.  The module of
src/<layer>/<stem>.c: *_opts.c is covered by tests/unit/test_opts.c;
ranges_*, rcache_* and evlog_* are the modules ranges, rcache and evlog;
info and info_* are info; every other file is its stem.  A module's test
is tests/unit/test_<module>.c or tests/preload/test_<module>.c, exactly
one of them."""

TEST_DIRS = ("unit", "preload")


def module_of(path):
    """The module of src/<layer>/<stem>.c (RULE)."""
    stem = os.path.basename(path)[:-2]
    if stem.endswith("_opts"):
        return "opts"
    for group in ("ranges", "rcache", "evlog"):
        if stem.startswith(group + "_"):
            return group
    if stem == "info" or stem.startswith("info_"):
        return "info"
    return stem


def own_tests(root, module):
    """The tests named after module: folder/test_<module>, 0 to 2."""
    return ["%s/test_%s" % (d, module) for d in TEST_DIRS
            if os.path.exists(os.path.join(root, "tests", d,
                                           "test_%s.c" % module))]


def modules(root):
    """module -> its source files, for every layer in src/layers."""
    out = {}
    for row in open(os.path.join(root, "src", "layers")):
        m = re.match(r"([a-z]+):", row)
        if not m:
            continue
        for c in sorted(glob.glob(os.path.join(root, "src", m.group(1),
                                               "*.c"))):
            src = os.path.relpath(c, root)
            out.setdefault(module_of(src), []).append(src)
    return out


def rule(root):
    """RULE's faults under root, one line each."""
    faults = []
    for m, srcs in sorted(modules(root).items()):
        if not own_tests(root, m):
            faults.append("module %s (%s): no tests/unit/test_%s.c or "
                          "tests/preload/test_%s.c" %
                          (m, ", ".join(srcs), m, m))
    names = [set(os.path.basename(t) for t in glob.glob(
        os.path.join(root, "tests", d, "test_*.c"))) for d in TEST_DIRS]
    for t in sorted(names[0] & names[1]):
        faults.append("%s is in both tests/unit and tests/preload" % t)
    return faults


def strip_c(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


def defs(objdir):
    """symbol -> source file, for every global the library defines."""
    out = {}
    objs = sorted(glob.glob(os.path.join(objdir, "src", "*", "*.o")))
    objs += sorted(glob.glob(os.path.join(objdir, "gen", "*.o")))
    for o in objs:
        rel = os.path.relpath(o, objdir)[:-2] + ".c"
        src = rel if rel.startswith("src/") else "build/" + rel
        if src.startswith("src/") and not os.path.exists(src):
            continue    # a build folder's object of a file since removed
        nm = subprocess.run(["nm", "--defined-only", "-g", o],
                            capture_output=True, text=True, check=True).stdout
        for row in nm.splitlines():
            col = row.split()
            if len(col) == 3:
                out.setdefault(col[2], src)
    return out


def table(objdir):
    where = defs(objdir)
    calls = {}
    tests = sorted(glob.glob("tests/unit/test_*.c")) + \
        sorted(glob.glob("tests/preload/test_*.c"))
    for t in tests:
        name = os.path.relpath(t, "tests")[:-2]
        text = open(t).read()
        # The test's own helpers (tests/preload/verbs_load.h...) count too.
        for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
            for d in (os.path.dirname(t), "tests"):
                if os.path.exists(os.path.join(d, inc)):
                    text += open(os.path.join(d, inc)).read()
                    break
        unit = name.startswith("unit/")
        for w in set(re.findall(r"\w+", strip_c(text))):
            # A unit test runs without the preload: a hooked or public
            # name it calls is the test double's, not the library's.
            if w in where and (not unit or w.startswith("gh_")):
                calls.setdefault(where[w], set()).add(name)
    files = sorted(set(where.values()))
    rows = ["| source | its module's test | tests that call into it |",
            "|---|---|---|"]
    for f in files:
        if f.startswith("src/"):
            m = module_of(f)
            own = "`%s`: %s" % (m, ", ".join(
                "`%s`" % t for t in own_tests(".", m)) or "none")
        else:
            own = "-"   # generated: not a module (RULE)
        rows.append("| `%s` | %s | %s |" % (f, own, ", ".join(
            "`%s`" % t for t in sorted(calls.get(f, ()))) or "none"))
    return "\n".join([BEGIN] + rows + [END])


def main():
    args = sys.argv[1:]
    if args and args[0] == "--rule":
        if len(args) > 2:
            print(__doc__, file=sys.stderr)
            return 2
        faults = rule(args[1] if len(args) == 2 else ".")
        if faults:
            print("gen-test-map: the module-test rule fails:",
                  file=sys.stderr)
            for f in faults:
                print("  " + f, file=sys.stderr)
            print(RULE, file=sys.stderr)
            return 1
        print("gen-test-map: every module has its own test")
        return 0
    check = bool(args) and args[0] == "--check"
    if check:
        args = args[1:]
    if len(args) != 2 or args[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    readme, objdir = args
    text = open(readme).read()
    if BEGIN not in text or END not in text:
        print("gen-test-map: %s has no test map (%s)" % (readme, BEGIN),
              file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    new = head + table(objdir) + tail
    if check:
        if new != text:
            print("gen-test-map: the test map in %s is not current: run "
                  "scripts/gen-test-map.py %s %s" % (readme, readme, objdir),
                  file=sys.stderr)
            return 1
        print("gen-test-map: the test map in %s is current" % readme)
        return 0
    if new != text:
        with open(readme, "w") as f:
            f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
