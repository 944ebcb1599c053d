# SPDX-License-Identifier: MIT
"""gpu-check: a small PyTorch training loop on CUDA, printing the caching
allocator's segments and the tensors' storage ranges at a few points, with
the CLOCK_MONOTONIC time of each snapshot (protocol: gpu_check.py).

Run with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True for the VMM
(cuMemCreate/cuMemMap) path of the allocator, backend:cudaMallocAsync for
the driver's stream-ordered pool (no segments to print there: each
storage is one cudaMallocAsync allocation).  Exit 77: no torch or no GPU.
"""
import os
import sys
import time

print("GH-PID %d" % os.getpid(), flush=True)
try:
    import torch
except Exception as e:  # noqa: BLE001 - any import failure means skip
    print("GH-SKIP torch not importable: %s" % e, flush=True)
    sys.exit(77)
if not torch.cuda.is_available():
    print("GH-SKIP torch.cuda.is_available() is False", flush=True)
    sys.exit(77)

EXPANDABLE = any("expandable_segments:true" in
                 os.environ.get(v, "").replace(" ", "").lower()
                 for v in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"))
ASYNC = any("backend:cudamallocasync" in
            os.environ.get(v, "").replace(" ", "").lower()
            for v in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"))
dev = torch.device("cuda", 0)
torch.manual_seed(0)


def segments():
    out = []
    if ASYNC:       # the async backend has no snapshot
        return out
    for s in torch.cuda.memory_snapshot():
        if s.get("device", 0) != 0:
            continue
        out.append((int(s["address"]), int(s["total_size"]),
                    bool(s.get("is_expandable", EXPANDABLE))))
    return out


def snapshot(label, tensors=(), gone=()):
    """Print the segments, the storages of tensors, and ranges that must
    be gone, then the time they all held at."""
    torch.cuda.synchronize()
    segs = segments()
    lines = []
    n_exp = 0
    for a, n, exp in segs:
        n_exp += exp
        lines.append("GH-SEG 0x%x %d %s" % (a, n, "union" if exp else "one"))
    seen = set()
    for t in tensors:
        if t is None or not t.is_cuda:
            continue
        st = t.untyped_storage()
        p, n = st.data_ptr(), st.nbytes()
        if n == 0 or p in seen:
            continue
        seen.add(p)
        lines.append("GH-IN 0x%x %d %s" % (p, n,
                                          "union" if EXPANDABLE else "one"))
    for a, n in gone:
        lines.append("GH-GONE 0x%x %d" % (a, n))
    t_ns = time.monotonic_ns()
    print("GH-CASE torch-%s" % label)
    print("GH-T %d %s" % (t_ns, label))
    print("\n".join(lines))
    print("# %s: %d segments (%d expandable), %d storages, reserved %d"
          % (label, len(segs), n_exp, len(seen),
             torch.cuda.memory_reserved()), flush=True)
    if EXPANDABLE and segs and not n_exp:
        print("GH-FAIL expandable_segments requested but no segment is "
              "expandable", flush=True)
    return segs


def minus(a, b):
    """Intervals of the union of a not in the union of b."""
    out = []
    bs = sorted((x, x + n) for x, n, *_ in b)
    for x, n, *_ in sorted(a):
        lo, hi = x, x + n
        for b0, b1 in bs:
            if b1 <= lo or b0 >= hi:
                continue
            if b0 > lo:
                out.append((lo, b0 - lo))
            lo = max(lo, b1)
            if lo >= hi:
                break
        if lo < hi:
            out.append((lo, hi - lo))
    return out


def live_tensors(model, opt, extra=()):
    ts = list(model.parameters())
    ts += [p.grad for p in model.parameters() if p.grad is not None]
    for st in opt.state.values():
        ts += [v for v in st.values() if torch.is_tensor(v)]
    return ts + list(extra)


model = torch.nn.Sequential(
    torch.nn.Linear(1024, 2048), torch.nn.ReLU(),
    torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
    torch.nn.Linear(2048, 10)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
lossf = torch.nn.CrossEntropyLoss()
snapshot("init", live_tensors(model, opt))

STEPS = 50
loss = None
for step in range(STEPS):
    bs = 256 + 128 * (step % 4)         # varying sizes: more blocks
    x = torch.randn(bs, 1024, device=dev)
    y = torch.randint(0, 10, (bs,), device=dev)
    opt.zero_grad(set_to_none=True)
    loss = lossf(model(x), y)
    loss.backward()
    opt.step()
    if step in (0, STEPS // 2, STEPS - 1):
        snapshot("step%d" % step, live_tensors(model, opt, (x, y, loss)))
final = float(loss.item())

# Large tensors force new segments; freeing them and emptying the cache
# must show as frees in the log.
big = [torch.empty(300 << 20, dtype=torch.uint8, device=dev),
       torch.empty(64 << 20, dtype=torch.uint8, device=dev),
       torch.empty(3 << 20, dtype=torch.uint8, device=dev)]
for b in big:
    b.fill_(1)
snapshot("big", live_tensors(model, opt, big))
del big, b, x, y, loss
torch.cuda.synchronize()
before = snapshot("freed", live_tensors(model, opt))
torch.cuda.empty_cache()
after = segments()
snapshot("empty_cache", live_tensors(model, opt), gone=minus(before, after))
if not (final == final) or final > 100:
    print("GH-FAIL training diverged: loss %r" % final, flush=True)
else:
    print("GH-OK torch %s: %d steps, final loss %.4f"
          % ("expandable" if EXPANDABLE else "cudaMallocAsync" if ASYNC
             else "default", STEPS, final),
          flush=True)
