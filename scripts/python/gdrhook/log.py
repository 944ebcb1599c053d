# SPDX-License-Identifier: MIT
"""Event logs (GDRHOOK_TRACE) as rows, or as a pandas DataFrame.

The reading is gdrhook-trace's own (the gdrhook_trace package, installed
beside this one): its format versions, checks, crash-recovered segments
and warnings.  A row is the record as that reader gives it: `ev`, `t`,
`pid`, `tid` and the event's fields (hooks/events.table; `ptr`, `ctx`,
`mr`, `pd`, `pool` as integers), `t` the call's start in CLOCK_MONOTONIC
ns (for a record the library stamps at the end of its call, `t` minus
`dur_ns`, as the tool places it).  Rows come in file order, each log
after the one before.
"""

import os
import sys


def _reader():
    try:
        from gdrhook_trace import analysis, reader
    except ImportError:
        # The build tree: build/python holds both; the source tree: the
        # tool's package in scripts/tools.
        here = os.path.dirname(os.path.abspath(__file__))
        tools = os.path.normpath(os.path.join(here, "..", "..", "tools"))
        if not os.path.isdir(os.path.join(tools, "gdrhook_trace")):
            raise
        sys.path.append(tools)
        from gdrhook_trace import analysis, reader
    return analysis, reader


class _Rows:
    """An analysis observer that keeps every record it is shown."""

    marker = None

    def __init__(self, exe):
        self.rows = []
        self.exe = exe

    def record(self, p, r, e, text=None):
        row = dict(r)
        row.pop("_seq", None)
        if self.exe:
            row["exe"] = p.exe
        self.rows.append(row)

    def prepare(self, results):
        pass

    def counter(self, res, series, t, v):
        pass


def read_log(*paths, quiet=True, exe=False):
    """The records of the logs at `paths` (gzip or plain; several merge),
    as a list of dicts.  exe=True adds each record's program.  quiet=False
    prints the reader's warnings on stderr.  ValueError when no log holds
    a usable record."""
    analysis, reader = _reader()
    obs = _Rows(exe)
    names = reader.expand([os.fspath(p) for p in paths])
    try:
        analysis.analyse(names, quiet=quiet, obs=obs)
    except reader.Fatal as e:
        raise ValueError(str(e)) from None
    return obs.rows


def log_dataframe(*paths, quiet=True, exe=False):
    """read_log() as a pandas DataFrame, one column per field (absent
    fields are NaN/None); ImportError when pandas is not installed."""
    try:
        import pandas
    except ImportError:
        raise ImportError("gdrhook.log_dataframe needs pandas (apt-get "
                          "install python3-pandas); gdrhook.read_log gives "
                          "the same rows as dicts") from None
    return pandas.DataFrame.from_records(read_log(*paths, quiet=quiet,
                                                  exe=exe))
