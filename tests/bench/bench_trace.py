#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Time and memory of gdrhook-trace on a large synthetic log.

Usage: tests/bench/bench_trace.py [--events N] [--threads T] [--keep DIR]
                                  [--log-version V] [--cache F]
                                  [--compare OTHER-TOOL]

Writes a log of N events (default 1e6) the way the library writes one:
T threads allocating and freeing, each thread's records flushed in chunks,
so the file is not in time order.  Then runs `summary`, `leaks` and
`perfetto` under /usr/bin/time -v (with the C reader when the tool has
it, and with --reader python) and prints wall time and peak memory
beside the anchor measured in the same run: a loop that only reads and
json-decodes every line, the floor for any pure-Python reader.
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(TOP, "scripts", "tools", "gdrhook-trace")

ANCHOR = r"""
import json, sys
dec = json.JSONDecoder().decode
n = 0
with open(sys.argv[1], "rb") as f:
    for line in f:
        dec(line.decode("utf-8", "replace"))
        n += 1
print(n)
"""


def write_log(path, events, threads, seed=11, version=1, cache=0.0):
    """`cache`: the share of steps that register a live buffer, as the
    library's registration cache logs it: the first time a `miss`, `pin`
    and `reg`, then a `hit`; freeing a pinned buffer logs `dereg` and
    `unpin` (one in ten: `revoke`) before the `free`."""
    rng = random.Random(seed)
    pid = 5000
    t = 7_000_000_000_000
    gen = 1
    bufs = {tid: [] for tid in range(pid, pid + threads)}
    live = {tid: [] for tid in bufs}
    pinned = set()
    n = 0
    with open(path, "w") as f:
        def put(s):
            f.write(s)
            f.write("\n")
        put(json.dumps({"ev": "start", "v": version, "t": t, "pid": pid,
                        "tid": pid, "exe": "/usr/bin/bench",
                        "wall_ns": 1_795_000_000_000_000_000},
                       separators=(",", ":")))
        n += 1
        tids = list(bufs)
        while n < events - 1:
            tid = rng.choice(tids)
            t += rng.randint(200, 3000)
            dur = rng.randint(1000, 30000)
            lv = live[tid]
            head = '{"t":%d,"pid":%d,"tid":%d,"ev":' % (t, pid, tid)
            if lv and cache and rng.random() < cache:
                g, ptr, size = lv[rng.randrange(len(lv))]
                fresh = g not in pinned
                if fresh:
                    pinned.add(g)
                    bufs[tid].append(
                        head + '"pin","ptr":"0x%x","size":%d,"gen":%d,'
                        '"dev":0,"backend":"dmabuf","rc":0,"dur_ns":%d}'
                        % (ptr, size, g, dur))
                    bufs[tid].append(
                        head + '"reg","ptr":"0x%x","size":%d,"gen":%d,'
                        '"mr":"0x%x","pd":"0x7000","access":15,"rc":0,'
                        '"dur_ns":%d}' % (ptr, size, g, 0x600000 + g,
                                          dur // 2))
                    n += 2
                bufs[tid].append(
                    head + '"%s","api":"ibv_reg_mr","ptr":"0x%x","size":%d,'
                    '"gen":%d,"dev":0,"mr":"0x%x","pd":"0x7000",'
                    '"access":15,"dur_ns":%d}'
                    % ("miss" if fresh else "hit", ptr, size, g,
                       0x600000 + g, dur // 40))
                t += dur // 40
                n += 1
                continue
            if lv and (len(lv) > 64 or rng.random() < 0.5):
                g, ptr, size = lv.pop(rng.randrange(len(lv)))
                ev, api, fapi = "free", "cuMemFree_v2", None
                if g in pinned:
                    pinned.discard(g)
                    if rng.random() < 0.1:
                        bufs[tid].append(
                            head + '"revoke","ptr":"0x%x","size":%d,'
                            '"gen":%d,"dev":0}' % (ptr, size, g))
                        n += 1
                    else:
                        bufs[tid].append(
                            head + '"dereg","ptr":"0x%x","size":%d,'
                            '"gen":%d,"mr":"0x%x","pd":"0x7000",'
                            '"access":15,"rc":0,"dur_ns":%d}'
                            % (ptr, size, g, 0x600000 + g, dur // 3))
                        bufs[tid].append(
                            head + '"unpin","ptr":"0x%x","size":%d,'
                            '"gen":%d,"dev":0,"backend":"dmabuf","rc":0,'
                            '"dur_ns":%d}' % (ptr, size, g, dur // 4))
                        n += 2
            else:
                gen += 1
                g, ptr, size = gen, 0x7f0000000000 + gen * 0x200000, \
                    rng.choice((4096, 1 << 20, 8 << 20))
                lv.append((g, ptr, size))
                ev, api, fapi = "alloc", "cuMemAlloc_v2", None
            del fapi
            bufs[tid].append(
                '{"t":%d,"pid":%d,"tid":%d,"ev":"%s","api":"%s",'
                '"ptr":"0x%x","size":%d,"dev":0,"gen":%d,"kind":"device",'
                '"ctx":"0x5555aaaa0000","rc":0,"dur_ns":%d}'
                % (t, pid, tid, ev, api, ptr, size, g, dur))
            t += dur
            n += 1
            if len(bufs[tid]) >= 256:      # a ring drained by the writer
                for s in bufs[tid]:
                    put(s)
                bufs[tid] = []
        for tid in tids:
            for s in bufs[tid]:
                put(s)
        nlive = sum(len(v) for v in live.values())
        put(json.dumps({"ev": "exit", "t": t + 1000, "pid": pid, "tid": pid,
                        "events": n + 1, "dropped": 0, "live": nlive,
                        "live_bytes": sum(x[2] for v in live.values()
                                          for x in v)},
                       separators=(",", ":")))
    return n + 1


def timed(cmd):
    """(wall s, CPU s, max RSS MiB, rc) of cmd under /usr/bin/time -v."""
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = rss = None
    cpu = 0.0
    for ln in p.stderr.decode("utf-8", "replace").splitlines():
        ln = ln.strip()
        if ln.startswith("Elapsed (wall clock) time"):
            v = ln.rsplit(" ", 1)[1]
            parts = [float(x) for x in v.split(":")]
            wall = sum(x * 60 ** i for i, x in enumerate(reversed(parts)))
        elif ln.startswith("Maximum resident set size"):
            rss = int(ln.rsplit(" ", 1)[1]) / 1024.0
        elif ln.startswith(("User time", "System time")):
            cpu += float(ln.rsplit(" ", 1)[1])
    return wall, cpu, rss, p.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1000000)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--log-version", type=int, default=2, metavar="V",
                    help="format version the log announces (default 2, "
                    "what the library writes; the records' layout is the "
                    "same)")
    ap.add_argument("--cache", type=float, default=0.0, metavar="F",
                    help="share of events that are registration-cache hits "
                    "(default 0: allocations and frees only)")
    ap.add_argument("--keep", metavar="DIR",
                    help="write the log here and keep it")
    ap.add_argument("--compare", metavar="TOOL",
                    help="also time another gdrhook-trace (e.g. an older "
                    "one, from git show REV:PATH)")
    args = ap.parse_args()
    if not os.access("/usr/bin/time", os.X_OK):
        print("bench_trace: /usr/bin/time (GNU time) is needed")
        return 77
    tmp = args.keep or tempfile.mkdtemp(prefix="bench_trace.")
    os.makedirs(tmp, exist_ok=True)
    try:
        log = os.path.join(tmp, "bench.jsonl")
        n = write_log(log, args.events, args.threads,
                      version=args.log_version, cache=args.cache)
        print("log: %d events (%.0f%% cache hits), %d threads, %.1f MiB; "
              "%d CPUs, load %.2f"
              % (n, args.cache * 100, args.threads,
                 os.path.getsize(log) / 2 ** 20, os.cpu_count(),
                 os.getloadavg()[0]))
        ver = subprocess.run([sys.executable, TOOL, "--version"],
                             capture_output=True, text=True).stdout
        print("tool: " + " / ".join(ver.split("\n")[:2]))
        # On a shared machine the wall time follows the load; the CPU time
        # (user + system) much less: both are printed.
        print("%-28s %9s %8s %10s %12s %9s" % (
            "", "wall (s)", "CPU (s)", "max RSS", "CPU us/event",
            "x anchor"))
        rows = [("anchor: read + json decode",
                 [sys.executable, "-c", ANCHOR, log])]
        for sub in ("summary", "leaks", "perfetto"):
            rows.append(("gdrhook-trace " + sub,
                         [sys.executable, TOOL, sub, log, "-o", os.devnull]))
            if "reader: C" in ver:
                rows.append(("  --reader python", [
                    sys.executable, TOOL, sub, "--reader", "python", log,
                    "-o", os.devnull]))
            if args.compare:
                rows.append(("  compared: " + sub, [
                    sys.executable, args.compare, sub, log, "-o",
                    os.devnull]))
        anchor = None
        for name, cmd in rows:
            wall, cpu, rss, rc = timed(cmd)
            if rc != 0 or wall is None:
                print("%-28s failed (exit %d)" % (name, rc))
                continue
            anchor = anchor or cpu
            print("%-28s %9.2f %8.2f %6.0f MiB %12.2f %9.2f"
                  % (name, wall, cpu, rss, cpu / n * 1e6, cpu / anchor))
        print("load average after: %.2f" % os.getloadavg()[0])
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
