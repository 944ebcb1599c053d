# SPDX-License-Identifier: MIT
"""Synthetic gdrhook event logs (format version 1) with their ground truth.

The generator simulates processes in global time order and keeps the
expected numbers itself (independently of gdrhook-trace); records go to
per-thread buffers that are flushed in random order, as the library's
per-thread rings are, so the file is not in time order.
"""

import json
import random

T0 = 5_000_000_000_000          # CLOCK_MONOTONIC ns at the first start
WALL0 = 1_795_000_000_000_000_000

ALLOC_APIS = [
    # (alloc api, free api, kind, on host)
    ("cuMemAlloc_v2", "cuMemFree_v2", "device", False),
    ("cudaMalloc", "cudaFree", "device", False),
    ("cuMemAllocAsync_ptsz", "cuMemFreeAsync_ptsz", "pool", False),
    ("cudaMallocAsync", "cudaFreeAsync", "pool", False),
    ("cuMemMap", "cuMemUnmap", "vmm", False),
    ("cuMemAllocManaged", "cuMemFree_v2", "managed", False),
    ("cuMemHostAlloc", "cuMemFreeHost", "host", True),
]
FREE_OF = {a[0]: a[1] for a in ALLOC_APIS}
SIZES = [4096, 65536, 1 << 20, 3 << 20, 8 << 20, 24 << 20, 64 << 20]


def rnd64k(n):
    return (n + 65535) // 65536 * 65536


class Stat:
    def __init__(self):
        self.calls = 0
        self.failed = 0
        self.bytes = 0
        self.n = 0
        self.sum = 0
        self.max = 0


class SimProc:
    def __init__(self, g, pid, tids, exe, parent=None):
        self.g = g
        self.pid = pid
        self.tids = tids
        self.exe = exe
        self.parent = parent
        self.live = {}          # gen -> dict(ptr,size,dev,api,tid,kind)
        self.pins = {}          # gen -> (size, dev)
        self.revoked = set()
        self.bufs = {t: [] for t in tids}
        self.apis = {}
        self.dev_live = {}
        self.dev_peak = {}
        self.dev_pin = {}
        self.dev_pin_peak = {}
        self.cache = dict(pin=0, pin_bytes=0, unpin=0, reg=0, reg_hit=0,
                          reg_miss=0, dereg=0, hit=0, miss=0, revoke=0)
        self.untrusted = 0
        self.audit = 0
        self.restores = 0
        self.implicit = 0
        self.untracked = 0
        self.events = 0
        self.dropped = 0
        self.t_start = None
        self.calls = 0          # records that become Perfetto slices

    # --- bookkeeping of expected values ---
    def st(self, api, op):
        return self.apis.setdefault((api, op), Stat())

    def timed(self, api, op, dur):
        s = self.st(api, op)
        s.n += 1
        s.sum += dur
        s.max = max(s.max, dur)

    def live_change(self, dev, delta, t):
        v = self.dev_live.get(dev, 0) + delta
        assert v >= 0
        self.dev_live[dev] = v
        pk = self.dev_peak.get(dev, (0, None))
        if v > pk[0]:
            self.dev_peak[dev] = (v, t - self.t_start)
        elif dev not in self.dev_peak:
            self.dev_peak[dev] = pk

    def pin_change(self, dev, delta, t):
        v = self.dev_pin.get(dev, 0) + delta
        assert v >= 0
        self.dev_pin[dev] = v
        if v > self.dev_pin_peak.get(dev, 0):
            self.dev_pin_peak[dev] = v

    # --- record output ---
    def put(self, tid, rec):
        self.events += 1
        self.bufs[tid].append(rec)
        if len(self.bufs[tid]) >= self.g.rng.randint(3, 9):
            self.g.flush(self, tid)


class Gen:
    def __init__(self, seed=7, version=1):
        self.version = version
        self.rng = random.Random(seed)
        self.t = T0
        self.gen = 100
        self.lines = []
        self.addr = {}          # dev -> next fresh address
        self.reuse = {}         # (pid, dev) -> freed addresses (reused)
        self.pending = []       # (proc, tid) buffers flushed late

    def tick(self, lo=1500, hi=40000):
        self.t += self.rng.randint(lo, hi)
        return self.t

    def new_gen(self):
        self.gen += 1
        return self.gen

    def new_ptr(self, p, dev, size):
        pool = self.reuse.setdefault((p.pid, dev), [])
        if pool and self.rng.random() < 0.5:
            return pool.pop(self.rng.randrange(len(pool)))
        base = self.addr.get(dev, 0x7f0000000000 + (dev + 2) * (1 << 36))
        self.addr[dev] = base + rnd64k(size) + 0x200000
        return base

    def write(self, rec):
        if self.version >= 2:
            # Version 2 stamps a record when it took effect: an allocation
            # when its call returned; reg/dereg lost their 'hit' flag.
            if rec["ev"] in ("alloc", "restore"):
                rec = dict(rec, t=rec["t"] + rec.get("dur_ns", 0))
            elif rec["ev"] in ("reg", "dereg"):
                rec = {k: v for k, v in rec.items() if k != "hit"}
        self.lines.append(json.dumps(rec, separators=(",", ":")))

    def flush(self, p, tid):
        for r in p.bufs[tid]:
            self.write(r)
        p.bufs[tid] = []

    def flush_all(self, p):
        tids = list(p.bufs)
        self.rng.shuffle(tids)
        for tid in tids:
            self.flush(p, tid)

    def base(self, p, tid, ev, t=None):
        return {"t": self.tick() if t is None else t, "pid": p.pid,
                "tid": tid, "ev": ev}

    # --- operations ---
    def start(self, p, version=None):
        version = version or self.version
        t = self.tick()
        p.t_start = t
        p.events += 1
        self.write({"ev": "start", "v": version, "t": t, "pid": p.pid,
                    "tid": p.pid, "exe": p.exe,
                    "wall_ns": WALL0 + (t - T0)})

    def alloc(self, p, tid, fail=False, api_i=None, dev=None, size=None):
        r = self.rng
        api, _, kind, host = ALLOC_APIS[r.randrange(len(ALLOC_APIS))
                                        if api_i is None else api_i]
        if dev is None:
            dev = -1 if host else r.choice([0, 1])
        size = size or r.choice(SIZES)
        dur = r.randint(2000, 90000)
        rec = self.base(p, tid, "alloc")
        t = rec["t"]
        p.timed(api, "alloc", dur)
        s = p.st(api, "alloc")
        s.calls += 1
        p.calls += 1
        if fail:
            s.failed += 1
            rec.update(api=api, ptr="0x0", size=size, dev=dev, gen=0,
                       kind=kind, ctx="0x5555aaaa0000", rc=2, dur_ns=dur)
            p.put(tid, rec)
            return None
        gen = self.new_gen()
        ptr = self.new_ptr(p, dev, size)
        s.bytes += size
        rec.update(api=api, ptr="0x%x" % ptr, size=size, dev=dev, gen=gen,
                   kind=kind, ctx="0x5555aaaa%04x" % (dev & 0xffff), rc=0,
                   dur_ns=dur)
        p.put(tid, rec)
        p.live[gen] = dict(ptr=ptr, size=size, dev=dev, api=api, tid=tid,
                           kind=kind)
        # The allocation exists once the call returned; nothing else
        # happens in the meantime.
        self.t = t + dur
        p.live_change(dev, size, self.t)
        return gen

    def unpin(self, p, tid, gen):
        if gen not in p.pins:
            return
        size, dev = p.pins.pop(gen)
        a = p.live[gen]
        dur = self.rng.randint(500, 5000)
        rec = self.base(p, tid, "unpin")
        rec.update(ptr="0x%x" % a["ptr"], size=size, gen=gen, dev=dev,
                   backend="dmabuf", dur_ns=dur)
        p.put(tid, rec)
        p.cache["unpin"] += 1
        s = p.st("unpin", "unpin")
        s.calls += 1
        p.timed("unpin", "unpin", dur)
        p.calls += 1
        p.pin_change(dev, -size, rec["t"])

    def free(self, p, tid, gen, fail=False):
        a = p.live[gen]
        api = FREE_OF[a["api"]]
        self.unpin(p, tid, gen)
        dur = self.rng.randint(2000, 60000)
        rec = self.base(p, tid, "free")
        t = rec["t"]
        p.timed(api, "free", dur)
        s = p.st(api, "free")
        s.calls += 1
        p.calls += 1
        rec.update(api=api, ptr="0x%x" % a["ptr"], size=a["size"],
                   dev=a["dev"], gen=gen, kind=a["kind"],
                   ctx="0x5555aaaa%04x" % (a["dev"] & 0xffff),
                   rc=1 if fail else 0, dur_ns=dur)
        p.put(tid, rec)
        if fail:
            s.failed += 1
            ng = self.new_gen()
            rr = self.base(p, tid, "restore")
            rr.update(api=api, ptr="0x%x" % a["ptr"], size=a["size"],
                      dev=a["dev"], gen=ng, kind=a["kind"],
                      ctx=rec["ctx"], rc=0, dur_ns=0)
            p.put(tid, rr)
            p.live[ng] = p.live.pop(gen)
            p.restores += 1
            return
        s.bytes += a["size"]
        del p.live[gen]
        self.reuse.setdefault((p.pid, a["dev"]), []).append(a["ptr"])
        p.live_change(a["dev"], -a["size"], t)

    def untracked_free(self, p, tid):
        dur = self.rng.randint(1000, 3000)
        rec = self.base(p, tid, "free")
        rec.update(api="cuMemFree_v2", ptr="0x%x" % 0xdead0000, size=0,
                   dev=-1, gen=0, kind="device", ctx="0x0", rc=0,
                   dur_ns=dur, tracked=False)
        p.put(tid, rec)
        s = p.st("cuMemFree_v2", "free")
        s.calls += 1
        p.timed("cuMemFree_v2", "free", dur)
        p.untracked += 1
        p.calls += 1

    def pin(self, p, tid, gen):
        a = p.live[gen]
        size = rnd64k(a["size"])
        dur = self.rng.randint(20000, 300000)
        rec = self.base(p, tid, "pin")
        rec.update(ptr="0x%x" % a["ptr"], size=size, gen=gen, dev=a["dev"],
                   backend="dmabuf", dur_ns=dur)
        p.put(tid, rec)
        p.pins[gen] = (size, a["dev"])
        p.cache["pin"] += 1
        p.cache["pin_bytes"] += size
        s = p.st("pin", "pin")
        s.calls += 1
        s.bytes += size
        p.timed("pin", "pin", dur)
        p.calls += 1
        p.pin_change(a["dev"], size, rec["t"])

    def reg(self, p, tid, gen, hit):
        a = p.live[gen]
        dur = self.rng.randint(100, 900) if hit else \
            self.rng.randint(5000, 50000)
        rec = self.base(p, tid, "reg")
        rec.update(ptr="0x%x" % a["ptr"], size=a["size"], gen=gen,
                   mr="0x6000%04x" % (gen & 0xffff), pd="0x7000", access=15,
                   hit=hit, dur_ns=dur)       # no api, as the library
        p.put(tid, rec)
        p.cache["reg"] += 1
        if self.version < 2:
            p.cache["reg_hit" if hit else "reg_miss"] += 1
        s = p.st("reg", "reg")
        s.calls += 1
        p.timed("reg", "reg", dur)
        p.calls += 1
        # standalone hit/miss events (no duration)
        rec = self.base(p, tid, "hit" if hit else "miss")
        rec.update(ptr="0x%x" % a["ptr"], size=a["size"], gen=gen)
        p.put(tid, rec)
        p.cache["hit" if hit else "miss"] += 1

    def revoke(self, p, tid, gen):
        size, dev = p.pins.pop(gen)
        a = p.live[gen]
        rec = self.base(p, tid, "revoke")
        rec.update(ptr="0x%x" % a["ptr"], size=size, gen=gen)
        p.put(tid, rec)
        p.cache["revoke"] += 1
        p.pin_change(dev, -size, rec["t"])

    def ctx_destroy(self, p, tid, dev):
        api = "cuCtxDestroy_v2"
        gens = [g for g, a in sorted(p.live.items()) if a["dev"] == dev]
        nbytes = 0
        for g in gens:
            self.unpin(p, tid, g)
        for g in gens:
            a = p.live.pop(g)
            rec = self.base(p, tid, "free")
            rec.update(api=api, ptr="0x%x" % a["ptr"], size=a["size"],
                       dev=dev, gen=g, kind=a["kind"],
                       ctx="0x5555aaaa%04x" % dev, rc=0, dur_ns=0,
                       implicit=True)
            p.put(tid, rec)
            s = p.st(api, "implicit free")
            s.calls += 1
            s.bytes += a["size"]
            p.implicit += 1
            nbytes += a["size"]
            p.live_change(dev, -a["size"], rec["t"])
        dur = self.rng.randint(100000, 900000)
        rec = self.base(p, tid, "ctx_destroy")
        rec.update(api=api, ctx="0x5555aaaa%04x" % dev, dev=dev, rc=0,
                   dur_ns=dur, dropped=len(gens), dropped_bytes=nbytes)
        p.put(tid, rec)
        s = p.st(api, "ctx")
        s.calls += 1
        s.bytes += nbytes
        p.timed(api, "ctx", dur)
        p.calls += 1

    def pool_trim(self, p, tid):
        dur = self.rng.randint(1000, 20000)
        rec = self.base(p, tid, "pool_trim")
        rec.update(api="cuMemPoolTrimTo", pool="0x9000", rc=0, dur_ns=dur)
        p.put(tid, rec)
        s = p.st("cuMemPoolTrimTo", "pool")
        s.calls += 1
        p.timed("cuMemPoolTrimTo", "pool", dur)
        p.calls += 1

    def untrusted(self, p, tid):
        rec = self.base(p, tid, "untrusted")
        rec.update(api="cuMemAllocFromPoolAsync_ptsz",
                   why="reached through cuGetProcAddress with no wrapper")
        p.put(tid, rec)
        p.untrusted += 1

    def audit(self, p, tid, gen):
        a = p.live[gen]
        rec = self.base(p, tid, "audit")
        rec.update(api="cuMemFree_v2", ptr="0x%x" % a["ptr"],
                   what="registry size %d, driver range %d" % (
                       a["size"], a["size"] * 2))
        p.put(tid, rec)
        p.audit += 1

    def fork(self, p, child_pid, child_tids):
        self.flush_all(p)
        c = SimProc(self, child_pid, child_tids, p.exe, parent=p.pid)
        self.start(c)
        rec = self.base(c, child_pid, "fork")
        t = rec["t"]
        rec["parent"] = p.pid
        c.events += 1
        self.write(rec)
        c.live = {g: dict(a) for g, a in p.live.items()}
        for a in c.live.values():
            c.live_change(a["dev"], a["size"], t)
        return c

    def exit(self, p, dropped=0):
        self.flush_all(p)
        p.dropped = dropped
        p.events += 1
        self.write({"ev": "exit", "t": self.tick(), "pid": p.pid,
                    "tid": p.pid, "events": p.events, "dropped": dropped,
                    "live": len(p.live),
                    "live_bytes": sum(a["size"] for a in p.live.values())})

    # --- a random step of work ---
    def work(self, p, steps, allow_ctx_free=True):
        r = self.rng
        for _ in range(steps):
            tid = r.choice(p.tids)
            x = r.random()
            if x < 0.52 or not p.live:
                self.alloc(p, tid, fail=r.random() < 0.07)
            elif x < 0.88:
                self.free(p, tid, r.choice(sorted(p.live)))
            else:
                gpu = [g for g, a in sorted(p.live.items())
                       if a["dev"] >= 0 and a["kind"] != "pool"]
                if not gpu:
                    continue
                g = r.choice(gpu)
                if g not in p.pins:
                    self.reg(p, tid, g, hit=False)
                    self.pin(p, tid, g)
                else:
                    self.reg(p, tid, g, hit=True)


def expected(p):
    return {
        "pid": p.pid, "exe": p.exe, "parent": p.parent,
        "apis": {"%s|%s" % k: dict(calls=s.calls, failed=s.failed,
                                    bytes=s.bytes, n=s.n, sum=s.sum,
                                    max=s.max)
                 for k, s in p.apis.items()},
        "devices": {str(d): {
            "peak_live_bytes": p.dev_peak.get(d, (0, None))[0],
            "peak_t_ns": p.dev_peak.get(d, (0, None))[1],
            "live_bytes_at_end": p.dev_live.get(d, 0),
            "live_allocs_at_end": sum(1 for a in p.live.values()
                                      if a["dev"] == d),
            "peak_pinned_bytes": p.dev_pin_peak.get(d, 0),
            "pinned_bytes_at_end": p.dev_pin.get(d, 0)}
            for d in sorted(set(p.dev_live) | set(p.dev_pin))},
        "leak_bytes": sum(a["size"] for a in p.live.values()),
        "leak_count": len(p.live),
        "cache": dict(p.cache),
        "untrusted": p.untrusted, "audit": p.audit,
        "restores": p.restores, "implicit_frees": p.implicit,
        "untracked_frees": p.untracked, "dropped": p.dropped,
        "calls": p.calls,
    }


def generate(seed=7, version=1):
    """Return (lines, truth).  lines: list of JSON strings (no newline)."""
    g = Gen(seed, version)
    parent = SimProc(g, 4242, [4242, 4250, 4251], "/usr/bin/python3")
    g.start(parent, version)
    g.work(parent, 60)
    # A failed alloc on each device, for sure.
    g.alloc(parent, 4250, fail=True, api_i=0, dev=0)
    g.alloc(parent, 4251, fail=True, api_i=1, dev=1)
    # A failed free followed by its restore.
    keep = g.alloc(parent, 4250, api_i=0, dev=1, size=2 << 20)
    g.free(parent, 4250, keep, fail=True)
    g.untracked_free(parent, 4251)
    g.untrusted(parent, 4242)
    some = g.alloc(parent, 4242, api_i=0, dev=0, size=4 << 20)
    g.audit(parent, 4242, some)
    g.reg(parent, 4251, some, hit=False)
    g.pin(parent, 4251, some)
    g.revoke(parent, 4251, some)
    g.pool_trim(parent, 4250)
    child = g.fork(parent, 4300, [4300, 4301])
    # Parent and child run side by side.
    for _ in range(6):
        g.work(parent, 8)
        g.work(child, 5)
    # The child frees some of what it inherited, and exits.
    inherited = sorted(child.live)[:3]
    for gen in inherited:
        if gen in child.live:
            g.free(child, 4301, gen)
    g.audit(child, 4300, sorted(child.live)[0]) if child.live else None
    g.exit(child, dropped=0)
    # Parent: pin something on dev 1, then destroy dev 1's context.
    big = g.alloc(parent, 4251, api_i=0, dev=1, size=24 << 20)
    g.reg(parent, 4251, big, hit=False)
    g.pin(parent, 4251, big)
    g.reg(parent, 4251, big, hit=True)
    g.ctx_destroy(parent, 4250, 1)
    g.work(parent, 20)
    g.alloc(parent, 4242, api_i=4, dev=0, size=8 << 20)   # leaked VMM map
    g.exit(parent, dropped=3)
    truth = {"processes": [expected(parent), expected(child)],
             "exe": parent.exe}
    return g.lines, truth


if __name__ == "__main__":
    import sys
    lines, truth = generate()
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stderr.write(json.dumps(truth, indent=1) + "\n")
