#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gpu-check's checker: compare what a test program says it did with the
event log gdrhook wrote (GDRHOOK_TRACE), and build the coverage table.

Standard library only.

Program protocol (lines on stdout; anything else is ignored):
  GH-PID <pid>                  the process whose log the GH-PTR lines are
                                checked against (the first one printed)
  GH-CASE <section>             later lines belong to this section
  GH-T <ns>                     CLOCK_MONOTONIC now; GH-SEG/IN/GONE lines
                                after it are checked against the live set
                                replayed from the log up to that time
  GH-PTR alloc <api> <ptr> <size>
  GH-PTR free <api> <ptr>
  GH-PTR fail <api> <rc>        a failed allocation call (logged, rc != 0)
  GH-PTR ev <event> <api>       a pool_trim/pool_destroy/ctx_* record next
  GH-PTR reset <api>            everything the program still holds is in
                                the context the next ctx_destroy/ctx_reset/
                                ctx_release record drops: each must have
                                an implicit free before that record
  GH-PTR leak <ptr>             may still be live at exit
  GH-SEG <addr> <size> one|union  [addr, addr+size) is inside one live
                                allocation (one) / covered by live ones
  GH-IN <ptr> <size> one|union  same, for a tensor's or array's bytes
  GH-GONE <addr> <size>         no live allocation overlaps the range
  GH-SURVIVED <ptr> <api>       the driver still knows ptr after the
                                context that owned it went away (a
                                finding: the shim's implicit free was wrong)
  GH-NOTE <text>                shown in the table's notes
  GH-OK <text> / GH-FAIL <text> / GH-SKIP <reason>

Commands:
  check  --case C --mode plain|validate --stdout F --logs GLOB --rc N
         --secs S --json OUT [--strict] [--allow-live] [--nccl N]
  table  --out DIR [--order C,C,...]     prints and saves table.txt/json;
                                         exit 1 if any case failed
"""
import argparse
import glob
import json
import os
import sys

ALLOC_GROUPS = [
    {"cudaMalloc", "cuMemAlloc_v2", "cuMemAlloc"},
    {"cudaMallocPitch", "cuMemAllocPitch_v2", "cuMemAllocPitch",
     "cuMemAlloc_v2"},
    {"cudaMallocManaged", "cuMemAllocManaged"},
    {"cudaHostAlloc", "cudaMallocHost", "cuMemHostAlloc",
     "cuMemAllocHost_v2", "cuMemAllocHost"},
    {"cudaHostRegister", "cuMemHostRegister_v2", "cuMemHostRegister"},
    {"cudaMallocAsync", "cudaMallocAsync_ptsz", "cuMemAllocAsync",
     "cuMemAllocAsync_ptsz", "cuMemAllocFromPoolAsync",
     "cuMemAllocFromPoolAsync_ptsz"},
    {"cudaMallocFromPoolAsync", "cudaMallocFromPoolAsync_ptsz",
     "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz"},
    {"cudaFree", "cuMemFree_v2", "cuMemFree", "cuMemFreeAsync",
     "cuMemFreeAsync_ptsz", "cudaFreeAsync", "cudaFreeAsync_ptsz"},
    {"cudaFreeAsync", "cudaFreeAsync_ptsz", "cuMemFreeAsync",
     "cuMemFreeAsync_ptsz"},
    {"cudaFreeHost", "cuMemFreeHost"},
    {"cudaHostUnregister", "cuMemHostUnregister"},
    {"cudaMemPoolTrimTo", "cuMemPoolTrimTo"},
    {"cudaMemPoolDestroy", "cuMemPoolDestroy"},
    {"cudaDeviceReset", "cuDevicePrimaryCtxReset_v2",
     "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxRelease_v2",
     "cuDevicePrimaryCtxRelease"},
    {"cuCtxDestroy_v2", "cuCtxDestroy"},
    {"cuDevicePrimaryCtxReset_v2", "cuDevicePrimaryCtxReset"},
    {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"},
]

CTX_EVS = ("ctx_destroy", "ctx_reset", "ctx_release")
MEM_EVS = ("alloc", "free", "restore") + CTX_EVS + ("pool_trim",
                                                    "pool_destroy")

CASE_TITLES = {
    "drv": "driver API",
    "rt-shared": "cudart shared",
    "rt-static": "cudart static",
    "rt-ptds": "per-thread default stream",
    "torch-default": "PyTorch default",
    "torch-expandable": "PyTorch expandable segments",
    "kinds": "memory kinds (kinds_proof.c)",
    "ptrattr": "pointer queries (ptrattr-check)",
    "torch-async": "PyTorch backend:cudaMallocAsync",
    "torch-graph": "PyTorch CUDA graph, default",
    "torch-graph-async": "PyTorch CUDA graph, async backend",
    "jax": "JAX jit, no preallocation",
    "cupy": "CuPy",
    "triton": "Triton kernel on torch tensors",
    "numba": "numba-cuda arrays + kernel",
    "nccl": "NCCL all-reduce, 2 GPUs",
    "drv-fake": "driver API (test double)",
    "rt-fake": "runtime (test double)",
    "selftest": "checker self-test (synthetic logs)",
}

SECTION_TITLES = [
    ("device", "device (cuMemAlloc/cudaMalloc)"),
    ("async", "async default pool"),
    ("pool", "explicit pool + trim"),
    ("vmm", "VMM"),
    ("vmmctx", "VMM mapping across cuCtxDestroy"),
    ("managed", "managed"),
    ("host", "host alloc"),
    ("hostreg", "host register"),
    ("ctxdestroy", "cuCtxDestroy"),
    ("release", "primary release (not last)"),
    ("reset", "cudaDeviceReset/primary reset"),
    ("lastrelease", "last primary release"),
]


def api_ok(printed, logged, strict):
    if printed == logged:
        return True
    if strict:
        return False
    if logged in (printed + "_ptsz", printed + "_ptds"):
        return True
    return any(printed in g and logged in g for g in ALLOC_GROUPS)


def hexs(v):
    return "0x%x" % v


def parse_int(s):
    return int(s, 0) if isinstance(s, str) else int(s)


class Section:
    def __init__(self, name):
        self.name = name
        self.events = 0
        self.ptrs = 0
        self.missing = 0
        self.problems = []
        self.notes = []
        self.audits = []
        self.apis = set()
        self.t0 = None

    def to_json(self):
        return {"events": self.events, "ptrs": self.ptrs,
                "missing": self.missing, "problems": self.problems,
                "notes": self.notes, "audits": self.audits,
                "apis": sorted(self.apis)}


# ---------------------------------------------------------------- logs

def load_logs(pattern):
    """Returns {pid: {"recs": [...], "starts": [], "exits": []}}, errors."""
    procs = {}
    errors = []
    files = sorted(glob.glob(pattern))
    idx = 0
    for path in files:
        with open(path, "r", errors="replace") as f:
            for ln, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    r = json.loads(line)
                except ValueError as e:
                    errors.append("%s:%d: bad JSON (%s): %.120s"
                                  % (os.path.basename(path), ln, e, line))
                    continue
                pid = r.get("pid", -1)
                p = procs.setdefault(pid, {"recs": [], "starts": [],
                                           "exits": [], "other": [],
                                           "file": os.path.basename(path)})
                idx += 1
                r["_i"] = idx
                ev = r.get("ev")
                if ev == "start":
                    p["starts"].append(r)
                elif ev == "exit":
                    p["exits"].append(r)
                elif ev == "fork":
                    p["other"].append(r)
                else:
                    if "ptr" in r:
                        r["_ptr"] = parse_int(r["ptr"])
                    p["recs"].append(r)
    # An allocation takes effect when the call returns, a free when it
    # starts (the shim unregisters before the real call): this orders
    # calls of different threads that raced on one address.  Log format 2
    # stamps t that way; version 1 stamped every call's start (t + dur_ns).
    for p in procs.values():
        v1 = any(s.get("v", 1) < 2 for s in p["starts"]) or not p["starts"]
        for r in p["recs"]:
            r["_eff"] = r.get("t", 0) + (r.get("dur_ns", 0)
                                         if v1 and r.get("ev") == "alloc"
                                         else 0)
        p["recs"].sort(key=lambda r: (r["_eff"], r["_i"]))
        for pos, r in enumerate(p["recs"]):
            r["_pos"] = pos
    return procs, errors, files


def overlap(a0, a1, b0, b1):
    return a0 < b1 and b0 < a1


def coverage(live, lo, hi):
    """Bytes of [lo, hi) not covered by live ranges; the ranges touching it."""
    touching = sorted(((r["_ptr"], r["_ptr"] + r.get("size", 0), r)
                       for r in live.values()
                       if overlap(r["_ptr"], r["_ptr"] + r.get("size", 0),
                                  lo, hi)), key=lambda x: x[0])
    pos = lo
    uncovered = 0
    for b, e, _ in touching:
        if b > pos:
            uncovered += b - pos
        pos = max(pos, e)
        if pos >= hi:
            break
    if pos < hi:
        uncovered += hi - pos
    return uncovered, [t[2] for t in touching]


def inside_one(live, lo, hi):
    for r in live.values():
        if r["_ptr"] <= lo and hi <= r["_ptr"] + r.get("size", 0):
            return r
    return None


def desc(r):
    return "%s %s+%s (%s, %s)" % (r.get("ev"), r.get("ptr"), r.get("size"),
                                 r.get("kind"), r.get("api"))


# ------------------------------------------------------------- replay

def replay(proc, queries, strict_exit, leaks, problems, notes):
    """Walk one process's records in time order, checking consistency.
    queries: [(t, section, [lines])] sorted by t; evaluated against the live
    set holding every record with t <= query t.  Returns final live dict."""
    live = {}
    qi = 0

    def run_queries(upto):
        nonlocal qi
        while qi < len(queries) and (upto is None or queries[qi][0] < upto):
            t, sec, lines = queries[qi]
            for q in lines:
                eval_query(live, q, sec)
            qi += 1

    for r in proc["recs"]:
        run_queries(r["_eff"])
        ev = r.get("ev")
        rc = r.get("rc", 0)
        if ev == "alloc" and rc == 0:
            p, s = r["_ptr"], r.get("size", 0)
            clash = [o for o in live.values()
                     if overlap(o["_ptr"], o["_ptr"] + o.get("size", 0),
                                p, p + max(s, 1))]
            if clash:
                problems.append("log: alloc %s overlaps live %s (a free was "
                                "missed)" % (desc(r), desc(clash[0])))
                for o in clash:
                    live.pop(o["_ptr"], None)
            live[p] = r
        elif ev == "free" and rc == 0:
            p = r["_ptr"]
            if r.get("tracked") is False:
                problems.append("log: free of an untracked pointer: %s"
                                % desc(r))
            elif p not in live:
                problems.append("log: free of a pointer not live in the "
                                "log: %s" % desc(r))
            else:
                live.pop(p)
        elif ev == "restore":
            live[r["_ptr"]] = r
        elif ev in ("ctx_destroy", "ctx_reset") and rc == 0:
            ctx = r.get("ctx")
            left = [o for o in live.values() if o.get("ctx") == ctx]
            if left and ctx not in (None, "0x0"):
                problems.append("log: %s of ctx %s (%s) left %d of its "
                                "allocations live, e.g. %s"
                                % (ev, ctx, r.get("api"), len(left),
                                   desc(left[0])))
        elif ev == "untrusted":
            problems.append("log: untrusted: api %s: %s"
                            % (r.get("api"), r.get("why")))
    run_queries(None)

    exits = proc["exits"]
    if not exits:
        problems.append("log: no exit record (process crashed, was killed "
                        "or the log was cut short)")
    else:
        x = exits[-1]
        if len(exits) > 1:
            problems.append("log: %d exit records" % len(exits))
        if x.get("dropped", 0):
            problems.append("log: %s events dropped" % x.get("dropped"))
        nlive = len(live)
        nbytes = sum(r.get("size", 0) for r in live.values())
        if x.get("live") != nlive or x.get("live_bytes") != nbytes:
            problems.append("log: exit says live=%s live_bytes=%s, replay "
                            "of the log gives %d / %d"
                            % (x.get("live"), x.get("live_bytes"), nlive,
                               nbytes))
    if not proc["starts"]:
        problems.append("log: no start record")
    stray = [r for r in live.values() if r["_ptr"] not in leaks]
    if stray:
        msg = ("%d allocations (%d bytes) live at exit"
               % (len(stray), sum(r.get("size", 0) for r in stray)))
        if strict_exit:
            problems.append("log: " + msg + ", e.g. " +
                            "; ".join(desc(r) for r in stray[:4]))
        else:
            notes.append(msg + " (allowed for this case)")
    return live


def eval_query(live, q, sec):
    kind, args = q[0], q[1:]
    sec.ptrs += 1
    if kind in ("SEG", "IN"):
        a, n = parse_int(args[0]), parse_int(args[1])
        mode = args[2] if len(args) > 2 else "one"
        hi = a + max(n, 1)
        if mode == "one":
            r = inside_one(live, a, hi)
            if r is None:
                unc, touch = coverage(live, a, hi)
                sec.missing += 1
                sec.problems.append(
                    "%s %s+%d: not inside one live logged allocation "
                    "(%d bytes uncovered; touching: %s)"
                    % (kind, hexs(a), n, unc,
                       "; ".join(desc(t) for t in touch[:3]) or "none"))
            else:
                sec.events += 1
                sec.apis.add(r.get("api"))
        else:
            unc, touch = coverage(live, a, hi)
            if unc:
                sec.missing += 1
                sec.problems.append(
                    "%s %s+%d: %d bytes not covered by live logged "
                    "allocations (touching: %s)"
                    % (kind, hexs(a), n, unc,
                       "; ".join(desc(t) for t in touch[:3]) or "none"))
            else:
                sec.events += len(touch)
                for t in touch:
                    sec.apis.add(t.get("api"))
    elif kind == "GONE":
        a, n = parse_int(args[0]), parse_int(args[1])
        unc, touch = coverage(live, a, a + max(n, 1))
        if touch:
            sec.missing += 1
            sec.problems.append(
                "GONE %s+%d: released by the program but still live in the "
                "log: %s" % (hexs(a), n,
                             "; ".join(desc(t) for t in touch[:3])))


# ------------------------------------------------------------- matching

def match_program(lines, proc, strict, sections, leaks):
    """Match GH-PTR lines against one process's records."""
    recs = proc["recs"] if proc else []
    by_ptr = {}
    for r in recs:
        if r.get("ev") in ("alloc", "free") and "_ptr" in r:
            by_ptr.setdefault(r["_ptr"], []).append(r)
    cur = {}            # ptr -> pos of the last record matched for it
    held = {}           # ptr -> (section, printed alloc) still held
    g_alloc = -1        # pos of the last matched alloc record
    g_any = -1          # pos of the last matched record of any kind
    queries = []
    sec = sections.setdefault("main", Section("main"))
    # Time window of each section: from its first GH-T to the next
    # section's first GH-T.  A record matched to a line must lie inside.
    starts = []
    for words in lines:
        if words[0] == "GH-CASE":
            starts.append(None)
        elif words[0] == "GH-T" and starts and starts[-1] is None:
            starts[-1] = int(words[1])
    ends = []
    for i in range(len(starts)):
        nxt = [t for t in starts[i + 1:] if t is not None]
        ends.append(nxt[0] if nxt else None)
    win = [None, None]
    nsec = -1

    def in_win(r):
        t = r.get("t", 0)
        return ((win[0] is None or t >= win[0]) and
                (win[1] is None or t < win[1]))

    def find(ptr, pred, after, *prefs):
        cands = [r for r in by_ptr.get(ptr, ())
                 if r["_pos"] > after and in_win(r) and pred(r)]
        for pref in prefs:
            for r in cands:
                if pref(r):
                    return r
        return cands[0] if cands else None

    for words in lines:
        tag = words[0]
        if tag == "GH-CASE":
            name = words[1] if len(words) > 1 else "main"
            sec = sections.setdefault(name, Section(name))
            nsec += 1
            win[0], win[1] = starts[nsec], ends[nsec]
            continue
        if tag == "GH-SURVIVED":
            sec.problems.append(
                "the driver still knows %s after %s, but the log has it "
                "dropped (implicit free): the shim forgot a live allocation"
                % (words[1], " ".join(words[2:])))
            continue
        if tag == "GH-NOTE":
            sec.notes.append("program: " + " ".join(words[1:]))
            continue
        if tag == "GH-T":
            t = int(words[1])
            if sec.t0 is None:
                sec.t0 = t
            queries.append((t, sec, []))
            continue
        if tag in ("GH-SEG", "GH-IN", "GH-GONE"):
            if not queries:
                sec.problems.append("protocol: %s before any GH-T" % tag)
                continue
            queries[-1][2].append([tag[3:]] + words[1:])
            continue
        if tag != "GH-PTR" or len(words) < 2:
            continue
        op = words[1]
        if op == "leak":
            leaks.add(parse_int(words[2]))
            continue
        if proc is None:
            sec.ptrs += 1
            sec.missing += 1
            continue
        if op == "alloc":
            api, ptr, size = words[2], parse_int(words[3]), int(words[4])
            sec.ptrs += 1
            after = max(cur.get(ptr, -1), g_alloc)
            r = find(ptr, lambda r: r["ev"] == "alloc" and r.get("rc") == 0,
                     after,
                     lambda r: (api_ok(api, r.get("api"), strict) and
                                r.get("size") == size),
                     lambda r: api_ok(api, r.get("api"), strict))
            if r is None:
                sec.missing += 1
                sec.problems.append("alloc %s %s+%d: no alloc record"
                                    % (api, hexs(ptr), size))
                held[ptr] = (sec, api)
                continue
            sec.events += 1
            sec.apis.add(r.get("api"))
            cur[ptr] = g_alloc = r["_pos"]
            g_any = max(g_any, r["_pos"])
            held[ptr] = (sec, api)
            if not api_ok(api, r.get("api"), strict):
                sec.problems.append("alloc %s %s: logged as api %s"
                                    % (api, hexs(ptr), r.get("api")))
            rs = r.get("size", -1)
            if rs != size:
                if strict or rs < size:
                    sec.problems.append("alloc %s %s: size %d, log says %s"
                                        % (api, hexs(ptr), size, rs))
                else:
                    sec.notes.append("alloc %s %s: size %d, log says %s"
                                     % (api, hexs(ptr), size, rs))
        elif op == "free":
            api, ptr = words[2], parse_int(words[3])
            sec.ptrs += 1
            implicit_ok = api in ("cuMemUnmap", "cuCtxDestroy_v2",
                                  "cuCtxDestroy", "cudaDeviceReset",
                                  "cuDevicePrimaryCtxReset_v2",
                                  "cuDevicePrimaryCtxRelease_v2")
            r = find(ptr, lambda r: r["ev"] == "free" and r.get("rc") == 0,
                     cur.get(ptr, -1))
            held.pop(ptr, None)
            if r is None:
                sec.missing += 1
                sec.problems.append("free %s %s: no free record"
                                    % (api, hexs(ptr)))
                continue
            sec.events += 1
            sec.apis.add(r.get("api"))
            cur[ptr] = r["_pos"]
            g_any = max(g_any, r["_pos"])
            if r.get("tracked") is False:
                sec.problems.append("free %s %s: logged as untracked"
                                    % (api, hexs(ptr)))
            if r.get("implicit") and not implicit_ok:
                sec.problems.append("free %s %s: logged as an implicit free "
                                    "(%s), not the program's call"
                                    % (api, hexs(ptr), r.get("api")))
            elif r.get("implicit") and r.get("api") != api:
                sec.problems.append("free %s %s: dropped early, by an "
                                    "implicit free from %s, while the "
                                    "program still had it"
                                    % (api, hexs(ptr), r.get("api")))
            elif not api_ok(api, r.get("api"), strict):
                sec.problems.append("free %s %s: logged as api %s"
                                    % (api, hexs(ptr), r.get("api")))
        elif op == "fail":
            api = words[2]
            sec.ptrs += 1
            r = next((x for x in recs if x["_pos"] > g_alloc and in_win(x)
                      and x.get("ev") == "alloc" and x.get("rc", 0) != 0
                      and api_ok(api, x.get("api"), strict)), None)
            if r is None:
                sec.missing += 1
                sec.problems.append("failed %s (rc %s): no alloc record with "
                                    "rc != 0" % (api, words[3]))
            else:
                sec.events += 1
                sec.apis.add(r.get("api"))
                if str(r.get("rc")) != words[3]:
                    sec.notes.append("failed %s: rc %s, log says %s"
                                     % (api, words[3], r.get("rc")))
        elif op in ("ev", "reset"):
            if op == "ev":
                evs, api = (words[2],), words[3]
            else:
                evs, api = CTX_EVS, words[2] if len(words) > 2 else ""
            r = next((x for x in recs if x["_pos"] > g_any and in_win(x)
                      and x.get("ev") in evs
                      and (not api or api_ok(api, x.get("api"), strict))),
                     None)
            sec.ptrs += 1
            if r is None:
                sec.missing += 1
                sec.problems.append("%s %s: no %s record"
                                    % (op, api, "/".join(evs)))
                continue
            sec.events += 1
            sec.apis.add(r.get("api"))
            g_any = r["_pos"]
            if r.get("rc", 0) != 0:
                sec.problems.append("%s %s: record has rc %s"
                                    % (op, api, r.get("rc")))
            if op == "ev":
                continue
            # every held pointer: an implicit free before r
            for ptr, (hsec, hapi) in list(held.items()):
                sec.ptrs += 1
                f = find(ptr, lambda x: x["ev"] == "free" and x.get("rc") == 0,
                         cur.get(ptr, -1))
                if f is None or f["_pos"] > r["_pos"]:
                    sec.missing += 1
                    sec.problems.append(
                        "reset %s: %s %s was live and has no implicit free "
                        "before the %s record" % (api, hapi, hexs(ptr),
                                                  r.get("ev")))
                else:
                    sec.events += 1
                    sec.apis.add(f.get("api"))
                    cur[ptr] = f["_pos"]
                    if not f.get("implicit"):
                        sec.problems.append("reset %s: free of %s is not "
                                            "marked implicit" % (api,
                                                                 hexs(ptr)))
                held.pop(ptr)
    return queries


# --------------------------------------------------------------- check

def cmd_check(a):
    res = {"case": a.case, "mode": a.mode, "rc": a.rc, "secs": a.secs,
           "status": "pass", "problems": [], "notes": [], "audits": [],
           "events": 0, "ptrs": 0, "missing": 0, "apis": [], "kinds": {},
           "sections": {}, "logs": [], "skip": None}
    lines = []
    pids = []
    oks, fails = [], []
    try:
        with open(a.stdout, "r", errors="replace") as f:
            for line in f:
                w = line.split()
                if not w or not w[0].startswith("GH-"):
                    continue
                if w[0] == "GH-PID":
                    pids.append(int(w[1]))
                elif w[0] == "GH-OK":
                    oks.append(" ".join(w[1:]))
                elif w[0] == "GH-FAIL":
                    fails.append(" ".join(w[1:]))
                elif w[0] == "GH-SKIP":
                    res["skip"] = " ".join(w[1:]) or "skipped"
                else:
                    lines.append(w)
    except OSError as e:
        res["problems"].append("cannot read program output: %s" % e)

    if a.rc == 77 or (res["skip"] and a.rc == 0):
        res["status"] = "skip"
        res["skip"] = res["skip"] or "program exited 77"
        write(a.json, res)
        print("  %s/%s: SKIP (%s)" % (a.case, a.mode, res["skip"]))
        return 0

    procs, errors, files = load_logs(a.logs)
    res["logs"] = [os.path.basename(f) for f in files]
    res["problems"] += errors
    if a.rc in (124, 137):
        res["problems"].append("timed out (rc %d)" % a.rc)
    elif a.rc != 0:
        res["problems"].append("program exited with rc %d" % a.rc)
    for t in fails:
        res["problems"].append("program: GH-FAIL " + t)
    if a.nccl and len(oks) < a.nccl:
        res["problems"].append("program: %d GH-OK lines, want %d"
                               % (len(oks), a.nccl))
    if not files:
        res["problems"].append("no event log written (%s)" % a.logs)

    sections = {}
    leaks = set()
    main = procs.get(pids[0]) if pids else None
    if pids and main is None and any(w[0] == "GH-PTR" for w in lines):
        res["problems"].append("no log records for pid %d" % pids[0])
    queries = match_program(lines, main, a.strict, sections, leaks)
    queries.sort(key=lambda q: q[0])

    apis = set()
    kinds = {}
    for pid, proc in sorted(procs.items()):
        probs, notes = [], []
        replay(proc, queries if proc is main else [],
               not a.allow_live, leaks, probs, notes)
        tag = "" if proc is main else "pid %s: " % pid
        res["problems"] += [tag + p for p in probs]
        res["notes"] += [tag + n for n in notes]
        for r in proc["recs"]:
            ev = r.get("ev")
            if ev in MEM_EVS:
                res["events"] += 1
            if ev in ("alloc", "free") and r.get("api"):
                apis.add(r["api"])
            if ev == "alloc" and r.get("rc", 0) == 0:
                k = r.get("kind", "?")
                kinds[k] = kinds.get(k, 0) + 1
            if ev == "audit":
                res["audits"].append({"pid": pid, "api": r.get("api"),
                                      "ptr": r.get("ptr"),
                                      "size": r.get("size"),
                                      "what": r.get("what"),
                                      "t": r.get("t")})
    res["apis"] = sorted(apis)
    res["kinds"] = kinds

    # attribute audits to the section running at the time
    timed = sorted((s.t0, s) for s in sections.values() if s.t0 is not None)
    for au in res["audits"]:
        owner = None
        for t0, s in timed:
            if au.get("t") is not None and au["t"] >= t0:
                owner = s
        if owner is not None:
            owner.audits.append(au["what"])

    if a.nccl:
        nv = kinds.get("vmm", 0)
        nd = sum(v for k, v in kinds.items() if k != "vmm")
        res["notes"].append("allocation records: %d vmm (cuMemCreate/"
                            "cuMemMap), %d other" % (nv, nd))
        if nv + nd == 0:
            res["problems"].append("no allocation records in the ranks' logs")
        elif nv == 0:
            res["notes"].append("no vmm mappings logged: NCCL did not use "
                                "cuMem* here (NCCL_CUMEM_ENABLE=0?)")
        ranks = [p for p in procs.values()
                 if any(r.get("ev") == "alloc" for r in p["recs"])]
        if len(ranks) < a.nccl:
            res["problems"].append("allocations logged by %d processes, "
                                   "want %d ranks" % (len(ranks), a.nccl))

    for s in sections.values():
        res["ptrs"] += s.ptrs
        res["missing"] += s.missing
        res["problems"] += ["[%s] %s" % (s.name, p) for p in s.problems]
        res["notes"] += ["[%s] %s" % (s.name, n) for n in s.notes]
    res["sections"] = {k: v.to_json() for k, v in sections.items()
                       if k not in ("main", "end") or v.ptrs}
    if res["problems"] or (a.mode == "validate" and res["audits"]):
        res["status"] = "fail"
    if res["audits"] and a.mode == "plain":
        res["problems"].append("%d audit records without GDRHOOK_VALIDATE"
                               % len(res["audits"]))
        res["status"] = "fail"
    write(a.json, res)
    print("  %s/%s: %s  events=%d ptrs=%d missing=%d problems=%d audits=%d "
          "(%.1fs)" % (a.case, a.mode, res["status"].upper(), res["events"],
                       res["ptrs"], res["missing"], len(res["problems"]),
                       len(res["audits"]), a.secs))
    for p in res["problems"][:12]:
        print("    - " + p)
    if len(res["problems"]) > 12:
        print("    ... %d more in %s" % (len(res["problems"]) - 12, a.json))
    for au in res["audits"][:8]:
        print("    ! audit: %s %s: %s" % (au["api"], au["ptr"], au["what"]))
    return 0


def write(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


# --------------------------------------------------------------- table

def cmd_table(a):
    results = {}
    for path in glob.glob(os.path.join(a.out, "*.result.json")):
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError):
            continue
        results.setdefault(r["case"], {})[r["mode"]] = r
    extra = {}
    ef = os.path.join(a.out, "cases.txt")
    if os.path.exists(ef):
        with open(ef) as f:
            for line in f:
                w = line.rstrip("\n").split("\t")
                if len(w) >= 3:
                    extra[w[0]] = (w[1], w[2])   # status, reason
    order = [c for c in (a.order or "").split(",") if c]
    for c in sorted(set(results) | set(extra)):
        if c not in order:
            order.append(c)

    rows = []
    audits_all = []
    any_fail = False
    for c in order:
        modes = results.get(c, {})
        row = {"row": CASE_TITLES.get(c, c), "case": c, "events": 0,
               "ptrs": 0, "missing": 0, "audits": 0, "problems": 0,
               "apis": set(), "secs": 0.0, "result": "SKIP", "why": ""}
        st = []
        for m in ("plain", "validate"):
            r = modes.get(m)
            if not r:
                continue
            st.append(r["status"])
            row["secs"] += r.get("secs", 0)
            if r["status"] == "skip":
                row["why"] = r.get("skip") or ""
                continue
            if m == "plain":
                row["events"] = r["events"]
                row["ptrs"] = r["ptrs"]
            row["missing"] = max(row["missing"], r["missing"])
            row["problems"] += len(r["problems"])
            row["apis"] |= set(r["apis"])
            if m == "validate":
                row["audits"] = len(r["audits"])
                audits_all += [(c, x) for x in r["audits"]]
        if c in extra:
            s, why = extra[c]
            if s in ("fail", "pass"):
                st.append(s)
            elif s == "skip" and not st:
                st.append("skip")
            row["why"] = row["why"] or why
        if "fail" in st:
            row["result"] = "FAIL"
            any_fail = True
        elif "pass" in st:
            row["result"] = "PASS"
        rows.append(row)

    # feature rows: the sections of the C programs
    feat_rows = []
    for key, title in SECTION_TITLES:
        row = {"row": "  " + title, "case": key, "events": 0, "ptrs": 0,
               "missing": 0, "audits": 0, "problems": 0, "apis": set(),
               "secs": None, "result": "SKIP", "why": "", "from": []}
        for c in order:
            for m in ("plain", "validate"):
                r = results.get(c, {}).get(m)
                if not r or r["status"] == "skip":
                    continue
                s = r.get("sections", {}).get(key)
                if not s:
                    continue
                if c not in row["from"]:
                    row["from"].append(c)
                if m == "plain":
                    row["events"] += s["events"]
                    row["ptrs"] += s["ptrs"]
                    row["missing"] += s["missing"]
                    row["apis"] |= set(s["apis"])
                else:
                    row["audits"] += len(s["audits"])
                row["problems"] += len(s["problems"])
        if row["from"]:
            bad = row["problems"] or row["missing"] or row["audits"]
            row["result"] = "FAIL" if bad else "PASS"
            row["why"] = "from " + ",".join(row["from"])
            feat_rows.append(row)

    hdr = ("%-34s %-6s %7s %7s %6s %6s %7s  %s"
           % ("case", "result", "events", "ptrs", "miss", "audit", "time",
              "apis seen / notes"))
    out = [hdr, "-" * len(hdr)]

    def fmt(row):
        t = "-" if row["secs"] is None else "%.1fs" % row["secs"]
        tail = ",".join(sorted(row["apis"]))
        if row["why"]:
            tail = (tail + "  " if tail else "") + "[" + row["why"] + "]"
        return ("%-34s %-6s %7d %7d %6d %6d %7s  %s"
                % (row["row"][:34], row["result"], row["events"], row["ptrs"],
                   row["missing"], row["audits"], t, tail))
    for row in rows:
        out.append(fmt(row))
    if feat_rows:
        out.append("by feature (sections of the C/CUDA programs):")
        for row in feat_rows:
            out.append(fmt(row))
            if row["result"] == "FAIL":
                any_fail = True
    if audits_all:
        out.append("")
        out.append("VALIDATE DISAGREEMENTS (GDRHOOK_VALIDATE=1 audit records)"
                   ": findings for the lead")
        seen = {}
        for c, x in audits_all:
            k = (c, x.get("api"), x.get("what"))
            seen.setdefault(k, []).append(x.get("ptr"))
        for (c, api, what), ptrs in sorted(seen.items(),
                                           key=lambda kv: str(kv[0])):
            out.append("  %-16s %-28s x%-4d %s   (e.g. %s)"
                       % (c, api, len(ptrs), what, ptrs[0]))
    probs = []
    for c in order:
        for m in ("plain", "validate"):
            r = results.get(c, {}).get(m)
            if r and r["problems"]:
                probs.append("  %s/%s:" % (c, m))
                probs += ["    - " + p for p in r["problems"][:15]]
                if len(r["problems"]) > 15:
                    probs.append("    ... %d more (%s.%s.result.json)"
                                 % (len(r["problems"]) - 15, c, m))
    if probs:
        out.append("")
        out.append("PROBLEMS")
        out += probs
    notes = []
    for c in order:
        r = results.get(c, {}).get("plain")
        for n in (r or {}).get("notes", [])[:8]:
            notes.append("  %s: %s" % (c, n))
    if notes:
        out.append("")
        out.append("NOTES (plain runs)")
        out += notes
    out.append("")
    out.append("overall: %s" % ("FAIL" if any_fail else "PASS"))
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    with open(os.path.join(a.out, "table.txt"), "w") as f:
        f.write(text)

    def js(row):
        d = dict(row)
        d["apis"] = sorted(d["apis"])
        return d
    write(os.path.join(a.out, "table.json"),
          {"cases": [js(r) for r in rows],
           "features": [js(r) for r in feat_rows],
           "audits": [dict(case=c, **x) for c, x in audits_all],
           "result": "FAIL" if any_fail else "PASS"})
    return 1 if any_fail else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("--case", required=True)
    c.add_argument("--mode", default="plain")
    c.add_argument("--stdout", required=True)
    c.add_argument("--logs", required=True)
    c.add_argument("--rc", type=int, default=0)
    c.add_argument("--secs", type=float, default=0.0)
    c.add_argument("--json", required=True)
    c.add_argument("--strict", action="store_true",
                   help="api and size must match the printed ones exactly")
    c.add_argument("--allow-live", action="store_true",
                   help="allocations may be live at exit (caching "
                   "allocators); default: only GH-PTR leak ones")
    c.add_argument("--nccl", type=int, default=0,
                   help="NCCL case: number of ranks that must say GH-OK")
    t = sub.add_parser("table")
    t.add_argument("--out", required=True)
    t.add_argument("--order", default="")
    a = ap.parse_args()
    return cmd_check(a) if a.cmd == "check" else cmd_table(a)


if __name__ == "__main__":
    sys.exit(main())
