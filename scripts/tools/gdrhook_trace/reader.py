# SPDX-License-Identifier: MIT
"""Reading logs: lines, records checked against the schema, process
images, and an external sort that gives records back in time order.

Nothing here holds a whole log: lines are read a block at a time (each
capped at MAX_LINE bytes) and the sort keeps at most `buffer` small tuples in
memory, spilling sorted runs to a temporary file beyond that.
"""

import glob
import gzip
import heapq
import itertools
import json
import json.scanner
import marshal
import math
import os
import re
import sys
import tempfile

from . import schema

PROG = "gdrhook-trace"
MAX_WARNINGS = 25
MAX_LINE = 1 << 20      # a record is < 4 KiB; anything longer is not one
MAX_NAMES = 1000        # unknown names counted one by one; beyond: "..."
LINE_BITS = 40          # seq = file index << LINE_BITS | line number

EXIT_OK = 0
EXIT_USAGE = 1
EXIT_NO_EVENTS = 2


class BadRecord(Exception):
    pass


class Fatal(Exception):
    """An error that ends the run: message and exit status."""

    def __init__(self, msg, code=EXIT_USAGE):
        Exception.__init__(self, msg)
        self.code = code


# ---------------------------------------------------------------------------
# Diagnostics
# ---------------------------------------------------------------------------

class Diag:
    """Warnings on stderr: one line each, capped, never a traceback."""

    def __init__(self, names, quiet=False):
        self.names = names
        self.quiet = quiet
        self.shown = 0
        self.hidden = 0
        self.once_keys = set()
        self.count = 0

    @property
    def logname(self):
        return ", ".join(self.names)

    def _emit(self, text):
        self.count += 1
        if self.quiet:
            return
        if self.shown >= MAX_WARNINGS:
            self.hidden += 1
            return
        self.shown += 1
        sys.stderr.write(text + "\n")

    def at(self, seq, msg):
        """Warn about the line that `seq` names."""
        name = self.names[seq >> LINE_BITS]
        self._emit("%s: %s:%d: warning: %s" % (
            PROG, name, seq & ((1 << LINE_BITS) - 1), msg))

    def once(self, key, seq, msg):
        if key in self.once_keys:
            return
        if len(self.once_keys) < MAX_NAMES:
            self.once_keys.add(key)
        self.at(seq, msg)

    def general(self, msg):
        self._emit("%s: %s: warning: %s" % (PROG, self.logname, msg))

    def finish(self):
        if self.hidden and not self.quiet:
            sys.stderr.write("%s: %s: warning: %d more warning(s) not shown\n"
                             % (PROG, self.logname, self.hidden))


class ReadStats:
    def __init__(self):
        self.lines = 0
        self.records = 0
        self.bad_lines = 0
        self.truncated_last = False
        self.unknown_events = {}
        self.unknown_fields = {}
        self.newer_version = None


# ---------------------------------------------------------------------------
# Files and lines
# ---------------------------------------------------------------------------

def expand(args):
    """LOG arguments -> file names: '-' is stdin; a pattern that names no
    file as written is expanded as a glob (quoted globs work too)."""
    out = []
    for a in args:
        if a == "-" or os.path.exists(a) or not glob.has_magic(a):
            out.append(a)
            continue
        hits = sorted(glob.glob(a))
        if not hits:
            raise Fatal("no log matches %s" % a)
        out.extend(hits)
    return out


def open_log(path):
    if path == "-":
        return sys.stdin.buffer
    try:
        f = open(path, "rb")
        if f.peek(2)[:2] == b"\x1f\x8b":
            f.close()
            f = gzip.open(path, "rb")
        return f
    except OSError as e:
        raise Fatal("cannot read %s: %s" % (path, e.strerror or e)) from None


BLOCK_BYTES = 1 << 20


def blocks(path):
    """Yield (first line number, data, items): data is a run of whole
    lines, each ended by a newline (items None), or data is None and
    items a list of (lineno, raw bytes without the newline,
    ended_by_newline) for a line longer than MAX_LINE (raw None: it is
    skipped) or the unterminated last line.  Memory: one block and one
    line at most."""
    f = open_log(path)
    try:
        read = f.read
        n = 0
        rest = b""
        skipping = False        # inside a line longer than MAX_LINE
        while True:
            buf = read(BLOCK_BYTES)
            if not buf:
                break
            if skipping:
                i = buf.find(b"\n")
                if i < 0:
                    continue
                buf = buf[i + 1:]
                skipping = False
                yield n, None, [(n, None, True)]
            data = rest + buf if rest else buf
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            if cut:
                yield n + 1, data[:cut], None
                n += data.count(b"\n", 0, cut)
            if len(rest) >= MAX_LINE:
                n += 1
                rest = b""
                skipping = True
        if skipping:
            yield n, None, [(n, None, False)]
        elif rest:
            n += 1
            yield n, None, [(n, rest, False)]
    except (OSError, EOFError, gzip.BadGzipFile, ValueError) as e:
        raise Fatal("cannot read %s: %s" % (path, e)) from None
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def split_block(n0, data):
    """(lineno, raw, True) for each line of a blocks() data block; a line
    longer than MAX_LINE comes back as None, as from blocks()."""
    parts = data.split(b"\n")
    parts.pop()                 # after the last newline: nothing
    return [(n0 + i, None if len(raw) >= MAX_LINE else raw, True)
            for i, raw in enumerate(parts)]


# ---------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------

_BAD = object()


def _chk_int(v):
    if type(v) is int:
        return v
    if type(v) is float and math.isfinite(v) and v == int(v):
        return int(v)
    return _BAD


def _chk_nonneg(v):
    v = _chk_int(v)
    return v if v is _BAD or v >= 0 else _BAD


def _chk_hex(v):
    if type(v) is str:
        if 0 < len(v) <= 34:
            try:
                n = int(v, 16)          # accepts an optional 0x prefix
            except ValueError:
                return _BAD
            return n if n >= 0 else _BAD
        return _BAD
    if type(v) is int and v >= 0:
        return v
    return _BAD


def _chk_str(v):
    return v if type(v) is str else _BAD


def _chk_bool(v):
    return v if type(v) is bool else _BAD


CHECK = {"u": _chk_nonneg, "i": _chk_int, "x": _chk_hex, "s": _chk_str,
         "b": _chk_bool}
PYTYPE = {"u": int, "i": int, "x": str, "s": str, "b": bool}


class Normaliser:
    """Checks decoded JSON values against the schema of their version.

    A record whose fields all have the expected JSON types takes a fast
    path (one comparison of type tuples, cached per key order); anything
    else goes field by field, warning about what it drops.
    """

    def __init__(self, diag, rs):
        self.diag = diag
        self.rs = rs
        self.fast = {}
        self.tables = {}
        for v, tab in schema.SCHEMAS.items():
            self.tables[v] = {
                ev: dict({k: CHECK[ty] for k, ty in e["fields"].items()},
                         **{k: None for k in schema.COMMON})
                for ev, e in tab.items()}

    def _signature(self, version, ev, keys):
        e = schema.SCHEMAS[version].get(ev)
        if e is None:
            return False
        f = dict(schema.COMMON, **e["fields"])
        if "t" not in keys or "pid" not in keys or \
                any(k not in f for k in keys):
            return False
        types = tuple(PYTYPE[f[k]] for k in keys)
        hexk = tuple(k for k in keys if f[k] == "x")
        nonneg = tuple(k for k in keys if f[k] in ("u", "x"))
        return types, hexk, nonneg

    def __call__(self, obj, version, seq):
        """Return a clean record dict, None (ignored), or raise BadRecord."""
        if type(obj) is not dict:
            raise BadRecord("not a JSON object; line ignored")
        ev = obj.get("ev")
        if type(ev) is not str:
            return self.slow(obj, version, seq)
        keys = tuple(obj)
        sk = (version, ev, keys)
        sig = self.fast.get(sk)
        if sig is None:
            sig = self._signature(version, ev, keys)
            if len(self.fast) < 4096:     # hostile logs: no end of shapes
                self.fast[sk] = sig
        if sig and tuple(map(type, obj.values())) == sig[0]:
            try:
                for k in sig[1]:
                    obj[k] = int(obj[k], 16)
                ok = not sig[2] or min(map(obj.__getitem__, sig[2])) >= 0
            except ValueError:
                ok = False
            if ok:
                if "tid" not in obj:
                    obj["tid"] = obj["pid"]
                return obj
        return self.slow(obj, version, seq)

    def slow(self, obj, version, seq):
        diag = self.diag
        rs = self.rs
        try:
            ev = obj["ev"]
            t = obj["t"]
            pid = obj["pid"]
        except KeyError as e:
            raise BadRecord("record has no '%s' field; line ignored"
                            % e.args[0]) from None
        if type(ev) is not str:
            raise BadRecord("'ev' is not a string; line ignored")
        t = _chk_nonneg(t)
        if t is _BAD:
            raise BadRecord("'t' is not an integer; line ignored")
        if type(pid) is not int:
            raise BadRecord("'pid' is not an integer; line ignored")
        tid = obj.get("tid", pid)
        if type(tid) is not int:
            diag.at(seq, "'tid' is not an integer; using the pid")
            tid = pid
        checkers = self.tables[version].get(ev)
        if checkers is None:
            ev = capped(rs.unknown_events, ev)
            rs.unknown_events[ev] = rs.unknown_events.get(ev, 0) + 1
            diag.once(("ev", ev), seq,
                      "unknown event type %s ignored (further ones counted, "
                      "not reported)" % json.dumps(ev)[:60])
            return None
        rec = {"ev": ev, "t": t, "pid": pid, "tid": tid}
        for k, val in obj.items():
            chk = checkers.get(k, _BAD)
            if chk is None:
                continue            # a common field, checked above
            if chk is _BAD:
                k = capped(rs.unknown_fields, k)
                rs.unknown_fields[k] = rs.unknown_fields.get(k, 0) + 1
                diag.once(("field", k), seq,
                          "unknown field %s in a '%s' record ignored "
                          "(further ones counted, not reported)"
                          % (json.dumps(k)[:60], ev))
                continue
            if val is None:
                continue
            v = chk(val)
            if v is _BAD:
                diag.at(seq, "field '%s' of a '%s' record has a bad value; "
                        "field ignored" % (k, ev))
                continue
            rec[k] = v
        return rec


def capped(names, name):
    """`name`, or "..." once `names` holds MAX_NAMES others (a hostile log
    may invent a new name on every line)."""
    if name in names or len(names) < MAX_NAMES:
        return name
    return "..."


def decoder():
    """text (stripped) -> JSON value; ValueError for anything that is
    not one JSON value.  Calls the scanner directly: the wrappers around
    it cost as much as the scanning."""
    scan = json.scanner.make_scanner(json.JSONDecoder())

    def decode(s):
        try:
            obj, end = scan(s, 0)
        except StopIteration:
            raise ValueError("not JSON") from None
        except RecursionError:
            raise ValueError("nested too deeply") from None
        if end != len(s):
            raise ValueError("extra data")
        return obj
    return decode


# The layout the library writes for allocation records (the `mem` family,
# hooks/events.table), fields in table order, plain ASCII strings, no
# spaces.  A line of exactly this shape is read by one regular expression
# instead of json + Normaliser, to the same dict those would make; any
# other line (other events, escapes, odd numbers) takes the general path.
_U = rb"(0|[1-9][0-9]*)"
_I = rb"(-?(?:0|[1-9][0-9]*))"
_S = rb'"([\x20\x21\x23-\x5b\x5d-\x7e]*)"'
_X = rb'"(0x[0-9a-fA-F]{1,32})"'
_MEM = re.compile(
    rb'\{"t":' + _U + rb',"pid":' + _I + rb',"tid":' + _I +
    rb',"ev":"(alloc|free|restore)","api":' + _S + rb',"ptr":' + _X +
    rb',"size":' + _U + rb',"dev":' + _I + rb',"gen":' + _U +
    rb',"kind":' + _S + rb',"ctx":' + _X + rb',"rc":' + _I +
    rb',"dur_ns":' + _U + rb'(,"tracked":false)?(,"implicit":true)?\}')
# The same, for every line of a block at once (^...$ per line).
_MEM_LINES = re.compile(b"^" + _MEM.pattern + b"$", re.M)
_MEM_FIELDS = ("api", "ptr", "size", "dev", "gen", "kind", "ctx", "rc",
               "dur_ns")


def fast_mem_events(version):
    """{(ev, tracked flag, implicit flag): event name} for the `mem`
    records _MEM may read in this format version (as bytes from the
    line; an absent flag is b"", as findall gives it)."""
    tab = schema.SCHEMAS[version]
    ok = {}
    for ev in ("alloc", "free", "restore"):
        f = tab.get(ev, {}).get("fields", {})
        if any(f.get(k) != ty for k, ty in zip(_MEM_FIELDS, (
                "s", "x", "u", "i", "u", "s", "x", "i", "u"))):
            continue
        for tr in (b"", b',"tracked":false'):
            for im in (b"", b',"implicit":true'):
                if (not tr or f.get("tracked") == "b") and \
                        (not im or f.get("implicit") == "b"):
                    ok[(ev.encode(), tr, im)] = ev
    return ok


def fast_mem(version):
    """raw line -> (ev, t, pid, tid, api, ptr, size, dev, gen, kind, ctx,
    rc, dur_ns, tracked, implicit) for a `mem` record of this format
    version in the library's layout (tracked, implicit: None when the
    flag is absent), or None: read that line the general way."""
    ok = fast_mem_events(version)
    ok = {(e, tr or None, im or None): ev for (e, tr, im), ev in ok.items()}
    match = _MEM.fullmatch
    names = {}

    def parse(raw):
        m = match(raw)
        if m is None:
            return None
        (t, pid, tid, ev, api, ptr, size, dev, gen, kind, ctx, rc, dur,
         tr, im) = m.groups()
        ev = ok.get((ev, tr, im))
        if ev is None:
            return None
        a = names.get(api)
        if a is None:
            a = api.decode("ascii")
            if len(names) < 4096:       # a hostile log: no end of names
                names[api] = a
        k = names.get(kind)
        if k is None:
            k = kind.decode("ascii")
            if len(names) < 4096:
                names[kind] = k
        return (ev, int(t), int(pid), int(tid), a, int(ptr, 16), int(size),
                int(dev), int(gen), k, int(ctx, 16), int(rc), int(dur),
                False if tr is not None else None,
                True if im is not None else None)
    return parse


def mem_record(f, t):
    """The record dict of a fast_mem() tuple, `t` its start time (as
    times() leaves it): what json + Normaliser would have made."""
    r = {"t": t, "pid": f[2], "tid": f[3], "ev": f[0], "api": f[4],
         "ptr": f[5], "size": f[6], "dev": f[7], "gen": f[8], "kind": f[9],
         "ctx": f[10], "rc": f[11], "dur_ns": f[12]}
    if f[13] is not None:
        r["tracked"] = False
    if f[14] is not None:
        r["implicit"] = True
    return r


def times(r, e):
    """(start, effect) of a record: `t` becomes the call's start; the
    effect time orders the replay (an allocation exists once its call
    returned, everything else acts when its call starts)."""
    t = r["t"]
    dur = r.get("dur_ns") or 0
    if e["time"] == "end":
        start = r.get("t_start")
        if start is None or start > t:
            start = max(0, t - dur)
        r["t"] = start
        end = t
    else:
        start = t
        end = t + dur
    return start, (end if r["ev"] in schema.EFFECT_AT_END else start)


# ---------------------------------------------------------------------------
# Process images
# ---------------------------------------------------------------------------

NO_TIME = 1 << 128      # above any time a record can carry


class Proc:
    def __init__(self, index, fidx, pid, inst):
        self.index = index
        self.fidx = fidx
        self.pid = pid
        self.inst = inst            # 0 for the first image of this pid
        self.start = None
        self.exit = None
        self.fork = None
        self.recovered = []         # records of a later process's recovery
        self.nrec = 0
        self.tids = set()
        self.t_first = NO_TIME      # earliest time of any record
        self.t_last = -1            # latest effect time of any record
        self.parent = None          # Proc we were forked from
        self.trace_pid = pid
        self.res = None             # analysis.Result

    @property
    def key(self):
        return "%d" % self.pid if self.inst == 0 else "%d#%d" % (
            self.pid, self.inst + 1)

    @property
    def exe(self):
        if self.start is not None and self.start.get("exe"):
            return self.start["exe"]
        return "?"

    @property
    def t0(self):
        # The earliest record, not only the start record: a record
        # stamped before it must not land before the axes.
        if self.start is not None:
            return min(self.start["t"], self.t_first)
        return self.t_first if self.t_first != NO_TIME else 0

    @property
    def t_end(self):
        t = self.t_last if self.t_last >= 0 else self.t0
        if self.exit is not None:
            t = max(t, self.exit["t"])
        return t


class Procs:
    """Process images in order of first appearance; a second start record
    of a pid in the same file starts a new image (exec, or pid reuse)."""

    def __init__(self, diag):
        self.diag = diag
        self.list = []
        self.cur = {}               # file index -> {pid: current image}
        self.trace_pids = set()

    def _new(self, fidx, pid, inst):
        p = Proc(len(self.list), fidx, pid, inst)
        # Another image with this pid gets a pid of its own in Perfetto.
        tp = pid
        while tp in self.trace_pids:
            tp += 1000000000
        self.trace_pids.add(tp)
        p.trace_pid = tp
        self.list.append(p)
        self.cur.setdefault(fidx, {})[pid] = p
        return p

    def place(self, fidx, r, seq):
        pid = r["pid"]
        p = self.cur.setdefault(fidx, {}).get(pid)
        ev = r["ev"]
        if ev == "start":
            if p is None:
                p = self._new(fidx, pid, 0)
            elif p.start is not None or p.exit is not None:
                p = self._new(fidx, pid, p.inst + 1)
            p.start = r
            return p
        if p is None:
            p = self._new(fidx, pid, 0)
            if ev != "recovered":   # a dead process's start may be lost
                self.diag.once(("nostart", fidx, pid), seq,
                               "pid %d has records before (or without) a "
                               "start record" % pid)
        if ev == "exit":
            if p.exit is None:
                p.exit = r
        elif ev == "fork" and p.fork is None:
            p.fork = r
        elif ev == "recovered":
            p.recovered.append(r)
        return p

    def link(self):
        """Link fork children to their parent image (any file)."""
        by_pid = {}
        for p in self.list:
            by_pid.setdefault(p.pid, []).append(p)
        for p in self.list:
            if p.fork is None or "parent" not in p.fork:
                continue
            cands = [q for q in by_pid.get(p.fork["parent"], [])
                     if q is not p]
            if not cands:
                self.diag.at(p.fork["_seq"], "pid %d was forked from pid "
                             "%d, which is not in the log; it starts with "
                             "no inherited allocations"
                             % (p.pid, p.fork["parent"]))
                continue
            before = [q for q in cands if q.t0 <= p.fork["t"]]
            parent = before[-1] if before else cands[0]
            q, ok = parent, True
            while q is not None:        # refuse cycles (corrupt logs)
                if q is p:
                    ok = False
                    break
                q = q.parent
            if ok:
                p.parent = parent


# ---------------------------------------------------------------------------
# External sort
# ---------------------------------------------------------------------------

BLOCK = 2048


class Sorter:
    """Sorts tuples (key, seq, ...) with at most `limit` of them in memory:
    full buffers are sorted and written to a temporary file as runs of
    marshalled blocks, then merged."""

    def __init__(self, limit):
        self.limit = max(2, limit)
        self.buf = []
        self.runs = []
        self.tmp = None
        self.count = 0

    def add(self, item):
        self.buf.append(item)
        self.count += 1
        if len(self.buf) >= self.limit:
            self.spill()

    def full(self):
        """Whether the caller that appends to buf should spill now."""
        return len(self.buf) >= self.limit

    def spill(self):
        if not self.buf:
            return
        if self.tmp is None:
            self.tmp = tempfile.TemporaryFile(prefix="gdrhook-trace.")
        self.buf.sort()
        blocks = []
        for i in range(0, len(self.buf), BLOCK):
            data = marshal.dumps(self.buf[i:i + BLOCK])
            blocks.append((self.tmp.tell(), len(data)))
            self.tmp.write(data)
        self.runs.append(blocks)
        self.buf.clear()            # the same list: callers append to it

    def _run(self, blocks):
        tmp = self.tmp
        for off, n in blocks:
            tmp.seek(off)
            yield from marshal.loads(tmp.read(n))

    def __iter__(self):
        if not self.runs:
            self.buf.sort()
            return iter(self.buf)
        self.spill()
        return heapq.merge(*[self._run(b) for b in self.runs])

    def close(self):
        if self.tmp is not None:
            self.tmp.close()
            self.tmp = None


class CSorter:
    """Sorter by the C reader (_core_sort.c): the operations as fixed
    records, not tuples; the C reader's blocks go into it directly
    (`handle`).  An operation it cannot hold (an int past 64 bits) goes to
    a Sorter of its own, merged in at the end."""

    def __init__(self, limit, c):
        self.c = c
        self.limit = max(2, limit)
        self.handle = c.sorter_new(self.limit, tempfile.gettempdir())
        self.rest = Sorter(limit)

    def add(self, item):
        if not self.c.sorter_add(self.handle, item):
            self.rest.add(item)

    def full(self):
        return False            # the C sorter spills by itself

    def spill(self):
        pass

    def _batches(self):
        batch = self.c.sorter_batch
        h = self.handle
        while True:
            items = batch(h, 4096)
            if not items:
                return
            yield items

    def __iter__(self):
        rest = self.rest
        ours = itertools.chain.from_iterable(self._batches())
        if not rest.buf and not rest.runs:
            return ours
        return heapq.merge(ours, iter(rest))

    def close(self):
        self.c.sorter_close(self.handle)
        self.rest.close()
