"""Data-parallel parity, PyTorch side: the models of pytorch_eager.py (the communication-heavy MLP of
specs/parity/mlp_comm.toml, and the smoke GPT of gpt_eager.py) trained with DistributedDataParallel over Gloo,
or with --fsdp sharded by FSDP2 (`fully_shard` on the whole model: one unit, as trainbench's zero-3 shards a
model without blocks; the smoke GPT also on each layer, and each layer recomputed in the backward pass, as
trainbench's zero-3 runs it), started by torchrun (one process per rank, one intra-op thread each unless
--threads says otherwise).

Usage: torchrun --standalone --nproc_per_node W ddp.py <resnet18-cifar|transformer|mlp-comm|smoke-gpt>
                [--batch GLOBAL] [--warmup N] [--iters N] [--threads N] [--fsdp]

--batch is the global batch: each rank trains on batch / W samples, as a trainbench all-reduce run does. Rank 0
prints the median step time (the slowest rank's, per step, gathered) in the RESULT format of pytorch_eager.py.
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from pytorch_eager import TransformerLM, resnet18_cifar


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=["resnet18-cifar", "transformer", "mlp-comm", "smoke-gpt"])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--fsdp", action="store_true", help="FSDP2 fully_shard instead of DDP")
    a = ap.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    local = a.batch // world
    if a.model == "resnet18-cifar":
        model = resnet18_cifar()
        opt_of = lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, weight_decay=5e-4)  # noqa: E731
        pool = [(torch.randn(local, 3, 32, 32), torch.randint(0, 10, (local,))) for _ in range(4)]
        items, classes = 1, 10
    elif a.model == "mlp-comm":
        model = torch.nn.Sequential(
            torch.nn.Linear(1024, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 1024), torch.nn.ReLU(),
            torch.nn.Linear(1024, 10),
        )
        opt_of = lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9)  # noqa: E731
        pool = [(torch.randn(local, 1024), torch.randint(0, 10, (local,))) for _ in range(4)]
        items, classes = 1, 10
    elif a.model == "smoke-gpt":
        from gpt_eager import SmokeGpt

        model = SmokeGpt()
        opt_of = lambda p: torch.optim.AdamW(p, lr=3e-4, weight_decay=0.1)  # noqa: E731
        pool = [(torch.randint(0, 4096, (local, 128)), torch.randint(0, 4096, (local, 128))) for _ in range(4)]
        items, classes = 128, 4096
        if a.fsdp:
            # Each layer recomputed in its backward (inside its FSDP unit, as TorchTitan wraps it).
            from torch.utils.checkpoint import checkpoint

            for layer in model.layers:
                plain = layer.forward
                layer.forward = lambda *args, f=plain: checkpoint(f, *args, use_reentrant=False)
    else:
        model = TransformerLM()
        opt_of = lambda p: torch.optim.Adam(p, lr=1e-4)  # noqa: E731
        pool = [(torch.randint(0, 1000, (local, 64)), torch.randint(0, 1000, (local, 64))) for _ in range(4)]
        items, classes = 64, 1000
    model.train()
    if a.fsdp:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cpu", (world,))
        for layer in getattr(model, "layers", []):
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        ddp = model
    else:
        ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = opt_of(ddp.parameters())
    times = []
    for i in range(a.warmup + a.iters):
        dist.barrier()
        t0 = time.perf_counter()
        x, y = pool[i % len(pool)]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ddp(x).reshape(-1, classes), y.reshape(-1))
        loss.backward()
        opt.step()
        loss.item()
        dt = torch.tensor([time.perf_counter() - t0])
        dist.all_reduce(dt, op=dist.ReduceOp.MAX)
        if i >= a.warmup:
            times.append(dt.item())
    if rank == 0:
        median = statistics.median(times)
        params = sum(p.numel() for p in model.parameters())
        print(
            f"RESULT impl=pytorch-{'fsdp2' if a.fsdp else 'ddp'}-gloo model={a.model} batch={a.batch} world={world} params={params} "
            f"threads={a.threads} median_s={median:.6f} items_per_s={a.batch * items / median:.2f}"
        )
    # Gloo's teardown can hang one rank after the other has left (seen on this 2-core machine): meet, then leave
    # without tearing the group down; the figures are printed already.
    sys.stdout.flush()
    dist.barrier()
    os._exit(0)


if __name__ == "__main__":
    main()
