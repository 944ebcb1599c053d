#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Self-test of tests/gpu/gpu_check.py on synthetic logs: the snapshot
checks (GH-T/SEG/IN/GONE) that only PyTorch and CuPy exercise on a GPU,
and the failures the checker must catch.  Prints "N passed, N failed"."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "gpu_check.py")
PID = 4242


def rec(t, ev, **kw):
    r = {"t": t, "pid": PID, "tid": PID, "ev": ev}
    r.update(kw)
    return r


def alloc(t, ptr, size, api="cudaMalloc", kind="device", ctx="0xc", rc=0):
    return rec(t, "alloc", api=api, ptr=hex(ptr), size=size, dev=0, gen=1,
               kind=kind, ctx=ctx, rc=rc, dur_ns=1)


def free(t, ptr, size, api="cudaFree", kind="device", **kw):
    return rec(t, "free", api=api, ptr=hex(ptr), size=size, dev=0, gen=1,
               kind=kind, ctx="0xc", rc=0, dur_ns=1, **kw)


def run(tmp, name, recs, out_lines, flags=(), exit_live=None):
    logp = os.path.join(tmp, "%s.plain.%d.jsonl" % (name, PID))
    live = {}
    for r in recs:
        if r["ev"] == "alloc" and r["rc"] == 0:
            live[r["ptr"]] = r["size"]
        elif r["ev"] == "free":
            live.pop(r["ptr"], None)
    with open(logp, "w") as f:
        f.write(json.dumps({"ev": "start", "v": 1, "t": 1, "pid": PID,
                            "tid": PID, "exe": "x"}) + "\n")
        for r in recs:
            f.write(json.dumps(r) + "\n")
        n = len(live) if exit_live is None else exit_live
        f.write(json.dumps({"ev": "exit", "t": 10 ** 6, "pid": PID,
                            "tid": PID, "events": len(recs), "dropped": 0,
                            "live": n, "live_bytes": sum(live.values())
                            if exit_live is None else 0}) + "\n")
    outp = os.path.join(tmp, name + ".plain.out")
    with open(outp, "w") as f:
        f.write("GH-PID %d\n" % PID)
        f.write("\n".join(out_lines) + "\n")
    js = os.path.join(tmp, name + ".plain.result.json")
    p = subprocess.run([sys.executable, CHECK, "check", "--case", name,
                        "--stdout", outp, "--logs",
                        os.path.join(tmp, name + ".plain.*.jsonl"),
                        "--json", js] + list(flags),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    with open(js) as f:
        return json.load(f), p.stdout


BASE = [alloc(10, 0x1000, 0x1000), alloc(20, 0x3000, 0x2000),
        free(40, 0x1000, 0x1000)]
VMM = [alloc(10, 0x10000, 0x1000, "cuMemMap", "vmm"),
       alloc(11, 0x11000, 0x1000, "cuMemMap", "vmm"),
       alloc(12, 0x13000, 0x1000, "cuMemMap", "vmm")]

CASES = [
    # name, records, program lines, flags, want status
    ("seg-ok", BASE, ["GH-T 30", "GH-SEG 0x1000 4096 one",
                      "GH-IN 0x3100 16 one", "GH-T 50",
                      "GH-GONE 0x1000 4096", "GH-SEG 0x3000 8192 one"],
     ["--allow-live"], "pass"),
    ("seg-after-free", BASE, ["GH-T 50", "GH-SEG 0x1000 4096 one"],
     ["--allow-live"], "fail"),
    ("gone-too-early", BASE, ["GH-T 30", "GH-GONE 0x1000 16"],
     ["--allow-live"], "fail"),
    ("seg-too-big", BASE, ["GH-T 30", "GH-SEG 0x3000 8193 one"],
     ["--allow-live"], "fail"),
    ("union-ok", VMM, ["GH-T 20", "GH-SEG 0x10000 8192 union",
                       "GH-IN 0x10ff0 32 union"], ["--allow-live"], "pass"),
    ("union-as-one", VMM, ["GH-T 20", "GH-IN 0x10ff0 32 one"],
     ["--allow-live"], "fail"),
    ("union-gap", VMM, ["GH-T 20", "GH-SEG 0x10000 16384 union"],
     ["--allow-live"], "fail"),
    ("live-at-exit", BASE, [], [], "fail"),
    ("leak-declared", BASE, ["GH-PTR leak 0x3000"], [], "pass"),
    ("ptr-ok", BASE, ["GH-CASE device", "GH-T 5",
                      "GH-PTR alloc cudaMalloc 0x1000 4096",
                      "GH-PTR alloc cudaMalloc 0x3000 8192",
                      "GH-PTR free cudaFree 0x1000", "GH-PTR leak 0x3000"],
     [], "pass"),
    ("ptr-driver-name", [alloc(10, 0x1000, 4096, "cuMemAlloc_v2"),
                         free(20, 0x1000, 4096, "cuMemFree_v2")],
     ["GH-PTR alloc cudaMalloc 0x1000 4096", "GH-PTR free cudaFree 0x1000"],
     [], "pass"),
    ("ptr-driver-name-strict", [alloc(10, 0x1000, 4096, "cuMemAlloc_v2"),
                                free(20, 0x1000, 4096, "cuMemFree_v2")],
     ["GH-PTR alloc cudaMalloc 0x1000 4096", "GH-PTR free cudaFree 0x1000"],
     ["--strict"], "fail"),
    ("ptr-wrong-family", [alloc(10, 0x1000, 4096, "cuMemAllocManaged"),
                          free(20, 0x1000, 4096, "cuMemFree_v2")],
     ["GH-PTR alloc cudaMalloc 0x1000 4096", "GH-PTR free cudaFree 0x1000"],
     [], "fail"),
    ("size-smaller", [alloc(10, 0x1000, 4000), free(20, 0x1000, 4000)],
     ["GH-PTR alloc cudaMalloc 0x1000 4096", "GH-PTR free cudaFree 0x1000"],
     [], "fail"),
    ("free-missing", [alloc(10, 0x1000, 4096)],
     ["GH-PTR alloc cudaMalloc 0x1000 4096", "GH-PTR free cudaFree 0x1000"],
     [], "fail"),
    ("free-untracked", [free(20, 0x1000, 0, tracked=False)], [], [],
     "fail"),
    ("double-alloc", [alloc(10, 0x1000, 4096), alloc(20, 0x1800, 16)],
     [], ["--allow-live"], "fail"),
    ("reset-wrong-api", [alloc(10, 0x1000, 4096), alloc(11, 0x5000, 64),
                  free(20, 0x5000, 64, implicit=True),
                  free(20, 0x1000, 4096, implicit=True),
                  rec(21, "ctx_reset", api="cudaDeviceReset", ctx="0xc",
                      dev=0, rc=0, dur_ns=1, dropped=2, dropped_bytes=4160)],
     ["GH-PTR alloc cudaMalloc 0x1000 4096",
      "GH-PTR alloc cudaMallocManaged 0x5000 64",
      "GH-PTR reset cudaDeviceReset"], [], "fail"),   # api family wrong
    ("reset-ok2", [alloc(10, 0x1000, 4096), alloc(11, 0x5000, 64),
                   free(20, 0x5000, 64, implicit=True),
                   free(20, 0x1000, 4096, implicit=True),
                   rec(21, "ctx_reset", api="cudaDeviceReset", ctx="0xc",
                       dev=0, rc=0, dur_ns=1, dropped=2,
                       dropped_bytes=4160)],
     ["GH-PTR alloc cudaMalloc 0x1000 4096",
      "GH-PTR alloc cudaMalloc 0x5000 64",
      "GH-PTR reset cudaDeviceReset"], [], "pass"),
    ("reset-missed", [alloc(10, 0x1000, 4096), alloc(11, 0x5000, 64),
                      free(20, 0x1000, 4096, implicit=True),
                      rec(21, "ctx_reset", api="cudaDeviceReset",
                          ctx="0xc", dev=0, rc=0, dur_ns=1, dropped=1,
                          dropped_bytes=4096)],
     ["GH-PTR alloc cudaMalloc 0x1000 4096",
      "GH-PTR alloc cudaMalloc 0x5000 64",
      "GH-PTR reset cudaDeviceReset"], ["--allow-live"], "fail"),
    ("untrusted", BASE + [rec(50, "untrusted", api="cuX", why="y")], [],
     ["--allow-live"], "fail"),
    ("program-fail", BASE, ["GH-FAIL something"], ["--allow-live"], "fail"),
    ("skip", [], ["GH-SKIP no torch"], [], "skip"),
]


def main():
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, recs, lines, flags, want in CASES:
            res, out = run(tmp, name, recs, lines, flags)
            if res["status"] == want:
                passed += 1
            else:
                failed += 1
                print("FAIL %s: status %s, want %s" % (name, res["status"],
                                                      want))
                print("  " + out.replace("\n", "\n  "))
        # the table: one failing case -> exit 1
        p = subprocess.run([sys.executable, CHECK, "table", "--out", tmp],
                           stdout=subprocess.PIPE, universal_newlines=True)
        if p.returncode == 1 and "overall: FAIL" in p.stdout:
            passed += 1
        else:
            failed += 1
            print("FAIL table: rc %d" % p.returncode)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
