#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The map in tests/README.md from each library source file to the tests
that call into it.

gen-test-map.py README OBJDIR          rewrite the map in README
gen-test-map.py --check README OBJDIR  fail when the map is not current

A test calls into a file when its source (tests/unit/test_*.c,
tests/preload/test_*.c and the test headers they include; comments and
strings left out) names a function
or variable that file's object under OBJDIR defines and exports to other
files: an internal function for a unit test, a hooked entry point or a
gdrhook_* function for a preload test.  Calls the library makes on a
test's behalf (a hooked cuMemFree reaching the registry) are not
followed: the map says where a test enters, not everything it runs.
The hooked entry points generated from hooks/*.hooks count as
build/gen/gh_hooks.c."""
import glob
import os
import re
import subprocess
import sys

BEGIN = "<!-- test map: scripts/gen-test-map.py writes it, make check " \
        "checks it -->"
END = "<!-- end of the test map -->"


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
        for w in set(re.findall(r"\w+", strip_c(text))):
            if w in where:
                calls.setdefault(where[w], set()).add(name)
    files = sorted(set(where.values()))
    rows = ["| source | tests that call into it |", "|---|---|"]
    for f in files:
        rows.append("| `%s` | %s |" % (f, ", ".join(
            "`%s`" % t for t in sorted(calls.get(f, ()))) or "none"))
    return "\n".join([BEGIN] + rows + [END])


def main():
    args = sys.argv[1:]
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
