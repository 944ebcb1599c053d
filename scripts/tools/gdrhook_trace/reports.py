# SPDX-License-Identifier: MIT
"""The text and JSON reports: summary and leaks, and the formatting
helpers they share with the other outputs."""

import datetime
import sys

from . import schema
from .reader import Fatal, PROG, LINE_BITS

def hexs(v):
    return None if v is None else "0x%x" % v


BYTE_UNITS = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20),
              ("KiB", 1 << 10)]


def fmt_bytes(n):
    if n is None:
        return "-"
    for u, f in BYTE_UNITS:
        if abs(n) >= f:
            v = n / f
            return ("%.1f %s" % (v, u)) if v < 1000 else ("%.0f %s" % (v, u))
    return "%d B" % n


def fmt_ns(ns):
    if ns is None:
        return "-"
    a = abs(ns)
    if a < 1000:
        return "%d ns" % ns
    if a < 1000000:
        return "%.1f us" % (ns / 1e3)
    if a < 1000000000:
        return "%.2f ms" % (ns / 1e6)
    return "%.3f s" % (ns / 1e9)


def fmt_dev(d):
    return "host" if d is not None and d < 0 else str(d)


def table(headers, rows, right=None, indent="  "):
    """Aligned plain-text table; columns in `right` are right-aligned."""
    right = set(right or ())
    cells = [[str(c) for c in headers]] + [[str(c) for c in r] for r in rows]
    w = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = []
    for j, r in enumerate(cells):
        parts = []
        for i, c in enumerate(r):
            parts.append(c.rjust(w[i]) if i in right else c.ljust(w[i]))
        out.append((indent + "  ".join(parts)).rstrip())
        if j == 0:
            out.append(indent + "  ".join("-" * x for x in w))
    return "\n".join(out)


def wall(ns):
    if ns is None:
        return None
    try:
        d = datetime.datetime.fromtimestamp(ns / 1e9, datetime.timezone.utc)
        return d.strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return None


def open_out(path):
    if path is None or path == "-":
        return sys.stdout
    try:
        # a lone surrogate escape in a string field ("\ud800") is no
        # character: written escaped, never an error
        return open(path, "w", encoding="utf-8", errors="backslashreplace")
    except OSError as e:
        raise Fatal("cannot write %s: %s" % (path, e.strerror or e)) \
            from None


def write_failed(path, e):
    """The Fatal of a write to OUT (or standard output) that failed: a
    full disk, /dev/full.  A reader that went away is not one."""
    if isinstance(e, BrokenPipeError):
        return e
    return Fatal("cannot write %s: %s" % (
        "standard output" if path in (None, "-") else path,
        e.strerror or e))


def write_to(f, path, text, end=False):
    """text to f (from open_out(path)); end: the last write (standard
    output flushed, a file closed), so that a failure is seen here."""
    try:
        f.write(text)
        if end:
            if f is sys.stdout:
                f.flush()
            else:
                f.close()
    except OSError as e:
        raise write_failed(path, e) from None


def write_out(path, text):
    f = open_out(path)
    try:
        write_to(f, path, text, end=True)
    finally:
        if f is not sys.stdout:
            try:
                f.close()       # closed already, or failing already
            except OSError:
                pass


def line_of(seq):
    return seq & ((1 << LINE_BITS) - 1)


# ---------------------------------------------------------------------------
# summary
# ---------------------------------------------------------------------------

OP_ORDER = {"alloc": 0, "free": 1, "implicit free": 2, "ctx": 3, "pool": 4,
            "pin": 5, "unpin": 6, "reg": 7, "dereg": 8}


def proc_json(res):
    p = res.proc
    ex = p.exit
    live_bytes = sum(a.size for a in res.live.values())
    d = {
        "pid": p.pid,
        "image": p.inst + 1,
        "exe": p.exe,
        "parent": p.parent.pid if p.parent is not None else (
            p.fork.get("parent") if p.fork else None),
        "start_wall": wall(p.start.get("wall_ns")) if p.start else None,
        "duration_ns": p.t_end - p.t0,
        "records": p.nrec,
        "threads": len(p.tids),
        "apis": [s.as_json() for s in sorted(
            res.apis.values(), key=lambda s: (OP_ORDER.get(s.op, 99),
                                              s.api))],
        "devices": {str(k): v for k, v in res.devices().items()},
        "live_at_end": {"count": len(res.live), "bytes": live_bytes},
        "restores": res.restores,
        "implicit_frees": res.implicit_frees,
        "untracked_frees": res.untracked_frees,
        "frees_of_unknown_allocations": res.unknown_frees,
        "ctx_dropped": res.ctx_dropped,
        "ctx_dropped_bytes": res.ctx_dropped_bytes,
        "cache": dict(res.cache) if res.cache_seen else None,
        "untrusted": {"count": res.untrusted_n, "items": [
            {"t_ns": u["t"] - p.t0, "api": u["api"], "why": u["why"],
             "line": line_of(u["seq"])} for u in res.untrusted]},
        "audit": {"count": res.audit_n, "items": [
            {"t_ns": u["t"] - p.t0, "api": u["api"], "ptr": hexs(u["ptr"]),
             "what": u["what"], "line": line_of(u["seq"])}
            for u in res.audit]},
        "exit": None,
        "dropped_events": None,
        "log_mode": p.start.get("mode") if p.start else None,
        "crash_safe": p.start.get("crash_safe") if p.start else None,
        "recovered": [{"events": x.get("events"),
                       "dropped": x.get("dropped"), "by": x.get("by"),
                       "line": line_of(x["_seq"])} for x in p.recovered],
    }
    # a process that died wrote no exit record: its recoverer read what
    # it had dropped from its spool
    if p.recovered:
        d["dropped_events"] = sum(x.get("dropped") or 0
                                  for x in p.recovered)
    if ex is not None:
        d["exit"] = {k: ex.get(k) for k in ("events", "dropped", "live",
                                            "live_bytes")}
        d["exit"]["t_ns"] = ex["t"] - p.t0
        d["dropped_events"] = (d["dropped_events"] or 0) + \
            ex.get("dropped", 0)
        d["exit_matches"] = (ex.get("live") in (None, len(res.live)) and
                             ex.get("live_bytes") in (None, live_bytes))
    return d


def summary_json(run):
    results, rs, diag = run.results, run.rs, run.diag
    procs = [proc_json(r) for r in results]
    tot = {"processes": len(procs),
           "records": sum(p["records"] for p in procs),
           "alloc_calls": 0, "alloc_failed": 0, "alloc_bytes": 0,
           "free_calls": 0, "free_failed": 0, "free_bytes": 0,
           "audit": sum(p["audit"]["count"] for p in procs),
           "untrusted": sum(p["untrusted"]["count"] for p in procs),
           "dropped_events": sum(p["dropped_events"] or 0 for p in procs),
           "live_at_end_bytes": sum(p["live_at_end"]["bytes"]
                                    for p in procs)}
    for r in results:
        for s in r.apis.values():
            if s.op == "alloc":
                tot["alloc_calls"] += s.calls
                tot["alloc_failed"] += s.failed
                tot["alloc_bytes"] += s.bytes
            elif s.op == "free":
                tot["free_calls"] += s.calls
                tot["free_failed"] += s.failed
                tot["free_bytes"] += s.bytes
    return {
        "tool": PROG, "log": diag.logname, "logs": diag.names,
        "input": {"lines": rs.lines, "records": rs.records,
                  "bad_lines": rs.bad_lines,
                  "truncated_last_line": rs.truncated_last,
                  "unknown_events": rs.unknown_events,
                  "unknown_fields": rs.unknown_fields,
                  "newer_version": rs.newer_version,
                  "warnings": diag.count},
        "totals": tot,
        "processes": procs,
    }


def summary_text(js):
    out = []
    inp = js["input"]
    tot = js["totals"]
    out.append("gdrhook-trace summary: %s" % js["log"])
    out.append("  %d record(s) in %d line(s), %d process image(s)"
               % (inp["records"], inp["lines"], tot["processes"]))
    notes = []
    if inp["bad_lines"]:
        notes.append("%d bad line(s)%s" % (
            inp["bad_lines"], " (incl. a truncated last line)"
            if inp["truncated_last_line"] else ""))
    if inp["unknown_events"]:
        notes.append("unknown event types: " + ", ".join(
            "%s x%d" % (k, v) for k, v in sorted(inp["unknown_events"]
                                                 .items())))
    if inp["unknown_fields"]:
        notes.append("unknown fields: " + ", ".join(
            "%s x%d" % (k, v) for k, v in sorted(inp["unknown_fields"]
                                                 .items())))
    if inp["newer_version"]:
        notes.append("log format version %d is newer than supported (%d)"
                     % (inp["newer_version"], schema.LATEST))
    for n in notes:
        out.append("  input: " + n)
    procs = js["processes"]
    if len(procs) > 1:
        out.append("")
        out.append("Processes")
        rows = []
        for p in procs:
            peak = sum(d["peak_live_bytes"] for d in p["devices"].values())
            rows.append([p["pid"] if p["image"] == 1 else "%d#%d" % (
                p["pid"], p["image"]),
                p["parent"] if p["parent"] is not None else "-",
                p["exe"], fmt_ns(p["duration_ns"]), p["records"],
                fmt_bytes(peak), fmt_bytes(p["live_at_end"]["bytes"]),
                "yes" if p["exit"] else "no"])
        out.append(table(["pid", "parent", "exe", "ran", "records",
                          "sum of dev peaks", "live at end", "exit"], rows,
                         right={0, 1, 3, 4, 5, 6}))
    for p in procs:
        out.append("")
        out.extend(proc_text(p))
    return "\n".join(out) + "\n"


def cache_lookups(c):
    """(hits, misses) of the program's registration requests: the hit and
    miss events; logs without them count the 'hit' flag of reg records."""
    if c["hit"] or c["miss"]:
        return c["hit"], c["miss"]
    return c["reg_hit"], c["reg_miss"]


def fmt_rate(n, d):
    return "%.1f%%" % (100.0 * n / d) if d else "-"


def proc_text(p):
    out = []
    head = "== pid %d" % p["pid"]
    if p["image"] > 1:
        head += " (image %d)" % p["image"]
    head += "  %s" % p["exe"]
    if p["parent"] is not None:
        head += "  (forked from %d)" % p["parent"]
    out.append(head + " ==")
    info = "  ran %s, %d record(s), %d thread(s)" % (
        fmt_ns(p["duration_ns"]), p["records"], p["threads"])
    if p["start_wall"]:
        info += ", started %s" % p["start_wall"]
    if p["log_mode"]:
        info += ", log mode %s" % p["log_mode"]
    if p["crash_safe"] is not None:
        info += ", crash-safe log" if p["crash_safe"] else \
            ", log not crash-safe"
    out.append(info)

    apis = p["apis"]
    call_ops = ("alloc", "free", "implicit free", "ctx", "pool")
    call_rows = [a for a in apis if a["op"] in call_ops]
    if call_rows:
        out.append("")
        out.append("  Calls")
        rows = []
        for a in call_rows:
            extra = ""
            if a["op"] == "free" and a.get("untracked"):
                extra = "%d untracked" % a["untracked"]
            if a["op"] == "ctx" and a["bytes"]:
                extra = "dropped"
            rows.append([a["api"], a["op"], a["calls"], a["failed"],
                         fmt_bytes(a["bytes"]) if a["bytes"] or a["op"] in (
                             "alloc", "free", "implicit free") else "-",
                         extra])
        out.append(table(["API", "op", "calls", "failed", "bytes", "note"],
                         rows, right={2, 3, 4}, indent="    "))
        ac = sum(a["calls"] for a in apis if a["op"] == "alloc")
        af = sum(a["failed"] for a in apis if a["op"] == "alloc")
        ab = sum(a["bytes"] for a in apis if a["op"] == "alloc")
        fc = sum(a["calls"] for a in apis if a["op"] == "free")
        ff = sum(a["failed"] for a in apis if a["op"] == "free")
        fb = sum(a["bytes"] for a in apis
                 if a["op"] in ("free", "implicit free"))
        out.append("    allocated %s in %d call(s) (%d failed); freed %s in "
                   "%d call(s) (%d failed) + %d implicit free(s)"
                   % (fmt_bytes(ab), ac, af, fmt_bytes(fb), fc, ff,
                      p["implicit_frees"]))
    timed = [a for a in apis if "time_ns" in a]
    if timed:
        out.append("")
        out.append("  Time inside hooked calls (real call duration)")
        timed.sort(key=lambda a: -a["time_ns"]["sum"])
        rows = [[a["api"], a["op"], a["time_ns"]["n"],
                 fmt_ns(a["time_ns"]["sum"]),
                 fmt_ns(int(round(a["time_ns"]["mean"]))),
                 fmt_ns(a["time_ns"]["max"])] for a in timed]
        out.append(table(["API", "op", "calls", "total", "mean", "max"],
                         rows, right={2, 3, 4, 5}, indent="    "))
    if p["devices"]:
        out.append("")
        out.append("  Memory by device (times since this process's start)")
        rows = []
        for d, v in sorted(p["devices"].items(),
                           key=lambda x: (int(x[0]) < 0, int(x[0]))):
            rows.append([fmt_dev(int(d)), fmt_bytes(v["peak_live_bytes"]),
                         fmt_ns(v["peak_t_ns"]) if v["peak_live_bytes"]
                         else "-",
                         fmt_bytes(v["live_bytes_at_end"]),
                         v["live_allocs_at_end"],
                         fmt_bytes(v["peak_pinned_bytes"]),
                         fmt_bytes(v["pinned_bytes_at_end"])])
        out.append(table(["dev", "peak live", "peak at", "live at end",
                          "allocations live at end", "peak pinned",
                          "pinned at end"], rows,
                         right={1, 2, 3, 4, 5, 6}, indent="    "))
    c = p["cache"]
    if c:
        out.append("")
        out.append("  Registration cache")
        hits, miss = cache_lookups(c)
        out.append("    registrations the program asked for: %d; served "
                   "from the cache (hits) %d, registered anew (misses) %d; "
                   "hit rate %s" % (hits + miss, hits, miss,
                                    fmt_rate(hits, hits + miss)))
        out.append("    registrations made with the NIC %d, deregistrations "
                   "%d" % (c["reg"], c["dereg"]))
        out.append("    pins %d (%s), unpins %d (+%d with their free), "
                   "revokes %d" % (c["pin"], fmt_bytes(c["pin_bytes"]),
                                   c["unpin"], c["unpin_implicit"],
                                   c["revoke"]))
    out.append("")
    out.append("  Health")
    ex = p["exit"]
    for x in p["recovered"]:
        out.append("    the process died: %s record(s) recovered from its "
                   "spool by pid %s" % (x["events"], x["by"]))
        if x.get("dropped"):
            out.append("    dropped events before it died: %d"
                       % x["dropped"])
    if ex is None:
        if not p["recovered"]:
            out.append("    no exit record: the process did not finish "
                       "(or the log is cut short)")
    else:
        out.append("    dropped events: %d (of %s written)"
                   % (ex.get("dropped") or 0, ex.get("events")))
        if not p.get("exit_matches", True):
            out.append("    exit record says %s live / %s; replay gives %d "
                       "/ %s (events were dropped or lost?)"
                       % (ex.get("live"), fmt_bytes(ex.get("live_bytes")),
                          p["live_at_end"]["count"],
                          fmt_bytes(p["live_at_end"]["bytes"])))
    out.append("    untrusted warnings: %d" % p["untrusted"]["count"])
    for u in p["untrusted"]["items"][:10]:
        out.append("      at %s  %s: %s" % (fmt_ns(u["t_ns"]), u["api"],
                                            u["why"]))
    out.append("    audit disagreements: %d" % p["audit"]["count"])
    for u in p["audit"]["items"][:10]:
        out.append("      at %s  %s %s: %s" % (fmt_ns(u["t_ns"]), u["api"],
                                               u["ptr"], u["what"]))
    if p["audit"]["count"] > 10:
        out.append("      ... %d more" % (p["audit"]["count"] - 10))
    if p["restores"]:
        out.append("    failed frees restored: %d" % p["restores"])
    if p["untracked_frees"]:
        out.append("    frees of untracked pointers: %d"
                   % p["untracked_frees"])
    if p["frees_of_unknown_allocations"]:
        out.append("    frees of allocations not seen in this log: %d"
                   % p["frees_of_unknown_allocations"])
    return out


# ---------------------------------------------------------------------------
# leaks
# ---------------------------------------------------------------------------

def alloc_json(a, t0):
    return {"ptr": hexs(a.ptr), "size": a.size, "dev": a.dev,
            "gen": a.gen, "api": a.api, "tid": a.tid, "kind": a.kind,
            "t_ns": a.t - t0, "line": line_of(a.seq),
            "inherited": a.inherited}


def leaks_json(run):
    results, diag = run.results, run.diag
    procs = []
    for res in results:
        p = res.proc
        groups = {}
        by_dev = {}
        allocs = sorted(res.live.values(), key=lambda a: (-a.size, a.t))
        for a in allocs:
            g = groups.get((a.api, a.tid))
            if g is None:
                g = groups[(a.api, a.tid)] = {
                    "api": a.api, "tid": a.tid, "count": 0, "bytes": 0,
                    "largest": 0, "inherited": 0, "devices": set()}
            g["count"] += 1
            g["bytes"] += a.size
            g["largest"] = max(g["largest"], a.size)
            g["inherited"] += 1 if a.inherited else 0
            g["devices"].add(a.dev)
            bd = by_dev.setdefault(str(a.dev), {"count": 0, "bytes": 0})
            bd["count"] += 1
            bd["bytes"] += a.size
        gl = sorted(groups.values(),
                    key=lambda g: (-g["bytes"], g["api"], g["tid"]))
        for g in gl:
            g["devices"] = sorted(g["devices"])
        procs.append({
            "pid": p.pid, "image": p.inst + 1, "exe": p.exe,
            "exited": p.exit is not None,
            "count": len(allocs), "bytes": sum(a.size for a in allocs),
            "by_device": by_dev, "groups": gl,
            "allocations": [alloc_json(a, p.t0) for a in allocs],
        })
    return {"tool": PROG, "log": diag.logname, "logs": diag.names,
            "count": sum(p["count"] for p in procs),
            "bytes": sum(p["bytes"] for p in procs),
            "processes": procs}


def leaks_text(js, show_all, top):
    out = ["gdrhook-trace leaks: %s" % js["log"],
           "  %d allocation(s) never freed, %s in total"
           % (js["count"], fmt_bytes(js["bytes"]))]
    for p in js["processes"]:
        out.append("")
        state = "at exit" if p["exited"] else \
            "at the end of the log (no exit record)"
        out.append("== pid %d%s  %s: %d allocation(s), %s live %s =="
                   % (p["pid"], "" if p["image"] == 1 else
                      " (image %d)" % p["image"], p["exe"], p["count"],
                      fmt_bytes(p["bytes"]), state))
        if not p["count"]:
            continue
        rows = [[g["api"], g["tid"], g["count"], fmt_bytes(g["bytes"]),
                 fmt_bytes(g["largest"]),
                 ",".join(fmt_dev(d) for d in g["devices"]),
                 g["inherited"] or ""] for g in p["groups"]]
        rows.append(["total", "", p["count"], fmt_bytes(p["bytes"]), "", "",
                     ""])
        out.append(table(["API", "tid", "count", "bytes", "largest",
                          "dev", "inherited"], rows,
                         right={1, 2, 3, 4, 6}, indent="    "))
        out.append("    by device: " + ", ".join(
            "%s %s (%d)" % (fmt_dev(int(d)), fmt_bytes(v["bytes"]),
                            v["count"])
            for d, v in sorted(p["by_device"].items(),
                               key=lambda x: (int(x[0]) < 0, int(x[0])))))
        lst = p["allocations"] if show_all else p["allocations"][:top]
        if lst:
            out.append("")
            out.append("    %s" % ("all allocations" if show_all or
                                   len(lst) == p["count"] else
                                   "largest %d (--all lists every one)"
                                   % len(lst)))
            rows = [[a["ptr"], fmt_bytes(a["size"]), a["size"],
                     fmt_dev(a["dev"]), a["api"], a["tid"], a["kind"],
                     a["gen"] if a["gen"] is not None else "-",
                     fmt_ns(a["t_ns"]) + (" (parent)" if a["inherited"]
                                          else "")] for a in lst]
            out.append(table(["ptr", "size", "bytes", "dev", "API", "tid",
                              "kind", "gen", "allocated at"], rows,
                             right={1, 2, 5, 7, 8}, indent="    "))
    return "\n".join(out) + "\n"


