# SPDX-License-Identifier: MIT
"""What happened in each process image.

Two passes, neither holding the log: while reading, counts that do not
depend on order (calls, bytes, durations, cache counts, warnings) are
taken at once, and the events that change live or pinned memory go to
the external sort as small tuples; the replay then walks those in time
order, keeping only what is live.  An observer (Perfetto, SVG) may watch
both passes.
"""

from . import reader, schema
from .reader import BadRecord, Fatal, EXIT_NO_EVENTS

# Ordered operations: (key, seq, proc index, op, gen, ptr, size, dev, extra)
OP_ALLOC, OP_FREE, OP_RESTORE, OP_PIN, OP_UNPIN, OP_FORK, OP_MARK = range(7)
MAX_ITEMS = 1000        # untrusted/audit records kept for the report

CTX_EVENTS = ("ctx_destroy", "ctx_reset", "ctx_release")
POOL_EVENTS = ("pool_trim", "pool_destroy")
CACHE_EVENTS = ("pin", "unpin", "reg", "dereg", "hit", "miss", "revoke")


class Alloc:
    __slots__ = ("ptr", "size", "dev", "gen", "api", "tid", "kind", "t",
                 "inherited", "seq")

    def __init__(self, ptr, size, dev, gen, api, tid, kind, t, seq,
                 inherited=False):
        self.ptr = ptr
        self.size = size
        self.dev = dev
        self.gen = gen
        self.api = api
        self.tid = tid
        self.kind = kind
        self.t = t
        self.seq = seq
        self.inherited = inherited

    def copy_inherited(self):
        return Alloc(self.ptr, self.size, self.dev, self.gen, self.api,
                     self.tid, self.kind, self.t, self.seq, True)


class ApiStat:
    __slots__ = ("api", "op", "calls", "failed", "bytes", "untracked",
                 "dur_n", "dur_sum", "dur_max")

    def __init__(self, api, op):
        self.api = api
        self.op = op
        self.calls = 0
        self.failed = 0
        self.bytes = 0
        self.untracked = 0
        self.dur_n = 0
        self.dur_sum = 0
        self.dur_max = 0

    def time(self, dur):
        self.dur_n += 1
        self.dur_sum += dur
        if dur > self.dur_max:
            self.dur_max = dur

    def as_json(self):
        d = {"api": self.api, "op": self.op, "calls": self.calls,
             "failed": self.failed, "bytes": self.bytes}
        if self.op == "free":
            d["untracked"] = self.untracked
        if self.dur_n:
            d["time_ns"] = {"n": self.dur_n, "sum": self.dur_sum,
                            "mean": self.dur_sum / self.dur_n,
                            "max": self.dur_max}
        return d


class Series:
    """Live or pinned bytes of one device: the value, its peak, and each
    change handed to the observer (nothing is kept per change)."""

    __slots__ = ("res", "kind", "dev", "value", "peak", "peak_t", "t_first",
                 "t_last", "tag")

    def __init__(self, res, kind, dev, t):
        self.res = res
        self.kind = kind
        self.dev = dev
        self.value = 0
        self.peak = 0
        self.peak_t = t
        self.t_first = t
        self.t_last = t
        self.tag = None         # the observer's, e.g. a formatted head
        obs = res.obs
        if obs is not None:
            obs.counter(res, self, t, 0)

    def set(self, t, v):
        self.value = v
        self.t_last = t
        if v > self.peak:
            self.peak = v
            self.peak_t = t
        obs = self.res.obs
        if obs is not None:
            obs.counter(self.res, self, t, v)


class Result:
    """Everything computed for one process image."""

    def __init__(self, proc, obs):
        self.proc = proc
        self.obs = obs
        self.apis = {}
        self.live = {}          # key -> Alloc
        self.by_ptr = {}        # ptr -> key of the newest live alloc there
        self.pins = {}          # (gen, ptr) -> (size, dev)
        self.pins_of = {}       # gen -> {(gen, ptr): None}, in pins' order
        self.live_s = {}        # dev -> Series
        self.pin_s = {}         # dev -> Series
        self.untrusted = []
        self.untrusted_n = 0
        self.audit = []
        self.audit_n = 0
        self.restores = 0
        self.implicit_frees = 0
        self.unknown_frees = 0
        self.untracked_frees = 0
        self.ctx_dropped = 0
        self.ctx_dropped_bytes = 0
        self.cache = {"pin": 0, "pin_bytes": 0, "unpin": 0,
                      "unpin_implicit": 0, "reg": 0, "reg_hit": 0,
                      "reg_miss": 0, "dereg": 0, "hit": 0, "miss": 0,
                      "revoke": 0}
        self.cache_seen = False
        self.anon = 0
        self.markers = 0

    def stat(self, api, op):
        k = (api, op)
        s = self.apis.get(k)
        if s is None:
            s = self.apis[k] = ApiStat(api, op)
        return s

    # -- first pass: counts that do not depend on order ------------------

    def account(self, r, key, seq, out):
        """Count record `r`; append its ordered operation (if any) to
        `out` as a tuple."""
        ev = r["ev"]
        api = r.get("api") or ev
        if ev in ("alloc", "free", "restore"):
            self.account_mem(ev, api, r.get("ptr"), r.get("size"),
                             r.get("dev"), r.get("gen"), r.get("kind"),
                             r.get("rc", 0), r.get("dur_ns"),
                             r.get("tracked"), r.get("implicit"), r["tid"],
                             key, seq, out)
            return
        dur = r.get("dur_ns")
        rc = r.get("rc", 0)
        pi = self.proc.index
        if ev in CTX_EVENTS or ev in POOL_EVENTS:
            st = self.stat(api, "ctx" if ev in CTX_EVENTS else "pool")
            st.calls += 1
            if rc != 0:
                st.failed += 1
            if dur is not None:
                st.time(dur)
            if ev in CTX_EVENTS:
                self.ctx_dropped += r.get("dropped", 0)
                self.ctx_dropped_bytes += r.get("dropped_bytes", 0)
                st.bytes += r.get("dropped_bytes", 0)
        elif ev == "untrusted":
            self.untrusted_n += 1
            if len(self.untrusted) < MAX_ITEMS:
                self.untrusted.append({"t": r["t"], "api": api,
                                       "why": r.get("why", ""),
                                       "seq": seq})
        elif ev == "audit":
            self.audit_n += 1
            if len(self.audit) < MAX_ITEMS:
                self.audit.append({"t": r["t"], "api": api,
                                   "ptr": r.get("ptr"),
                                   "what": r.get("what", ""), "seq": seq})
        elif ev in CACHE_EVENTS:
            self.cache_event(r, ev, api, dur, rc, key, seq, out)
        elif ev == "fork":
            out((key, seq, pi, OP_FORK, None, None, 0, 0, None))
        # start, exit: nothing to count

    def account_mem(self, ev, api, ptr, size, dev, gen, kind, rc, dur,
                    tracked, implicit, tid, key, seq, out):
        """account() of an alloc, free or restore record; a field the
        record lacks is None."""
        pi = self.proc.index
        if ev == "alloc":
            st = self.stat(api, "alloc")
            st.calls += 1
            if dur is not None:
                st.time(dur)
            if dev is None:
                dev = -1
            if rc != 0:
                st.failed += 1
                out((key, seq, pi, OP_MARK, None, None, 0, dev, "failed"))
                return
            if size is None:
                size = 0
            st.bytes += size
            out((key, seq, pi, OP_ALLOC, gen, ptr, size, dev,
                 (api, tid, "?" if kind is None else kind)))
        elif ev == "free":
            if implicit:
                st = self.stat(api, "implicit free")
                self.implicit_frees += 1
            else:
                st = self.stat(api, "free")
                if dur is not None:
                    st.time(dur)
            st.calls += 1
            if rc != 0:
                st.failed += 1
                return      # still live; a restore record follows
            if tracked is False:
                st.untracked += 1
                self.untracked_frees += 1
                return
            if size is not None:
                st.bytes += size
            out((key, seq, pi, OP_FREE, gen, ptr, 0, 0, None))
        else:
            self.restores += 1
            out((key, seq, pi, OP_RESTORE, gen, ptr, size, dev,
                 (api, tid, kind)))

    def cache_event(self, r, ev, api, dur, rc, key, seq, out):
        self.cache_seen = True
        if dur is not None or ev in ("pin", "unpin", "reg", "dereg"):
            st = self.stat(api, ev)
            st.calls += 1
            if rc != 0:
                st.failed += 1
            if dur is not None:
                st.time(dur)
        if rc != 0:
            return
        c = self.cache
        c[ev] += 1
        pi = self.proc.index
        if ev == "pin":
            size = r.get("size", 0)
            c["pin_bytes"] += size
            self.stat(api, ev).bytes += size
            out((key, seq, pi, OP_PIN, r.get("gen"), r.get("ptr"), size,
                 r.get("dev"), None))
        elif ev in ("unpin", "revoke"):
            out((key, seq, pi, OP_UNPIN, r.get("gen"), r.get("ptr"), 0, 0,
                 None))
        elif ev == "reg":
            if r.get("hit") is True:
                c["reg_hit"] += 1
            elif r.get("hit") is False:
                c["reg_miss"] += 1
        elif ev in ("hit", "miss"):
            out((key, seq, pi, OP_MARK, None, None, 0, r.get("dev", -1), ev))

    # -- second pass: the replay in time order ---------------------------

    def _series(self, table, kind, dev, t):
        s = table.get(dev)
        if s is None:
            s = table[dev] = Series(self, kind, dev, min(self.proc.t0, t))
        return s

    def add_live(self, key, a, t):
        if key in self.live:
            self.drop_live(key, t)
        self.live[key] = a
        if a.ptr is not None:
            self.by_ptr[a.ptr] = key
        s = self._series(self.live_s, "live", a.dev, t)
        s.set(t, s.value + a.size)

    def drop_live(self, key, t):
        a = self.live.pop(key)
        if a.ptr is not None and self.by_ptr.get(a.ptr) == key:
            del self.by_ptr[a.ptr]
        s = self._series(self.live_s, "live", a.dev, t)
        s.set(t, max(0, s.value - a.size))
        return a

    def find_live(self, gen, ptr):
        if gen is not None and gen in self.live:
            return gen
        if ptr is not None:
            k = self.by_ptr.get(ptr)
            if k is not None and k in self.live:
                return k
        return None

    def new_key(self, gen):
        if gen is not None:
            return gen
        self.anon += 1
        return ("anon", self.anon)

    def add_pin(self, key, size, dev, t):
        if key in self.pins:
            self.drop_pin(key, t)
        self.pins[key] = (size, dev)
        self.pins_of.setdefault(key[0], {})[key] = None
        s = self._series(self.pin_s, "pinned", dev, t)
        s.set(t, s.value + size)

    def drop_pin(self, key, t):
        size, dev = self.pins.pop(key)
        same = self.pins_of[key[0]]
        del same[key]
        if not same:
            del self.pins_of[key[0]]
        s = self._series(self.pin_s, "pinned", dev, t)
        s.set(t, max(0, s.value - size))

    def find_pin(self, gen, ptr):
        if (gen, ptr) in self.pins:
            return (gen, ptr)
        if gen is not None:     # the first pin of that generation
            same = self.pins_of.get(gen)
            return next(iter(same)) if same else None
        if ptr is not None:     # no generation: the first pin there
            for k in self.pins:
                if k[1] == ptr:
                    return k
        return None

    def replay(self, item, results):
        t, seq, _, op, gen, ptr, size, dev, extra = item
        obs = self.obs
        # Allocations and frees are most of a log: add_live() and
        # drop_live() written out here.
        if op == OP_ALLOC:
            api, tid, kind = extra
            key = gen if gen is not None else self.new_key(gen)
            live = self.live
            if key in live:
                self.drop_live(key, t)
            live[key] = Alloc(ptr, size, dev, gen, api, tid, kind, t, seq)
            if ptr is not None:
                self.by_ptr[ptr] = key
            s = self.live_s.get(dev)
            if s is None:
                s = self._series(self.live_s, "live", dev, t)
            v = s.value + size
            s.value = v
            s.t_last = t
            if v > s.peak:
                s.peak = v
                s.peak_t = t
            if obs is not None:
                obs.counter(self, s, t, v)
                if obs.marker is not None:
                    obs.marker(self, t, dev, "alloc")
        elif op == OP_FREE:
            live = self.live
            key = gen if gen is not None and gen in live else \
                self.find_live(gen, ptr)
            if key is None:
                self.unknown_frees += 1
                return
            a = live.pop(key)
            if a.ptr is not None and self.by_ptr.get(a.ptr) == key:
                del self.by_ptr[a.ptr]
            s = self.live_s.get(a.dev)
            if s is None:
                s = self._series(self.live_s, "live", a.dev, t)
            v = s.value - a.size
            if v < 0:
                v = 0
            s.value = v
            s.t_last = t
            if v > s.peak:
                s.peak = v
                s.peak_t = t
            if obs is not None:
                obs.counter(self, s, t, v)
                if obs.marker is not None:
                    obs.marker(self, t, a.dev, "free")
            # Pins die with their allocation (the library unpins first).
            same = self.pins_of.get(a.gen) if a.gen is not None else None
            if same:
                for pk in list(same):
                    self.drop_pin(pk, t)
                    self.cache["unpin_implicit"] += 1
        elif op == OP_RESTORE:
            api, tid, kind = extra
            key = self.find_live(gen, ptr)
            old = None
            if key is not None:
                old = self.live[key]
                self.drop_live(key, t)
            a = Alloc(ptr, size if size is not None else
                      (old.size if old else 0),
                      dev if dev is not None else (old.dev if old else -1),
                      gen, old.api if old else api,
                      old.tid if old else tid,
                      kind if kind is not None else (old.kind if old
                                                     else "?"),
                      old.t if old else t, seq,
                      old.inherited if old else False)
            self.add_live(self.new_key(gen), a, t)
        elif op == OP_PIN:
            if dev is None:
                k = self.find_live(gen, ptr)
                dev = self.live[k].dev if k is not None else -1
            self.add_pin((gen, ptr), size, dev, t)
        elif op == OP_UNPIN:
            k = self.find_pin(gen, ptr)
            if k is not None:
                self.drop_pin(k, t)
        elif op == OP_FORK:
            parent = self.proc.parent
            pres = results[parent.index] if parent is not None else None
            if pres is not None:
                for k, a in list(pres.live.items()):
                    self.add_live(k, a.copy_inherited(), t)
        elif obs is not None and obs.marker is not None:
            obs.marker(self, t, dev, extra)

    def finish(self):
        """Close every series at the end of the process."""
        end = self.proc.t_end
        for table in (self.live_s, self.pin_s):
            for s in table.values():
                if s.t_last < end:
                    s.set(end, s.value)

    # -- results --
    def devices(self):
        devs = set(self.live_s) | set(self.pin_s)
        out = {}
        live_end = {}
        for a in self.live.values():
            n, b = live_end.get(a.dev, (0, 0))
            live_end[a.dev] = (n + 1, b + a.size)
        for d in sorted(devs):
            ls = self.live_s.get(d)
            ps = self.pin_s.get(d)
            n, b = live_end.get(d, (0, 0))
            out[d] = {
                "peak_live_bytes": ls.peak if ls else 0,
                "peak_t_ns": (ls.peak_t - self.proc.t0) if ls else None,
                "live_bytes_at_end": b,
                "live_allocs_at_end": n,
                "peak_pinned_bytes": ps.peak if ps else 0,
                "pinned_bytes_at_end": ps.value if ps else 0,
            }
        return out


class Run:
    """One reading of the logs: processes, their results, input counts."""

    def __init__(self, names, diag, rs, procs, results, reader=None):
        self.names = names
        self.diag = diag
        self.rs = rs
        self.procs = procs
        self.results = results
        self.reader = reader or {}  # which code read what (--reader-stats)


class BlockReader:
    """A block of allocation records in the library's layout, all of one
    process image that already has records, counted column by column:
    what the line loop of analyse() and Result.account_mem() do for each
    of them, with the per-line work done by the regular expression and
    map() in C.  Any other block is left to the line loop (False)."""

    def __init__(self, tables, bits, c=None, c_sorter=None):
        self.bits = bits
        self.tables = tables
        self.names = {}
        self.evs = {}           # version -> {(ev, tracked, implicit): ...}
        self.c = c              # the C reader (core.py), or None
        self.c_sorter = c_sorter    # its sorter (reader.CSorter.handle)
        self.c_records = 0      # records the C reader took
        self.c_evs = {}         # version -> its emit()'s evtab
        self.c_mask = {}        # version -> its segments()'s events
        self.c_ops = (OP_ALLOC, OP_FREE, OP_RESTORE, OP_MARK, OP_PIN,
                      OP_UNPIN, "failed")
        for v, tab in tables.items():
            ok = reader.fast_mem_events(v)
            self.evs[v] = {
                k: (ev, tab[ev]["time"] == "end",
                    ev in schema.EFFECT_AT_END, bool(k[1]), bool(k[2]))
                for k, ev in ok.items()}
            if c is not None:
                self.c_evs[v], self.c_mask[v] = self._c_tables(tab, v)
        if c is not None:
            self.stat_ops = ("alloc", "free", "implicit free") + \
                c.EVENTS[3:]

    def _c_tables(self, tab, v):
        """emit()'s evtab and segments()'s mask for format version v:
        alloc, free and restore by their flags (fast_mem_events()), the
        cache events where the schema gives them the library's fields."""
        events = self.c.EVENTS
        evtab = [None] * (12 + len(events) - 3)
        mask = 0
        for (e, tr, im), (ev, end, at_end, _, _) in self.evs[v].items():
            k = events.index(ev)
            evtab[k * 4 + (2 if tr else 0) + (1 if im else 0)] = (
                ev, end, at_end, bool(tab[ev]["call"]))
            mask |= 1 << k
        for k, ev in enumerate(events[3:], 3):
            f = tab.get(ev, {}).get("fields", {})
            if all(f.get(n) == ty for n, ty in self.C_LAYOUTS[ev]):
                evtab[12 + k - 3] = (ev, tab[ev]["time"] == "end",
                                     ev in schema.EFFECT_AT_END,
                                     bool(tab[ev]["call"]))
                mask |= 1 << k
        return tuple(evtab), mask

    def _str(self, col):
        names = self.names
        if len(names) > 4096:
            names.clear()
        for b in set(col):
            if b not in names:
                names[b] = b.decode("ascii")
        return map(names.__getitem__, col)

    def __call__(self, data, n0, fidx, version, cur, rs, out, rec=None,
                 rec_call=None):
        """rec: the observer's record(), given each record as the line
        loop would; rec_call: the observer's record_call(), if it has one,
        given a hooked call's fields instead (no dict made)."""
        rows = reader._MEM_LINES.findall(data)
        n = len(rows)
        if not n or n != data.count(b"\n"):
            return False
        cols = list(zip(*rows))
        pids = set(cols[1])
        if len(pids) != 1:
            return False
        p = cur.get(int(cols[1][0]))
        if p is None or p.res is None:
            return False
        evs = self.evs[version]
        try:
            kinds = [evs[k] for k in zip(cols[3], cols[13], cols[14])]
        except KeyError:
            return False        # a flag this version does not have
        res = p.res
        pi = p.index
        seq = (fidx << self.bits) | n0
        tids = list(map(int, cols[2]))
        t_first, t_last = p.t_first, p.t_last
        stats = {}
        if rec is not None:
            tab = self.tables[version]
            calls = {ev: tab[ev]["call"] for ev in ("alloc", "free", "restore")
                     if ev in tab}
            texts = data.decode("ascii").split("\n")
            ctxs = list(map(int, cols[10], [16] * n))
            line = 0
        for (ev, end, at_end, tracked, implicit), t, tid, api, ptr, size, \
                dev, gen, kind, rc, dur in zip(
                    kinds, map(int, cols[0]), tids, self._str(cols[4]),
                    map(int, cols[5], [16] * n), map(int, cols[6]),
                    map(int, cols[7]), map(int, cols[8]),
                    self._str(cols[9]), map(int, cols[11]),
                    map(int, cols[12])):
            if end:                 # times(), with no t_start
                key = t
                t = t - dur if t > dur else 0
                if not at_end:
                    key = t
            elif at_end:
                key = t + dur
            else:
                key = t
            if t < t_first:
                t_first = t
            if key > t_last:
                t_last = key
            if rec is not None:     # the record reader.mem_record() makes
                if rec_call is not None and calls[ev] and not implicit:
                    rec_call(p, api or ev, ev, rc, t, dur, tid, texts[line])
                else:
                    r = {"t": t, "pid": p.pid, "tid": tid, "ev": ev,
                         "api": api, "ptr": ptr, "size": size, "dev": dev,
                         "gen": gen, "kind": kind, "ctx": ctxs[line],
                         "rc": rc, "dur_ns": dur}
                    if tracked:
                        r["tracked"] = False
                    if implicit:
                        r["implicit"] = True
                    rec(p, r, tab[ev], texts[line])
                line += 1
            api = api or ev
            # Result.account_mem(), every field present
            if ev == "alloc":
                st = stats.get((api, 0))
                if st is None:
                    st = stats[(api, 0)] = res.stat(api, "alloc")
                st.calls += 1
                st.dur_n += 1
                st.dur_sum += dur
                if dur > st.dur_max:
                    st.dur_max = dur
                if rc != 0:
                    st.failed += 1
                    out((key, seq, pi, OP_MARK, None, None, 0, dev,
                         "failed"))
                else:
                    st.bytes += size
                    out((key, seq, pi, OP_ALLOC, gen, ptr, size, dev,
                         (api, tid, kind)))
            elif ev == "free":
                if implicit:
                    st = stats.get((api, 2))
                    if st is None:
                        st = stats[(api, 2)] = res.stat(api,
                                                        "implicit free")
                    res.implicit_frees += 1
                else:
                    st = stats.get((api, 1))
                    if st is None:
                        st = stats[(api, 1)] = res.stat(api, "free")
                    st.dur_n += 1
                    st.dur_sum += dur
                    if dur > st.dur_max:
                        st.dur_max = dur
                st.calls += 1
                if rc != 0:
                    st.failed += 1
                elif tracked:       # the flag: "tracked":false
                    st.untracked += 1
                    res.untracked_frees += 1
                else:
                    st.bytes += size
                    out((key, seq, pi, OP_FREE, gen, ptr, 0, 0, None))
            else:
                res.restores += 1
                out((key, seq, pi, OP_RESTORE, gen, ptr, size, dev,
                     (api, tid, kind)))
            seq += 1
        p.t_first, p.t_last = t_first, t_last
        p.nrec += n
        p.tids.update(tids)
        rs.lines += n
        rs.records += n
        return True

    # The fields of the registration cache's events as the library writes
    # them (hooks/events.table; _core.c's parse_cache()): the C reader
    # takes such an event in a format version whose schema has those
    # fields with those types.
    _LOOKUP = (("api", "s"), ("ptr", "x"), ("size", "u"), ("gen", "u"),
               ("dev", "i"), ("mr", "x"), ("pd", "x"), ("access", "u"),
               ("dur_ns", "u"))
    _PIN = (("ptr", "x"), ("size", "u"), ("gen", "u"), ("dev", "i"),
            ("backend", "s"), ("rc", "i"), ("dur_ns", "u"))
    _REG = (("ptr", "x"), ("size", "u"), ("gen", "u"), ("mr", "x"),
            ("pd", "x"), ("access", "u"), ("rc", "i"), ("dur_ns", "u"))
    _REVOKE = (("ptr", "x"), ("size", "u"), ("gen", "u"), ("dev", "i"))
    C_LAYOUTS = {"hit": _LOOKUP, "miss": _LOOKUP, "pin": _PIN,
                 "unpin": _PIN, "reg": _REG, "dereg": _REG,
                 "revoke": _REVOKE}

    def c_lines(self, name, fidx, vers, cur, rs, rec, slices):
        """Lists of the lines of log `name` (items as reader.blocks()
        gives them) that the C reader leaves to the line loop, in order;
        it takes the rest.  vers[0]: the file's format version, as the
        line loop sets it."""
        segments = self.c.segments
        for n0, data, items in reader.blocks(name):
            if data is None:
                yield items
                continue
            while data:
                v = vers[0]
                rest = b""
                for lo, hi, k, pid, rows in segments(data, reader.MAX_LINE,
                                                     self.c_mask[v]):
                    if rows is not None and self.c_block(
                            data, rows, pid, n0 + k, fidx, v, cur, rs, rec,
                            slices):
                        continue
                    yield reader.split_block(n0 + k, data[lo:hi])
                    if vers[0] != v:
                        # a start record changed the format version: the
                        # rest of the block is cut again by the new one
                        rest = data[hi:]
                        n0 += k + data.count(b"\n", lo, hi)
                        break
                data = rest

    def c_block(self, data, rows, pid, n0, fidx, version, cur, rs, rec,
                slices):
        """Records `rows` (of `data`, line n0 on) by the C reader: True,
        or False when it leaves them to the line loop."""
        p = cur.get(pid)
        if p is None or p.res is None:
            return False
        parts, trace_pid, after = None, 0, None
        if rec is not None:
            if slices is None:
                return False
            sink = slices(p)
            if sink is not None:
                parts, trace_pid, after = sink
        got = self.c.emit(data, rows, self.c_evs[version],
                          (fidx << self.bits) | n0, p.index, self.c_ops,
                          self.c_sorter, parts, trace_pid)
        if got is None:
            return False
        (n, stats, implicit, untracked, restores, counts, t_first, t_last,
         tids) = got
        res = p.res
        ops = self.stat_ops
        for api, opc, calls, failed, nbytes, untr, dur_n, dur_sum, \
                dur_max in stats:
            st = res.stat(api, ops[opc])
            st.calls += calls
            st.failed += failed
            st.bytes += nbytes
            st.untracked += untr
            st.dur_n += dur_n
            st.dur_sum += dur_sum
            if dur_max > st.dur_max:
                st.dur_max = dur_max
        res.implicit_frees += implicit
        res.untracked_frees += untracked
        res.restores += restores
        if counts[0]:           # Result.cache_event()
            res.cache_seen = True
            c = res.cache
            for ev, k in zip(self.c.EVENTS[3:], counts[1:]):
                c[ev] += k
            c["pin_bytes"] += counts[-1]
        if t_first < p.t_first:
            p.t_first = t_first
        if t_last > p.t_last:
            p.t_last = t_last
        p.nrec += n
        p.tids.update(tids)
        rs.lines += n
        rs.records += n
        self.c_records += n
        if after is not None:
            after()
        return True


def analyse(names, pids=None, quiet=False, obs=None, buffer=200000,
            c=None):
    """Read every log in `names`, replay it; return a Run whose results
    are the selected, non-empty process images in order of appearance.
    c: the C reader (core.load()), or None: pure Python."""
    diag = reader.Diag(["<stdin>" if n == "-" else n for n in names], quiet)
    rs = reader.ReadStats()
    norm = reader.Normaliser(diag, rs)
    table = reader.Procs(diag)
    if c is not None:
        sorter = reader.CSorter(buffer, c)
        out = sorter.add
    else:
        sorter = reader.Sorter(buffer)
        out = sorter.buf.append     # spilled every 1024 lines
    decode = reader.decoder()
    bits = reader.LINE_BITS
    tables = schema.SCHEMAS
    at_end = schema.EFFECT_AT_END
    special = ("start", "exit", "fork", "recovered")
    want_records = obs is not None and getattr(obs, "record", None)
    rec_call = want_records and getattr(obs, "record_call", None) or None
    slices = want_records and getattr(obs, "slices", None) or None
    by_block = BlockReader(tables, bits, c,
                           sorter.handle if c is not None else None)
    fasts = {v: reader.fast_mem(v) for v in tables}
    mem_ends = {v: {ev: tab.get(ev, {}).get("time") == "end"
                    for ev in ("alloc", "free", "restore")}
                for v, tab in tables.items()}
    try:
        for fidx, name in enumerate(names):
            version = 1
            tab = tables[version]
            fast = fasts[version]
            mem_end = mem_ends[version]
            cur = table.cur.setdefault(fidx, {})
            if c is not None:
                # The C reader takes the runs of allocation records it
                # can; the lines around them come here, in order (the
                # generator reads on only when the loop asks for more, so
                # a start record is placed before the records after it).
                vers = [version]
                chunks = ((None, None, it) for it in by_block.c_lines(
                    name, fidx, vers, cur, rs, want_records or None,
                    slices))
            else:
                chunks = reader.blocks(name)
            for n0, data, items in chunks:
                if data is not None:
                    if sorter.full():
                        sorter.spill()
                    if by_block(data, n0, fidx, version, cur, rs, out,
                                want_records or None, rec_call):
                        continue
                    items = reader.split_block(n0, data)
                for lineno, raw, nl in items:
                    seq = (fidx << bits) | lineno
                    if not lineno & 1023 and sorter.full():
                        sorter.spill()
                    rs.lines += 1
                    if raw is None:
                        rs.bad_lines += 1
                        diag.at(seq, "line longer than %d bytes; ignored"
                                % reader.MAX_LINE)
                        continue
                    f = fast(raw)
                    if f is not None:
                        # An allocation record in the library's layout: the
                        # steps below for a mem record, without the dict.
                        ev, t, pid, tid = f[0], f[1], f[2], f[3]
                        dur = f[12]
                        if mem_end[ev]:         # times(), with no t_start
                            key = t
                            t = t - dur if t > dur else 0
                            if ev not in at_end:
                                key = t
                        else:
                            key = t + dur if ev in at_end else t
                        p = cur.get(pid)
                        if p is None:
                            p = table.place(fidx, {"pid": pid, "ev": ev}, seq)
                        rs.records += 1
                        p.nrec += 1
                        p.tids.add(tid)
                        if t < p.t_first:
                            p.t_first = t
                        if key > p.t_last:
                            p.t_last = key
                        res = p.res
                        if res is None:
                            res = p.res = Result(p, obs)
                        res.account_mem(ev, f[4] or ev, f[5], f[6], f[7], f[8],
                                        f[9], f[11], dur, f[13], f[14], tid,
                                        key, seq, out)
                        if want_records:
                            want_records(p, reader.mem_record(f, t), tab[ev],
                                         raw.decode("ascii"))
                        continue
                    text = raw.decode("utf-8", "replace").strip()
                    if not text:
                        continue
                    try:
                        obj = decode(text)
                    except ValueError:
                        rs.bad_lines += 1
                        if not nl:
                            rs.truncated_last = True
                            diag.at(seq, "truncated last line (the writer "
                                    "was interrupted?); ignored")
                        else:
                            diag.at(seq, "not valid JSON; line ignored")
                        continue
                    if type(obj) is dict and obj.get("ev") == "start":
                        version = start_version(obj, seq, diag, rs, version)
                        if c is not None:
                            vers[0] = version
                        tab = tables[version]
                        fast = fasts[version]
                        mem_end = mem_ends[version]
                    try:
                        r = norm(obj, version, seq)
                    except BadRecord as e:
                        rs.bad_lines += 1
                        diag.at(seq, str(e))
                        continue
                    if r is None:
                        continue
                    if r is not obj:
                        text = None
                    ev = r["ev"]
                    e = tab[ev]
                    if e["time"] == "start":
                        t = r["t"]
                        key = t + (r.get("dur_ns") or 0) if ev in at_end else t
                    else:
                        t, key = reader.times(r, e)
                    if ev in special:
                        r["_seq"] = seq
                        p = table.place(fidx, r, seq)
                    else:
                        p = cur.get(r["pid"])
                        if p is None:
                            p = table.place(fidx, r, seq)
                    rs.records += 1
                    p.nrec += 1
                    p.tids.add(r["tid"])
                    if t < p.t_first:
                        p.t_first = t
                    if key > p.t_last:
                        p.t_last = key
                    res = p.res
                    if res is None:
                        res = p.res = Result(p, obs)
                    res.account(r, key, seq, out)
                    if want_records:
                        # The line itself is the record's JSON when it passed
                        # the fast path (plain ints, strings and booleans).
                        if type(text) is bytes:
                            text = text.decode("ascii")
                        want_records(p, r, e, text)
        table.link()
        procs = table.list
        if pids is not None:
            sel = [p for p in procs if p.pid in pids]
        else:
            sel = procs
        sel = [p for p in sel if p.nrec]
        if not sel:
            diag.finish()
            if pids is not None and rs.records:
                raise Fatal("no records for pid %s in %s" % (
                    ",".join(str(x) for x in pids), diag.logname),
                    EXIT_NO_EVENTS)
            raise Fatal("%s contains no usable events" % diag.logname,
                        EXIT_NO_EVENTS)
        # Replay the selected images and their ancestors (inheritance).
        active = set()
        for p in sel:
            q = p
            while q is not None and q.index not in active:
                active.add(q.index)
                q = q.parent
        results = [p.res if p.index in active else None for p in procs]
        shown = set(p.index for p in sel)
        for p in procs:
            if p.res is not None and p.index not in shown:
                p.res.obs = None
        if obs is not None:
            obs.prepare([p.res for p in sel])
        for item in sorter:
            res = results[item[2]]
            if res is not None:
                res.replay(item, results)
        for p in sel:
            p.res.finish()
            if p.exit is None and not p.recovered:
                diag.general("pid %d has no exit record (still running, "
                             "killed, or the log is cut short)" % p.pid)
        stats = {"records": rs.records, "c_records": by_block.c_records,
                 "python_sorted": sorter.rest.count if c is not None
                 else None}
    finally:
        sorter.close()
    diag.finish()
    return Run(names, diag, rs, procs, [p.res for p in sel], stats)



def start_version(obj, seq, diag, rs, version):
    """The format version a start record announces (the file's version
    from there on)."""
    v = obj.get("v")
    if v is None:
        diag.at(seq, "start record has no version 'v'; assuming version 1")
        return 1
    if type(v) is not int or v < 1:
        diag.at(seq, "start record has an invalid version %s; assuming "
                "version 1" % str(v)[:20])
        return 1
    if v > schema.LATEST:
        rs.newer_version = max(v, rs.newer_version or 0)
        diag.at(seq, "log format version %d is newer than this tool "
                "supports (%d); reading the parts it knows"
                % (v, schema.LATEST))
        return schema.LATEST
    return v if v in schema.SCHEMAS else 1
