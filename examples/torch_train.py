#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A small PyTorch training loop to watch under gdrhook on a GPU machine.

It trains a little MLP on synthetic data with a batch size that changes
every few steps, so PyTorch's caching allocator grows, reuses and (at the
end, torch.cuda.empty_cache()) returns memory: the cudaMalloc/cudaFree
traffic a registration cache sees from a real framework.  PyTorch knows
nothing of gdrhook:

    make
    LD_PRELOAD=$PWD/build/libgdrhook.so GDRHOOK_LOG=trace.jsonl \\
        python3 examples/torch_train.py
    scripts/tools/gdrhook-trace summary trace.jsonl
    scripts/tools/gdrhook-trace plot trace.jsonl -o trace.svg

PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync switches PyTorch to
stream-ordered pool allocations (cudaMallocAsync/cudaFreeAsync in the log).
With gdrhook preloaded the script also asks the registry (through ctypes,
the way a library that does not link gdrhook would) which allocation holds
a weight tensor and with what generation.

Without PyTorch or without a CUDA GPU it says so and exits 0.
"""

import argparse
import ctypes
import errno
import sys
import time


class Range(ctypes.Structure):
    """struct gdrhook_range (include/gdrhook.h)."""
    _fields_ = [("base", ctypes.c_uint64), ("size", ctypes.c_uint64),
                ("gen", ctypes.c_uint64), ("ctx", ctypes.c_uint64),
                ("pool", ctypes.c_uint64), ("dev", ctypes.c_int32),
                ("kind", ctypes.c_uint32), ("flags", ctypes.c_uint32),
                ("reserved", ctypes.c_uint32)]


class Stats(ctypes.Structure):
    """struct gdrhook_stats (include/gdrhook.h)."""
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "size", "allocs", "frees", "frees_untracked", "failed_calls",
        "implicit_frees", "live", "live_bytes", "peak_live_bytes",
        "lookups", "untrusted", "audit_checks", "audit_disagreements",
        "log_events", "log_dropped")]


KINDS = ("none", "device", "managed", "host", "host_registered", "pool",
         "vmm", "ipc")


def gdrhook():
    """The preloaded gdrhook API, found in the process, or None."""
    try:
        lib = ctypes.CDLL(None)
        lib.gdrhook_api_version.restype = ctypes.c_uint
        lib.gdrhook_api_version()
    except (AttributeError, OSError):
        return None
    lib.gdrhook_lookup.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                   ctypes.POINTER(Range)]
    lib.gdrhook_lookup.restype = ctypes.c_int
    lib.gdrhook_get_stats.argtypes = [ctypes.POINTER(Stats)]
    lib.gdrhook_get_stats.restype = ctypes.c_int
    lib.gdrhook_trusted.restype = ctypes.c_int
    return lib


def show_lookup(gh, what, tensor):
    r = Range()
    nbytes = tensor.numel() * tensor.element_size()
    rc = gh.gdrhook_lookup(tensor.data_ptr(), nbytes, ctypes.byref(r))
    if rc == 0:
        print("  %-22s %#x: in a %s allocation at %#x of %d bytes, gen %d"
              % (what, tensor.data_ptr(), KINDS[r.kind] if r.kind < len(KINDS)
                 else "?", r.base, r.size, r.gen))
    else:
        print("  %-22s %#x: registry answers -%s" % (
            what, tensor.data_ptr(), errno.errorcode.get(-rc, str(-rc))))


def show_stats(gh, when):
    st = Stats()
    st.size = ctypes.sizeof(Stats)
    if gh.gdrhook_get_stats(ctypes.byref(st)) == 0:
        print("gdrhook %s: %d allocations, %d frees, %d live (%.1f MiB), "
              "peak %.1f MiB, registry %s"
              % (when, st.allocs, st.frees, st.live, st.live_bytes / 2**20,
                 st.peak_live_bytes / 2**20,
                 "trusted" if gh.gdrhook_trusted() else "UNTRUSTED"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--device", default="cuda:0")
    args = ap.parse_args()
    if args.steps < 1 or args.hidden < 1:
        ap.error("--steps and --hidden must be at least 1")

    gh = gdrhook()
    print("gdrhook %s" % ("is preloaded" if gh else
                          "is not loaded (run with LD_PRELOAD=.../"
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
