#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write (or --check) the README's GDRHOOK_* table from src/base/config.c.

The table sits between the markers <!-- config:begin --> and
<!-- config:end -->; its rows come from the GH_OPT(...) rows of the one
configuration table the library parses.
"""
import re
import sys

BEGIN, END = "<!-- config:begin -->", "<!-- config:end -->"


def rows(src):
    text = open(src).read()
    # GH_OPT(name, default, type, field, doc) and
    # GH_OPT_WORDS(name, default, field, doc, words)
    pat = re.compile(r'GH_OPT(?:\("(\w+)",\s*"([^"]*)",\s*\w+,|_WORDS\("(\w+)",\s*"([^"]*)",)\s*\w+,\s*((?:"(?:[^"\\]|\\.)*"\s*)+)[,)]')
    out = []
    for m in pat.finditer(text):
        name = m.group(1) or m.group(3)
        default = m.group(2) if m.group(1) else m.group(4)
        doc = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(5)))
        out.append((name, default, doc.replace('\\"', '"')))
    if not out:
        sys.exit("gen-doc: no GH_OPT rows in " + src)
    return out


def table(src):
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for name, default, doc in rows(src):
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
    readme = [a for a in sys.argv[1:] if a != "--check"][0]
    text = open(readme).read()
    if BEGIN not in text or END not in text:
        sys.exit("gen-doc: %s lacks the %s/%s markers" % (readme, BEGIN, END))
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + BEGIN + "\n" + table("src/base/config.c") + "\n" + END + tail
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
