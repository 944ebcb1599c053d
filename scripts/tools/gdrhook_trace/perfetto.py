# SPDX-License-Identifier: MIT
"""Chrome trace event JSON for ui.perfetto.dev, written while reading.

Slices and instants are written in file order as records are read, and
the live/pinned counters during the replay, a batch of each series at a
time, each batch in time order (the format does not need events sorted).
Times are CLOCK_MONOTONIC microseconds, as the log's; Perfetto shows them
from the trace's first event.
"""

import json
import sys

from . import schema
from .reports import PROG, open_out, write_to

ARG_KEYS = frozenset((
    "ptr", "size", "dev", "gen", "kind", "ctx", "pool", "rc", "dropped",
    "dropped_bytes", "backend", "mr", "pd", "access", "hit", "tracked",
    "why", "what", "parent", "exe", "events", "live", "live_bytes", "v",
    "lost"))
NAMED_INSTANTS = frozenset(("start", "exit", "fork", "restore", "hit",
                            "miss", "revoke"))
FLUSH = 2048
COUNTER_POINTS = 1 << 16    # counter points kept before they are written


def us(ns):
    """Nanoseconds as exact microseconds with three decimals."""
    return "%d.%03d" % divmod(ns, 1000)


def counter_name(kind, dev):
    return "%s bytes %s" % (kind, "host" if dev < 0 else "dev %d" % dev)


class Writer:
    """An analysis observer that writes the trace as it goes."""

    def __init__(self, path, pids, c=None):
        self.path = path
        self.pids = pids
        self.c = c              # the C reader (core.load()), or None
        self.series = []        # each series' points not written yet
        self.pending = 0
        self.f = None
        self.parts = []
        self.enc = json.JSONEncoder(separators=(",", ":"),
                                    check_circular=False).encode
        self.hex = schema.HEX_FIELDS
        self.strs = {}

    def _str(self, v):
        """JSON text of a string (API and event names repeat)."""
        j = self.strs.get(v)
        if j is None:
            j = self.enc(v)
            if len(self.strs) < 10000:
                self.strs[v] = j
        return j

    def _put(self, s):
        parts = self.parts
        parts.append(s)
        if len(parts) >= FLUSH:
            self._flush()

    def _flush(self):
        if self.f is None:
            self.f = open_out(self.path)
            write_to(self.f, self.path,
                     '{"displayTimeUnit":"ns","traceEvents":[\n')
            self.first = True
        if self.parts:
            write_to(self.f, self.path, ("" if self.first else ",\n") +
                     ",\n".join(self.parts))
            self.first = False
            self.parts = []

    # -- first pass --
    def record(self, p, r, e, text=None):
        """One record: a slice for a hooked call, else an instant; its
        arguments are the record as logged (`text`), or its known fields."""
        if self.pids is not None and p.pid not in self.pids:
            return
        ev = r["ev"]
        if text is not None:
            args = text
        else:
            hx = self.hex
            args = self.enc({k: ("0x%x" % v if k in hx else v)
                             for k, v in r.items() if k in ARG_KEYS})
        name = r.get("api") or ev
        if e["call"] and not r.get("implicit"):
            self._slice(p, name, ev, r.get("rc", 0), r["t"],
                        r.get("dur_ns", 0), r["tid"], args)
            return
        if ev == "free":
            name = "implicit free (%s)" % name
        elif ev in NAMED_INSTANTS:
            name = ev
        else:
            name = "%s: %s" % (ev, name)
        self._put('{"ph":"i","s":"t","name":%s,"cat":%s,"ts":%s,"pid":%d,'
                  '"tid":%d,"args":%s}' % (
                      self._str(name), self._str(ev), us(r["t"]),
                      p.trace_pid, r["tid"], args))

    def record_call(self, p, name, ev, rc, t, d, tid, args):
        """record() of a hooked call (not implicit) in the library's
        layout, from its fields: the same slice."""
        if self.pids is None or p.pid in self.pids:
            self._slice(p, name, ev, rc, t, d, tid, args)

    def slices(self, p):
        """For the C reader, which writes the slices of a block of hooked
        calls of `p` itself, as _slice() does: (the list they go to, the
        process's Perfetto pid, what to call after the block: a block's
        text is a megabyte or so, written at once), or None when p's
        records are not wanted."""
        if self.pids is not None and p.pid not in self.pids:
            return None
        return self.parts, p.trace_pid, self._flush

    def _slice(self, p, name, ev, rc, t, d, tid, args):
        if rc:
            name = "%s (rc=%d)" % (name, rc)
        strs = self.strs
        parts = self.parts
        parts.append('{"ph":"X","name":%s,"cat":%s,"ts":%d.%03d,'
                     '"dur":%d.%03d,"pid":%d,"tid":%d,"args":%s}' % (
                         strs.get(name) or self._str(name),
                         strs.get(ev) or self._str(ev),
                         t // 1000, t % 1000, d // 1000, d % 1000,
                         p.trace_pid, tid, args))
        if len(parts) >= FLUSH:
            self._flush()

    # -- replay --
    def prepare(self, results):
        pass

    def counter(self, res, s, t, v):
        # One call per allocation and free: the point is kept with its
        # series (s.tag: [fixed head, t, v, t, v...]) and written with the
        # series' next ones (_counters()).
        pts = s.tag
        if pts is None:
            pts = s.tag = ['{"ph":"C","name":"%s","pid":%d,"tid":0,"ts":' % (
                counter_name(s.kind, s.dev), res.proc.trace_pid)]
            self.series.append(pts)
        pts.append(t)
        pts.append(v if v > 0 else 0)
        self.pending += 1
        if self.pending >= COUNTER_POINTS:
            self._counters()

    def _counters(self):
        """Every series' points so far, as counter events."""
        for pts in self.series:
            if len(pts) > 1:
                text = self.c.counters(pts) if self.c is not None else None
                if text is None:
                    head = pts[0]
                    text = ",\n".join(
                        '%s%s,"args":{"bytes":%d}}' % (head, us(t), v)
                        for t, v in zip(pts[1::2], pts[2::2]))
                self.parts.append(text)
                del pts[1:]
        self.pending = 0
        self._flush()           # a few megabytes: written at once

    marker = None           # no alloc/free/cache markers: the replay skips

    def finish(self, run):
        self._counters()
        for sort_i, res in enumerate(run.results):
            p = res.proc
            P = p.trace_pid
            pname = "%s [%d]" % (p.exe.rsplit("/", 1)[-1], p.pid)
            if p.parent is not None:
                pname += " (fork of %d)" % p.parent.pid
            self._put(self.enc({"ph": "M", "name": "process_name", "pid": P,
                                "tid": 0, "args": {"name": pname}}))
            self._put(self.enc({"ph": "M", "name": "process_sort_index",
                                "pid": P, "tid": 0,
                                "args": {"sort_index": sort_i}}))
            for tid in sorted(p.tids):
                self._put(self.enc({
                    "ph": "M", "name": "thread_name", "pid": P, "tid": tid,
                    "args": {"name": ("main thread %d" % tid
                                      if tid == p.pid else
                                      "thread %d" % tid)}}))
        self._flush()
        other = {"tool": PROG, "exe": run.results[0].proc.exe,
                 "clock": "CLOCK_MONOTONIC", "logs": run.diag.names}
        try:
            write_to(self.f, self.path,
                     '\n],"otherData":%s}\n' % self.enc(other), end=True)
        finally:
            self.close()

    def close(self):
        """After finish() (which closed the file and saw any error) or on
        the way out of an error, which a second one must not hide."""
        f, self.f = self.f, None
        if f is not None and f is not sys.stdout:
            try:
                f.close()
            except OSError:
                pass

