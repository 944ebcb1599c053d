# SPDX-License-Identifier: MIT
"""gdrhook-trace: read gdrhook event logs (JSON Lines) and summarise them,
list leaks, export them for Perfetto / chrome://tracing, or plot them as
SVG.  Standard library only; Python 3.9 or newer.  An optional reader in
C (_core*.c, built by make) reads the library's allocation records and
sorts the replay's operations several times faster, to the same results.

Modules, each calling only those below it:
  cli       the command line
  perfetto  Chrome trace JSON        svg   the SVG plot
  reports   summary and leaks, formatting helpers
  analysis  the per-process accounting and the replay in time order
  reader    lines, records, process images, the external sort
  core      finding and loading the C reader (_core*.c)
  schema    the log format, one table per version
"""


def _version():
    try:
        from ._version import VERSION   # written when the tool is built
        return VERSION
    except ImportError:
        pass
    # Run from a source tree: the tree's one version (src/kmod/dkms.conf).
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    conf = os.path.join(here, "..", "..", "..", "src", "kmod", "dkms.conf")
    try:
        with open(conf, encoding="utf-8") as f:
            for ln in f:
                if ln.startswith("PACKAGE_VERSION="):
                    return ln.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return "unknown"


__version__ = _version()
