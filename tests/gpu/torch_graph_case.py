# SPDX-License-Identifier: MIT
"""Graph memory nodes from PyTorch: torch.cuda.graph capture and replay.

Run under LD_PRELOAD=libgdrhook.so with GDRHOOK_VALIDATE=1 and
GDRHOOK_STATS=1, with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (the
capture makes graph alloc/free nodes) or without it (the caching
allocator's private pool).  Prints, after each replay, whether the shim's
registry and the driver agree about the graph's output tensor.  Exit 77:
no torch or no GPU.  gpu-check runs it (protocol: gpu_check.py): GH-FAIL
on any disagreement, a wrong result or an untrusted registry at exit.
"""
import ctypes
import os
import sys

print("GH-PID %d" % os.getpid(), flush=True)

try:
    import torch
except Exception as e:  # noqa: BLE001 - any import failure means skip
    print("GH-SKIP torch not importable: %s" % e, flush=True)
    sys.exit(77)
if not torch.cuda.is_available():
    print("GH-SKIP no GPU", flush=True)
    sys.exit(77)


class Range(ctypes.Structure):
    _fields_ = [("base", ctypes.c_uint64), ("size", ctypes.c_uint64),
                ("gen", ctypes.c_uint64), ("ctx", ctypes.c_uint64),
                ("pool", ctypes.c_uint64), ("dev", ctypes.c_int32),
                ("kind", ctypes.c_uint32), ("flags", ctypes.c_uint32),
                ("reserved", ctypes.c_uint32)]


me = ctypes.CDLL(None)
cuda = ctypes.CDLL("libcuda.so.1")
lookup = getattr(me, "gdrhook_lookup", None)
trusted = getattr(me, "gdrhook_trusted", None)


def driver_knows(ptr):
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    return cuda.cuMemGetAddressRange_v2(ctypes.byref(base),
                                        ctypes.byref(size),
                                        ctypes.c_uint64(ptr)) == 0


def check(label, t):
    ptr = t.data_ptr()
    drv = driver_knows(ptr)
    if lookup is None:
        print("%-28s driver=%d" % (label, drv), flush=True)
        return True
    r = Range()
    rc = lookup(ctypes.c_void_p(ptr), ctypes.c_size_t(1), ctypes.byref(r))
    ok = (rc == 0) == drv
    print("%-28s driver=%d registry=%d kind=%d %s" %
          (label, drv, rc == 0, r.kind if rc == 0 else 0,
           "AGREE" if ok else "DISAGREE"), flush=True)
    return ok


print("alloc conf: %s" % os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
      flush=True)
x = torch.randn(1 << 20, device="cuda")
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(2):
        y = (x * 2).relu()      # warm up outside capture
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y = (x * 2).relu()
    z = y + 1
bad = 0
bad += not check("after capture", z)
for i in range(3):
    x.normal_()
    g.replay()
    torch.cuda.synchronize()
    bad += not check("after replay %d" % (i + 1), z)
    if not torch.allclose(z, (x * 2).relu() + 1):
        print("WRONG RESULT", flush=True)
        bad += 1
del g, y, z
torch.cuda.synchronize()
torch.cuda.empty_cache()
tr = trusted() if trusted else None
print("SUMMARY disagree=%d trusted=%s" % (bad, "-" if tr is None else tr),
      flush=True)
if bad or tr == 0:
    print("GH-FAIL graph replay: %d disagreements, trusted=%s" % (bad, tr),
          flush=True)
else:
    print("GH-OK torch graph capture + 3 replays (%s)" %
          (os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or "default allocator"),
          flush=True)
