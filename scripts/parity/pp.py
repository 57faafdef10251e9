"""PyTorch's own pipeline of the smoke GPT (scripts/parity/gpt_eager.py) for scripts/parity_pp.sh: cut into 2 stages
between its blocks where trainbench cuts it (the first `--cut` blocks and the embedding on stage 0, the rest with the
norm and head on stage 1), run by torch.distributed.pipelining's Schedule1F1B (or ScheduleGPipe) over Gloo on CPU
ranks started by torchrun, AdamW as the spec says; prints the median step time (per step, the slowest rank's) in the
RESULT format of pytorch_eager.py."""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

from gpt_eager import SmokeGpt


class Part(nn.Module):
    """Blocks `blocks` of `model`, with its embedding on the first stage and its norm and head on the last."""

    def __init__(self, model: SmokeGpt, first: bool, last: bool, blocks: range):
        super().__init__()
        self.embed = model.embed_tokens if first else None
        self.layers = nn.ModuleList(model.layers[i] for i in blocks)
        self.norm = model.norm if last else None
        self.head = model.lm_head if last else None
        self.register_buffer("rotary", model.rotary, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.embed is not None:
            x = self.embed(x)
        for layer in self.layers:
            x = layer(x, self.rotary)
        if self.head is not None:
            x = self.head(self.norm(x))
        return x


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--cut", type=int, default=3)
    p.add_argument("--schedule", choices=["1f1b", "gpipe"], default="1f1b")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != 2:
        sys.exit("pp.py runs 2 stages: torchrun --nproc_per_node 2")
    torch.manual_seed(0)
    model = SmokeGpt()
    blocks = range(0, a.cut) if rank == 0 else range(a.cut, len(model.layers))
    part = Part(model, rank == 0, rank == 1, blocks)
    del model
    vocab, seq = 4096, 128
    stage = PipelineStage(part, rank, world, torch.device("cpu"))

    def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(out.reshape(-1, vocab), y.reshape(-1))

    kind = Schedule1F1B if a.schedule == "1f1b" else ScheduleGPipe
    schedule = kind(stage, n_microbatches=a.microbatches, loss_fn=loss_fn)
    opt = torch.optim.AdamW(part.parameters(), lr=3e-4, weight_decay=0.1)
    g = torch.Generator().manual_seed(1)
    pool = [(torch.randint(vocab, (a.batch, seq), generator=g), torch.randint(vocab, (a.batch, seq), generator=g))
            for _ in range(4)]
    times = []
    for i in range(a.warmup + a.iters):
        dist.barrier()
        t0 = time.perf_counter()
        x, y = pool[i % len(pool)]
        opt.zero_grad(set_to_none=True)
        if rank == 0:
            schedule.step(x)
        else:
            losses: list[torch.Tensor] = []
            schedule.step(target=y, losses=losses)
        opt.step()
        dt = torch.tensor([time.perf_counter() - t0])
        dist.all_reduce(dt, op=dist.ReduceOp.MAX)
        if i >= a.warmup:
            times.append(dt.item())
    if rank == 0:
        median = statistics.median(times)
        print(
            f"RESULT impl=pytorch-pipelining-{a.schedule}-gloo model=smoke-gpt batch={a.batch} world={world} "
            f"microbatches={a.microbatches} threads={a.threads} median_s={median:.6f} "
            f"items_per_s={a.batch * seq / median:.2f}"
        )
    # As ddp.py: meet, then leave without tearing Gloo down (its teardown can hang one rank here).
    sys.stdout.flush()
    dist.barrier()
    os._exit(0)


if __name__ == "__main__":
    main()
