"""PyTorch's own tensor parallelism of the smoke GPT (scripts/parity/gpt_eager.py) for scripts/parity_tp.sh: the
layout trainbench runs with `tensor_parallel = 2`, built with torch.distributed.tensor.parallel on a 1-D device mesh
over Gloo (CPU ranks started by torchrun): attention split by heads (q, k, v column-parallel, o row-parallel), the
SwiGLU MLP column- then row-parallel, the embedding vocabulary-parallel (row-wise) and the head column-parallel
with the loss computed on vocabulary shards (loss_parallel); with --sp, sequence parallelism (the norms on sequence
shards, all-gather before and reduce-scatter after each parallel region). AdamW as the spec says. Prints the median
step time (per step, the slowest rank's) in the RESULT format of pytorch_eager.py."""

import argparse
import os
import statistics
import sys
import time
import types

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel,
                                               loss_parallel, parallelize_module)

from gpt_eager import SmokeGpt, rotate


def parallelize(model: SmokeGpt, mesh, sp: bool) -> None:
    """Applies the Megatron layout to `model` in place; each block's head counts become the local ones."""
    t = mesh.size()
    seq = Shard(1) if sp else Replicate()
    parallelize_module(model, mesh, {
        "embed_tokens": RowwiseParallel(input_layouts=Replicate(), output_layouts=seq),
        "norm": SequenceParallel() if sp else None,
        "lm_head": ColwiseParallel(input_layouts=seq, output_layouts=Shard(-1), use_local_output=False),
    } if sp else {
        "embed_tokens": RowwiseParallel(input_layouts=Replicate()),
        "lm_head": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False),
    })
    for block in model.layers:
        plan = {
            "q_proj": ColwiseParallel(), "k_proj": ColwiseParallel(), "v_proj": ColwiseParallel(),
            "o_proj": RowwiseParallel(output_layouts=seq),
            "gate_proj": ColwiseParallel(), "up_proj": ColwiseParallel(),
            "down_proj": RowwiseParallel(output_layouts=seq),
        }
        if sp:
            plan["attn_norm"] = SequenceParallel()
            plan["mlp_norm"] = SequenceParallel()
        parallelize_module(block, mesh, plan)
        block.heads, block.kv = block.heads // t, block.kv // t
        if sp:
            block.forward = types.MethodType(sequence_parallel_forward, block)


def sequence_parallel_forward(self, x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """The block of gpt_eager.py on sequence shards: each norm's output all-gathered once before its parallel
    region (the projections read the whole sequence), the region's output reduce-scattered back to shards."""
    b = x.shape[0]
    h = self.attn_norm(x).redistribute(placements=[Replicate()])
    q = rotate(self.q_proj(h).view(b, -1, self.heads, self.hd), table).transpose(1, 2)
    k = rotate(self.k_proj(h).view(b, -1, self.kv, self.hd), table).transpose(1, 2)
    v = self.v_proj(h).view(b, -1, self.kv, self.hd).transpose(1, 2)
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv != self.heads)
    x = x + self.o_proj(a.transpose(1, 2).reshape(b, a.shape[2], -1))
    h = self.mlp_norm(x).redistribute(placements=[Replicate()])
    return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--sp", action="store_true")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    model = SmokeGpt()
    parallelize(model, mesh, a.sp)
    vocab, seq = 4096, 128
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    g = torch.Generator().manual_seed(1)
    pool = [(torch.randint(vocab, (a.batch, seq), generator=g), torch.randint(vocab, (a.batch, seq), generator=g))
            for _ in range(4)]
    times, losses = [], []
    for i in range(a.warmup + a.iters):
        dist.barrier()
        t0 = time.perf_counter()
        x, y = pool[i % len(pool)]
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        with loss_parallel():
            loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
            loss.backward()
        opt.step()
        dt = torch.tensor([time.perf_counter() - t0])
        dist.all_reduce(dt, op=dist.ReduceOp.MAX)
        losses.append(loss.full_tensor().item() if hasattr(loss, "full_tensor") else loss.item())
        if i >= a.warmup:
            times.append(dt.item())
    if rank == 0:
        median = statistics.median(times)
        print(
            f"RESULT impl=pytorch-tp{'-sp' if a.sp else ''}-gloo model=smoke-gpt batch={a.batch} world={world} "
            f"threads={a.threads} median_s={median:.6f} items_per_s={a.batch * seq / median:.2f} "
            f"first_loss={losses[0]:.6f} last_loss={losses[-1]:.6f}"
        )
    # As ddp.py: meet, then leave without tearing Gloo down (its teardown can hang one rank here).
    sys.stdout.flush()
    dist.barrier()
    os._exit(0)


if __name__ == "__main__":
    main()
