# SPDX-License-Identifier: MIT
"""Issue 10 with PyTorch's expandable segments (run under the shim, with
the fake libibverbs standing in for a NIC that imports the dma-buf):

  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \\
  LD_LIBRARY_PATH=build/fakeverbs LD_PRELOAD=$PWD/build/libgdrhook.so \\
  GDRHOOK_BACKEND=dmabuf GDRHOOK_VALIDATE=1 python3 tests/gpu/torch_span_case.py

1. Tensors that cross the allocator's 20 MiB chunk boundaries are
   registered through ibv_reg_mr: one cached dma-buf registration per span
   of chunks, hits after, all deregistered before the chunks are unmapped
   (torch.cuda.empty_cache()).
2. The cost of SYNC_MEMOPS on a training step: the context flag is turned
   off and on in alternate blocks of steps of one process (same run), and
   the median step times are compared.
Prints PASS or FAIL; exit 77 without torch or a GPU.
"""
import ctypes
import os
import statistics
import sys
import time

try:
    import torch
except Exception as e:  # noqa: BLE001 - any import failure means skip
    print("SKIP torch: %s" % e)
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP no GPU")
    sys.exit(77)

MiB = 1 << 20
SYNC_MEMOPS = 0x80
bad = 0


def expect(cond, what):
    global bad
    print("%s %s" % ("ok  " if cond else "FAIL", what), flush=True)
    bad += 0 if cond else 1


nic = ctypes.CDLL("libibverbs.so.1")
for name, res, args in (
        ("fakeverbs_open", ctypes.c_void_p, []),
        ("ibv_alloc_pd", ctypes.c_void_p, [ctypes.c_void_p]),
        ("ibv_reg_mr", ctypes.c_void_p,
         [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]),
        ("ibv_dereg_mr", ctypes.c_int, [ctypes.c_void_p]),
        ("fakeverbs_calls", ctypes.c_ulong, [ctypes.c_char_p]),
        ("fakeverbs_live_mrs", ctypes.c_int, []),
        ("fakeverbs_is_mr", ctypes.c_int, [ctypes.c_void_p])):
    f = getattr(nic, name)
    f.restype, f.argtypes = res, args
shim = ctypes.CDLL(None)
shim.gdrhook_lookup.restype = ctypes.c_int
shim.gdrhook_lookup.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                ctypes.c_void_p]
cuda = ctypes.CDLL("libcuda.so.1")
ACC = 1 | 2  # LOCAL_WRITE | REMOTE_WRITE

dev = torch.device("cuda", 0)
torch.zeros(1, device=dev)
pd = nic.ibv_alloc_pd(nic.fakeverbs_open())


def ctx_flags():
    fl = ctypes.c_uint(0)
    cuda.cuCtxGetFlags(ctypes.byref(fl))
    return fl.value


def crossing(t):
    out = ctypes.create_string_buffer(256)
    return shim.gdrhook_lookup(ctypes.c_void_p(t.data_ptr()),
                               t.untyped_storage().nbytes(), out) == -34


print("== 1. tensors across expandable-segment chunks", flush=True)
print("ctx flags before: %#x" % ctx_flags())
ts = [torch.empty(15 * MiB, dtype=torch.uint8, device=dev) for _ in range(6)]
cross = [t for t in ts if crossing(t)]
print("%d of %d tensors cross a chunk boundary" % (len(cross), len(ts)))
expect(len(cross) >= 3, "tensors cross chunk boundaries")
dm0 = nic.fakeverbs_calls(b"ibv_reg_dmabuf_mr")
mrs = []
for t in cross:
    mr = nic.ibv_reg_mr(pd, t.data_ptr(), t.untyped_storage().nbytes(), ACC)
    expect(mr and not nic.fakeverbs_is_mr(mr),
           "0x%x+%d registered by the cache" % (t.data_ptr(),
                                                 t.untyped_storage().nbytes()))
    mrs.append(mr)
n_regs = nic.fakeverbs_calls(b"ibv_reg_dmabuf_mr") - dm0
print("dma-buf registrations for %d crossing tensors: %d" % (len(cross),
                                                             n_regs))
expect(1 <= n_regs <= len(cross), "one dma-buf registration per span")
hits0 = nic.fakeverbs_calls(b"ibv_reg_dmabuf_mr")
for t in cross:
    # the same boundary, a smaller range: the span's registration again
    mr = nic.ibv_reg_mr(pd, t.data_ptr() + 4096,
                        t.untyped_storage().nbytes() - 8192, ACC)
    mrs.append(mr)
expect(nic.fakeverbs_calls(b"ibv_reg_dmabuf_mr") == hits0,
       "registrations inside the spans again: hits")
expect(ctx_flags() & SYNC_MEMOPS, "SYNC_MEMOPS set on the context (flags %#x)"
       % ctx_flags())
for mr in mrs:
    nic.ibv_dereg_mr(mr)
live = nic.fakeverbs_live_mrs()
del ts, cross, t
torch.cuda.synchronize()
torch.cuda.empty_cache()
print("NIC registrations live: %d before empty_cache, %d after"
      % (live, nic.fakeverbs_live_mrs()))
expect(live >= 1 and nic.fakeverbs_live_mrs() == 0,
       "unmapping the chunks deregistered every span first")

print("== 2. SYNC_MEMOPS cost per training step", flush=True)
model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                            torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                            torch.nn.Linear(4096, 1024)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x_host = torch.randn(256, 4096)
y_host = torch.randn(256, 1024)


def step():
    x = x_host.to(dev)          # synchronous H2D copy
    y = y_host.to(dev)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()          # synchronous D2H copy


def block(n):
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - t0) / n


for _ in range(30):
    step()
base = ctx_flags() & ~SYNC_MEMOPS
off, on = [], []
for _ in range(6):
    cuda.cuCtxSetFlags(base)
    off.append(block(40))
    cuda.cuCtxSetFlags(base | SYNC_MEMOPS)
    on.append(block(40))
m_off, m_on = statistics.median(off), statistics.median(on)
print("step time, median of 6 blocks of 40: SYNC_MEMOPS off %.1f us, on %.1f"
      " us, ratio on/off %.3f" % (m_off * 1e6, m_on * 1e6, m_on / m_off))
print("%s torch_span_case (%d failed)" % ("FAIL" if bad else "PASS", bad))
sys.exit(1 if bad else 0)
