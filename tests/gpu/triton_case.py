# SPDX-License-Identifier: MIT
"""gpu-check: a Triton kernel on PyTorch tensors (the kernel's launch
state comes from the driver directly; the tensors from the caching
allocator), checked against the event log (protocol: gpu_check.py).
Exit 77: no triton, no torch or no GPU."""
import os
import sys
import time

print("GH-PID %d" % os.getpid(), flush=True)
try:
    import torch
    import triton
    import triton.language as tl
except Exception as e:  # noqa: BLE001 - any import failure means skip
    print("GH-SKIP triton or torch not importable: %s" % e, flush=True)
    sys.exit(77)
if not torch.cuda.is_available():
    print("GH-SKIP torch.cuda.is_available() is False", flush=True)
    sys.exit(77)


@triton.jit
def axpy(x_ptr, y_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, a * x + y, mask=m)


def run(n):
    # small integers: a * x + y is exact in float32, fused or not
    x = torch.randint(-1000, 1000, (n,), device="cuda").float()
    y = torch.randint(-1000, 1000, (n,), device="cuda").float()
    out = torch.empty_like(x)
    axpy[(triton.cdiv(n, 1024),)](x, y, out, 3.0, n, BLOCK=1024)
    return x, y, out


bad = 0
held = []
for n in (1000, 1 << 16, 3 << 20, 12345):
    x, y, out = run(n)
    if not torch.equal(out, 3.0 * x + y):
        print("GH-FAIL triton axpy wrong for n=%d" % n, flush=True)
        bad += 1
    held += [x, y, out]
torch.cuda.synchronize()
print("GH-CASE triton-tensors")
print("GH-T %d tensors" % time.monotonic_ns())
print("\n".join("GH-IN 0x%x %d one" % (t.untyped_storage().data_ptr(),
                                       t.untyped_storage().nbytes())
                for t in held))
del held, x, y, out
torch.cuda.empty_cache()
if not bad:
    print("GH-OK triton %s: axpy on 4 sizes" % triton.__version__,
          flush=True)
