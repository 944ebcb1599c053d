# SPDX-License-Identifier: MIT
"""gpu-check --nccl: torch.distributed all-reduce over NCCL on 2 GPUs,
one process per GPU (mp.spawn), each under the shim with its own log
(GDRHOOK_TRACE=...%p...).  Each rank prints GH-OK when its results are
right.  Exit 77: no torch, or fewer than 2 GPUs."""
import os
import socket
import sys

WORLD = 2


def worker(rank, world, port):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    print("# rank %d pid %d" % (rank, os.getpid()), flush=True)
    try:
        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d"
                                 % port, rank=rank, world_size=world,
                                 device_id=dev)
    except TypeError:       # older torch: no device_id
        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d"
                                % port, rank=rank, world_size=world)
    ok = True
    want = world * (world + 1) / 2
    for n in (1 << 10, 1 << 20, 32 << 20):
        x = torch.full((n,), float(rank + 1), device=dev)
        dist.all_reduce(x)
        torch.cuda.synchronize()
        if not bool((x == want).all().item()):
            print("GH-FAIL rank %d: all_reduce of %d floats: got %r, want %r"
                  % (rank, n, x[:4].tolist(), want), flush=True)
            ok = False
    y = torch.arange(4096, device=dev, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(y, op=dist.ReduceOp.MAX)
    if not bool((y == torch.arange(4096, device=dev) * world).all().item()):
        print("GH-FAIL rank %d: MAX all_reduce wrong" % rank, flush=True)
        ok = False
    dist.barrier()
    dist.destroy_process_group()
    if ok:
        print("GH-OK rank %d all_reduce correct" % rank, flush=True)


def main():
    print("GH-PID %d" % os.getpid(), flush=True)
    try:
        import torch
        import torch.multiprocessing as mp
    except Exception as e:  # noqa: BLE001
        print("GH-SKIP torch not importable: %s" % e, flush=True)
        return 77
    n = torch.cuda.device_count()
    if n < WORLD:
        print("GH-SKIP %d GPU(s), need %d" % (n, WORLD), flush=True)
        return 77
    if not torch.distributed.is_available() or \
            not torch.distributed.is_nccl_available():
        print("GH-SKIP torch.distributed NCCL backend not available",
              flush=True)
        return 77
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    mp.spawn(worker, args=(WORLD, port), nprocs=WORLD, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
