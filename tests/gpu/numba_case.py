# SPDX-License-Identifier: MIT
"""gpu-check: numba-cuda device arrays (one cuMemAlloc each, freed when
numba's deferred deallocation runs) and a kernel on them, checked against
the event log (protocol: gpu_check.py).  After the program drops its
arrays and flushes numba's deferred frees, an array numba has still not
freed is checked as live, with a note, not as freed: numba never called
cuMemFree for it, so the shim is right to keep it (H100 runs found the
last array in that state).  What numba freed is known from the
destructors its deferred-deallocation queue ran (wrapped here); where that
queue cannot be wrapped, from its memory manager's table and a weak
reference to the array's memory.  Everything numba did free must be gone
from the log.  Exit 77: no numba or no GPU."""
import gc
import os
import sys
import time
import weakref

print("GH-PID %d" % os.getpid(), flush=True)
try:
    import numpy as np
    # a numba that still names np.row_stack compiles no kernel under a
    # numpy that removed that alias of vstack (seen on the H100 machine)
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
    from numba import cuda
except Exception as e:  # noqa: BLE001 - any import failure means skip
    print("GH-SKIP numba not importable: %s" % e, flush=True)
    sys.exit(77)
try:
    if not cuda.is_available():
        raise RuntimeError("cuda.is_available() is False")
except Exception as e:  # noqa: BLE001
    print("GH-SKIP no CUDA device for numba: %s" % e, flush=True)
    sys.exit(77)


@cuda.jit
def scale_add(x, y, out, a):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = a * x[i] + y[i]


def ranges(arrs):
    return [(a.device_ctypes_pointer.value, a.nbytes) for a in arrs]


def owner_ref(a):
    """A weak reference to the object that owns a's device memory."""
    for o in (getattr(a, "gpu_data", None), a):
        try:
            return weakref.ref(o)
        except TypeError:
            continue
    return None


def numba_allocations():
    """numba's table of allocations it has not freed yet (keyed by device
    address), or None where this numba has none."""
    try:
        mm = cuda.current_context().memory_manager
        return mm.allocations
    except Exception:  # noqa: BLE001 - another numba, another layout
        return None


def as_int(h):
    """A device pointer handle as an int (ctypes or cuda-python)."""
    for f in (lambda x: int(x), lambda x: int(x.value),
              lambda x: int(getattr(x, "getPtr")())):
        try:
            return f(h)
        except Exception:  # noqa: BLE001 - try the next form
            continue
    return None


destroyed = set()  # device pointers numba passed to cuMemFree


def wrap_free():
    """Record each pointer numba frees: its driver object resolves
    cuMemFree once and caches it as an attribute, which the deferred
    destructors look up when they are queued.  False where this numba has
    no such object."""
    try:
        from numba.cuda.cudadrv import driver as drvmod
        d = drvmod.driver
        orig = getattr(d, "cuMemFree")
    except Exception:  # noqa: BLE001 - another numba, another layout
        return False

    def cuMemFree(ptr, *rest):
        r = orig(ptr, *rest)
        v = as_int(ptr)
        if v is not None:
            destroyed.add(v)
        return r
    try:
        setattr(d, "cuMemFree", cuMemFree)
    except Exception:  # noqa: BLE001
        return False
    return True


wrapped = wrap_free()


def still_held(ptr, ref, allocs):
    """Why numba has not freed the array at ptr, or None if it has."""
    if wrapped and destroyed:
        return None if ptr in destroyed else (
            "numba never passed it to cuMemFree")
    if allocs is not None and ptr in allocs:
        mem = allocs[ptr]
        return "numba's memory manager still lists it (%d owners)" % (
            getattr(mem, "refct", -1))
    if ref is not None and ref() is not None:
        return "its device memory object is still referenced"
    return None


def snap(label, live=(), gone=()):
    cuda.synchronize()
    print("GH-CASE numba-%s" % label)
    print("GH-T %d %s" % (time.monotonic_ns(), label))
    lines = ["GH-IN 0x%x %d one" % r for r in live]
    lines += ["GH-GONE 0x%x %d" % r for r in gone]
    if lines:
        print("\n".join(lines))
    sys.stdout.flush()


bad = 0
held = []
dx = dy = dout = None
for n in (1000, 1 << 16, 3 << 20, 12345):
    hx = np.arange(n, dtype=np.float32)
    hy = np.ones(n, dtype=np.float32)
    dx, dy = cuda.to_device(hx), cuda.to_device(hy)
    dout = cuda.device_array_like(dx)
    held += [dx, dy, dout]
    try:
        scale_add[(n + 255) // 256, 256](dx, dy, dout, np.float32(2.0))
    except Exception as e:  # noqa: BLE001 - say why, go on with the arrays
        print("GH-FAIL numba kernel for n=%d: %r" % (n, e), flush=True)
        bad += 1
        continue
    if not np.array_equal(dout.copy_to_host(), 2.0 * hx + hy):
        print("GH-FAIL numba kernel wrong for n=%d" % n, flush=True)
        bad += 1
live = ranges(held)
refs = [owner_ref(a) for a in held]
snap("arrays", live=live)
# numba defers frees; a deallocation flush frees them now
del held, dx, dy, dout
gc.collect()  # a reference cycle can hold the last array past the del
kept = []
try:
    cuda.current_context().deallocations.clear()
except Exception as e:  # noqa: BLE001
    print("GH-FAIL numba: flushing deferred frees: %r" % (e,), flush=True)
else:
    gone = []
    allocs = numba_allocations()
    for r, ref in zip(live, refs):
        why = still_held(r[0], ref, allocs)
        if why is None:
            gone.append(r)
            continue
        kept.append(r)
        print("GH-NOTE numba has not freed array 0x%x+%d after the flush "
              "(%s): checked as live" % (r[0], r[1], why), flush=True)
    print("GH-NOTE numba's cuMemFree %s; %d pointers seen freed" % (
        "wrapped" if wrapped else "not wrapped (fallback checks)",
        len(destroyed)), flush=True)
    snap("freed", live=kept, gone=gone)
if not bad:
    print("GH-OK numba-cuda: kernel on 4 sizes, %d arrays freed, %d still "
          "held by numba" % (len(live) - len(kept), len(kept)), flush=True)
