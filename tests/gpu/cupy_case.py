# SPDX-License-Identifier: MIT
"""gpu-check: CuPy allocate/free loops over its default memory pool
(cudaMalloc underneath) and over MemoryAsyncPool (cudaMallocAsync), plus
raw cupy.cuda.runtime.malloc/free with exact pointer checks (protocol:
gpu_check.py).  Exit 77: no cupy or no GPU."""
import gc
import os
import sys
import time

print("GH-PID %d" % os.getpid(), flush=True)
try:
    import cupy as cp
except Exception as e:  # noqa: BLE001
    print("GH-SKIP cupy not importable: %s" % e, flush=True)
    sys.exit(77)
try:
    if cp.cuda.runtime.getDeviceCount() < 1:
        raise RuntimeError("no device")
except Exception as e:  # noqa: BLE001
    print("GH-SKIP no CUDA device for cupy: %s" % e, flush=True)
    sys.exit(77)

rt = cp.cuda.runtime


def snap(label, arrays=(), gone=()):
    cp.cuda.Device(0).synchronize()
    lines = ["GH-IN 0x%x %d one" % (a.data.ptr, a.nbytes)
             for a in arrays if a.nbytes]
    lines += ["GH-GONE 0x%x %d" % g for g in gone]
    print("GH-CASE cupy-%s" % label)
    print("GH-T %d %s" % (time.monotonic_ns(), label))
    if lines:
        print("\n".join(lines))
    sys.stdout.flush()


# raw runtime calls: exact pointers
print("GH-CASE cupy-raw")
for n in (1 << 20, 12345, 8 << 20):
    p = rt.malloc(n)
    print("GH-PTR alloc cudaMalloc 0x%x %d" % (p, n))
    rt.memset(p, 1, n)
    print("GH-PTR free cudaFree 0x%x" % p, flush=True)
    rt.free(p)
h = rt.hostAlloc(1 << 16, 0)
print("GH-PTR alloc cudaHostAlloc 0x%x %d" % (h, 1 << 16))
print("GH-PTR free cudaFreeHost 0x%x" % h, flush=True)
rt.freeHost(h)


def loop(label):
    keep = []
    ranges = []
    for i in range(200):
        n = 1000 + (i * 7919) % (1 << 20)
        a = cp.arange(n, dtype=cp.float32)
        b = a * 2 + 1
        if float(b[-1]) != 2 * (n - 1) + 1:
            print("GH-FAIL %s: wrong value at %d" % (label, i), flush=True)
        keep.append(b)
        if len(keep) > 16:
            keep.pop(0)
    big = cp.ones(256 << 20, dtype=cp.uint8)
    keep.append(big)
    snap(label, keep)
    ranges = [(a.data.ptr, a.nbytes) for a in keep]
    del keep, a, b, big
    gc.collect()
    return ranges


pool = cp.get_default_memory_pool()
ranges = loop("pool")
pool.free_all_blocks()
if pool.used_bytes() == 0 and pool.total_bytes() == 0:
    snap("pool-freed", gone=ranges)
else:
    print("# pool still holds %d/%d bytes: no GONE check"
          % (pool.used_bytes(), pool.total_bytes()))

try:
    apool = cp.cuda.MemoryAsyncPool()
    cp.cuda.set_allocator(apool.malloc)
    ranges = loop("async")
    cp.cuda.Device(0).synchronize()
    snap("async-freed", gone=ranges)
    cp.cuda.set_allocator(pool.malloc)
except Exception as e:  # noqa: BLE001
    print("GH-FAIL MemoryAsyncPool: %r" % (e,), flush=True)

print("GH-OK cupy done", flush=True)
