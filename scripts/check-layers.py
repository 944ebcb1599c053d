#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Fail on a call between src/ files that points up the layers of
src/layers: reads what each object file of the library defines and uses
(nm), so a call that a header hides is seen too; and on a .c file of src/
that no layer names.

Usage: check-layers.py LAYERS OBJDIR   (OBJDIR: build/obj)"""
import glob
import os
import subprocess
import sys


def main():
    layers_path, objdir = sys.argv[1], sys.argv[2]
    rank, layer_of = {}, {}
    for line in open(layers_path):
        line = line.split("#")[0].strip()
        if not line:
            continue
        name, files = line.split(":", 1)
        rank[name.strip()] = len(rank)
        for f in files.split():
            layer_of[f] = name.strip()
    bad = []
    for src in sorted(glob.glob("src/*.c")):
        unit = os.path.basename(src)[:-2]
        if unit not in layer_of:
            bad.append("%s: in no layer of %s" % (src, layers_path))
    defs, uses = {}, {}
    for unit in layer_of:
        path = os.path.join(objdir, "src" if "/" not in unit else "",
                            unit + ".o")
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
    for b in bad:
        print("check-layers: " + b, file=sys.stderr)
    if bad:
        return 1
    print("check-layers: %d files in %d layers, no call points up"
          % (len(layer_of), len(rank)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
