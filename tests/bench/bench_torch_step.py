# SPDX-License-Identifier: MIT
"""One process of tests/bench/bench-torch: times training steps of a small
MLP (Adam, batch sizes that vary so the caching allocator keeps growing
blocks) and prints "R step_us <median>" and "R step_p90_us <p90>".
Every GH_TORCH_EMPTY steps (default 10) it empties PyTorch's cache, so
the driver's allocation and free calls (what gdrhook hooks) are part of
the steps that follow.  GH_TORCH_STEPS (default 300) timed steps after
GH_TORCH_WARMUP (default 30)."""
import os
import sys
import time

import torch

STEPS = int(os.environ.get("GH_TORCH_STEPS", "300"))
WARMUP = int(os.environ.get("GH_TORCH_WARMUP", "30"))
EMPTY = int(os.environ.get("GH_TORCH_EMPTY", "10"))

if not torch.cuda.is_available():
    print("bench_torch_step: no CUDA device", file=sys.stderr)
    sys.exit(77)
dev = torch.device("cuda:0")
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
    torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
    torch.nn.Linear(4096, 10)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
lossf = torch.nn.CrossEntropyLoss()


def step(i):
    bs = 256 + 128 * (i % 4)
    x = torch.randn(bs, 1024, device=dev)
    y = torch.randint(0, 10, (bs,), device=dev)
    opt.zero_grad(set_to_none=True)
    loss = lossf(model(x), y)
    loss.backward()
    opt.step()
    if EMPTY and i % EMPTY == EMPTY - 1:
        del x, y
        torch.cuda.empty_cache()
    return loss


for i in range(WARMUP):
    step(i)
torch.cuda.synchronize()
times = []
for i in range(STEPS):
    t0 = time.perf_counter()
    step(i)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
times.sort()
print("R step_us %.2f" % (1e6 * times[len(times) // 2]))
print("R step_p90_us %.2f" % (1e6 * times[len(times) * 9 // 10]))
# which allocator ran: bench-torch checks it is the one it asked for
print("R allocator %s" % torch.cuda.get_allocator_backend())
