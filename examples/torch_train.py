#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A small PyTorch training loop to watch under gdrhook on a GPU machine.

It trains a little MLP on synthetic data with a batch size that changes
every few steps, so PyTorch's caching allocator grows, reuses and (at the
end, torch.cuda.empty_cache()) returns memory: the cudaMalloc/cudaFree
traffic a registration cache sees from a real framework.  PyTorch knows
nothing of gdrhook:

    make
    LD_PRELOAD=$PWD/build/libgdrhook.so GDRHOOK_TRACE=trace.jsonl \\
        python3 examples/torch_train.py
    scripts/tools/gdrhook-trace summary trace.jsonl
    scripts/tools/gdrhook-trace plot trace.jsonl -o trace.svg

PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync switches PyTorch to
stream-ordered pool allocations (cudaMallocAsync/cudaFreeAsync in the log).
With gdrhook preloaded the script also asks the registry (the gdrhook
Python package: `make` builds it in build/python, `make install` and the
python3-gdrhook package install it) which allocation holds a weight
tensor and with what generation, and prints the counters.

Without PyTorch or without a CUDA GPU it says so and exits 0.
"""

import argparse
import errno
import os
import sys
import time


def gdrhook_module():
    """The gdrhook package when this process has the library preloaded,
    else None.  Installed, or the build tree's (build/python)."""
    try:
        import gdrhook
    except ImportError:
        tree = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "..", "build", "python")
        sys.path.append(os.path.normpath(tree))
        try:
            import gdrhook
        except ImportError:
            return None
    return gdrhook if gdrhook.preloaded() else None


def show_lookup(gh, what, tensor):
    try:
        r = gh.lookup(tensor)
    except gh.GdrhookError as e:
        print("  %-22s %#x: registry answers -%s" % (
            what, tensor.data_ptr(), errno.errorcode.get(e.errno, e.errno)))
        return
    if r is None:
        print("  %-22s %#x: in no tracked allocation" % (what,
                                                         tensor.data_ptr()))
    else:
        print("  %-22s %#x: in a %s allocation at %#x of %d bytes, gen %d"
              % (what, tensor.data_ptr(), r.kind, r.base, r.size, r.gen))


def show_stats(gh, when):
    st = gh.stats()
    print("gdrhook %s: %d allocations, %d frees, %d live (%.1f MiB), "
          "peak %.1f MiB, registry %s"
          % (when, st["allocs"], st["frees"], st["live"],
             st["live_bytes"] / 2**20, st["peak_live_bytes"] / 2**20,
             "trusted" if gh.trusted() else "UNTRUSTED"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--device", default="cuda:0")
    args = ap.parse_args()
    if args.steps < 1 or args.hidden < 1:
        ap.error("--steps and --hidden must be at least 1")

    gh = gdrhook_module()
    print("gdrhook %s" % ("is preloaded" if gh else
                          "is not preloaded (run with LD_PRELOAD=.../"
                          "libgdrhook.so to trace this)"))
    try:
        import torch
    except ImportError:
        print("torch_train: PyTorch is not installed here; nothing to do "
              "(pip install torch on a GPU machine)")
        return 0
    if not torch.cuda.is_available():
        print("torch_train: PyTorch %s sees no CUDA GPU here; nothing to do"
              % torch.__version__)
        return 0

    torch.manual_seed(0)
    dev = torch.device(args.device)
    print("PyTorch %s on %s" % (torch.__version__,
                                torch.cuda.get_device_name(dev)))
    d_in, d_out = 256, 10
    model = torch.nn.Sequential(
        torch.nn.Linear(d_in, args.hidden), torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, args.hidden), torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, d_out)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    teacher = torch.randn(d_in, d_out, device=dev)
    if gh:
        show_lookup(gh, "first layer weight", model[0].weight)

    t0 = time.monotonic()
    batches = (64, 256, 1024, 4096)
    for step in range(1, args.steps + 1):
        # A new batch size every 25 steps makes the allocator grow.
        bs = batches[(step // 25) % len(batches)]
        x = torch.randn(bs, d_in, device=dev)
        y = (x @ teacher).argmax(dim=1)
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == args.steps:
            print("step %4d  batch %4d  loss %.4f" % (step, bs, loss.item()))
    torch.cuda.synchronize(dev)
    print("%d steps in %.2f s; PyTorch reserved at most %.1f MiB"
          % (args.steps, time.monotonic() - t0,
             torch.cuda.max_memory_reserved(dev) / 2**20))
    if gh:
        show_lookup(gh, "first layer weight", model[0].weight)
        show_stats(gh, "after training")

    del model, opt, x, y, loss, teacher
    torch.cuda.empty_cache()    # hands cached segments back: cudaFree
    if gh:
        show_stats(gh, "after empty_cache")
    return 0


if __name__ == "__main__":
    sys.exit(main())
