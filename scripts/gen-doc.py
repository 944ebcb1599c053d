#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write (or --check) the README's GDRHOOK_* and counter tables.

gen-doc.py [--check] README OPT_ROWS

The variable table sits between the markers <!-- config:begin --> and
<!-- config:end -->; its rows are the library's own, in their order, as
OPT_ROWS (scripts/opt-rows.c, built by make: the option files of every
layer, GH_OPT_TABLE, linked with base) prints them.  The counter table
comes from src/face/stats_list.h.
"""
import re
import subprocess
import sys

BEGIN, END = "<!-- config:begin -->", "<!-- config:end -->"


def rows(prog):
    p = subprocess.run([prog], stdout=subprocess.PIPE,
                       universal_newlines=True, env={})
    if p.returncode:
        sys.exit("gen-doc: %s failed" % prog)
    out = [tuple(line.split("\t")) for line in p.stdout.splitlines()]
    if not out or any(len(r) != 3 for r in out):
        sys.exit("gen-doc: %s printed no rows, or a bad one" % prog)
    return out


def table(prog):
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for name, default, doc in rows(prog):
        d = "`%s`" % default if default else "unset"
        lines.append("| `GDRHOOK_%s` | %s | %s |" % (name, d, doc))
    return "\n".join(lines)


SBEGIN, SEND = "<!-- stats:begin -->", "<!-- stats:end -->"


def stats_table(src):
    """The counters of src/face/stats_list.h: X(member, "label", value, "doc")."""
    text = open(src).read()
    pat = re.compile(r'X\((\w+),\s*"([^"]*)",.*?((?:"(?:[^"\\]|\\.)*"\s*\\?\s*)+)\)\s*(?:\\|$)',
                     re.S | re.M)
    lines = ["| `gdrhook_stats` member | `GDRHOOK_STATS` label | meaning |",
             "|---|---|---|"]
    n = 0
    for m in pat.finditer(text):
        doc = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(3)))
        lines.append("| `%s` | %s | %s |" % (m.group(1), m.group(2), doc))
        n += 1
    if n < 10:
        sys.exit("gen-doc: no counter rows in " + src)
    return "\n".join(lines)


def splice(text, begin, end, body, what):
    if begin not in text or end not in text:
        sys.exit("gen-doc: README lacks the %s/%s markers" % (begin, end))
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return head + begin + "\n" + body + "\n" + end + tail


def main():
    check = "--check" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--check"]
    if len(args) != 2:
        sys.exit("usage: gen-doc.py [--check] README OPT_ROWS")
    readme, prog = args
    text = open(readme).read()
    if BEGIN not in text or END not in text:
        sys.exit("gen-doc: %s lacks the %s/%s markers" % (readme, BEGIN, END))
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + BEGIN + "\n" + table(prog) + "\n" + END + tail
    new = splice(new, SBEGIN, SEND, stats_table("src/face/stats_list.h"),
                 "counters")
    if check:
        if new != text:
            sys.exit("gen-doc: README's variable or counter table is stale: run make doc")
        print("gen-doc: README variable and counter tables up to date")
        return
    if new != text:
        open(readme, "w").write(new)


if __name__ == "__main__":
    main()
