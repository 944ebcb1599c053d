# SPDX-License-Identifier: MIT
"""The optional reader in C (_core.c): finding and loading it.

`make` builds it as lib/gdrhook-trace/_core.abi3.so beside the build
tree's gdrhook-trace; `make install` puts it in ../lib/gdrhook-trace from
the installed command.  Without it (no Python headers at build time, a
copied tool, --reader python) the tool reads in pure Python: the same
results, slower.
"""

import importlib.machinery
import importlib.util
import os

ABI = 7                 # _core.c's CORE_ABI: the calls analysis makes
REL = os.path.join("lib", "gdrhook-trace", "_core.abi3.so")


def candidates():
    """Where the module may be, most specific first."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    outer = os.path.realpath(os.path.dirname(pkg))
    if os.path.isfile(outer):           # inside the zipapp: the archive
        d = os.path.dirname(outer)
        return [os.path.join(d, REL), os.path.join(d, "..", REL)]
    top = os.path.dirname(os.path.dirname(outer))   # scripts/tools/..
    return [os.path.join(top, "build", REL)]


def _load(path):
    name = "gdrhook_trace._core"
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    if getattr(mod, "ABI", None) != ABI:
        raise ImportError("built from another version of gdrhook-trace "
                          "(ABI %s, expected %d)" % (getattr(mod, "ABI",
                                                             None), ABI))
    return mod


_cache = {}


def load(mode="auto"):
    """(module, its path) or (None, why not).  mode: "auto" (the C reader
    if there is one), "c" (the C reader, else ImportError(why not)),
    "python" (None)."""
    if mode == "python":
        return None, "--reader python"
    if mode not in _cache:
        paths = [os.path.normpath(p) for p in candidates()]
        why = []
        got = None
        for path in paths:
            if not os.path.isfile(path):
                continue
            try:
                got = (_load(path), path)
                break
            except (ImportError, OSError) as e:
                why.append("%s: %s" % (path, e))
        if got is None:
            got = (None, "; ".join(why) if why else
                   "no C reader at %s" % " or ".join(paths))
        _cache[mode] = got
    got = _cache[mode]
    if got[0] is None and mode == "c":
        raise ImportError(got[1])
    return got
