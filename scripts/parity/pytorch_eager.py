"""Parity benchmark, PyTorch side: trains the same models as crates/trainbench-backend-tch/examples/parity.rs in plain PyTorch
eager mode and prints the steady-state step time in the same RESULT format.

Usage: pytorch_eager.py <resnet18-cifar|transformer|smoke-gpt|smoke-moe> [--batch N] [--warmup N] [--iters N] [--threads N]
                        [--init-from MANIFEST]

With --init-from (a manifest written by `parity --manifest`), the model starts from trainbench's weights and
trains on trainbench's synthetic batches (scripts/parity/seeded.py), so the first loss must match.

Losses reported are those of the first and last measured (post-warm-up) steps. The training step is the
textbook loop: zero_grad(set_to_none), forward, loss, backward, optimizer step,
loss.item(). Data come from a pool of 4 pre-generated batches cycled through, as on the trainbench side.
"""

import argparse
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

import gpt_eager
import seeded


def resnet18_cifar() -> nn.Module:
    """torchvision's ResNet-18 with a 3x3/1 stem and no max-pool, 10 classes (the usual CIFAR variant)."""
    m = torchvision.models.resnet18(num_classes=10)
    m.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    m.maxpool = nn.Identity()
    return m


class EncoderLayer(nn.Module):
    """Post-norm encoder layer, the structure of nn.TransformerEncoderLayer (ReLU, dropout 0.1), no attention
    dropout (the workload graph's attention has none)."""

    def __init__(self, e: int, heads: int, ffn: int, p: float):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(e, heads, dropout=0.0, batch_first=True)
        self.linear1 = nn.Linear(e, ffn)
        self.linear2 = nn.Linear(ffn, e)
        self.norm1 = nn.LayerNorm(e)
        self.norm2 = nn.LayerNorm(e)
        self.dropout = nn.Dropout(p)
        self.dropout1 = nn.Dropout(p)
        self.dropout2 = nn.Dropout(p)

    def forward(self, x):
        a = self.self_attn(x, x, x, need_weights=False)[0]
        x = self.norm1(x + self.dropout1(a))
        h = self.linear2(self.dropout(F.relu(self.linear1(x))))
        return self.norm2(x + self.dropout2(h))


class TransformerLM(nn.Module):
    """vocab 1000, 64 tokens, width 256, 4 heads, FFN 1024, 2 layers, per-token classifier."""

    def __init__(self, vocab=1000, e=256, heads=4, ffn=1024, layers=2, p=0.1):
        super().__init__()
        self.embed = nn.Embedding(vocab, e)
        self.layers = nn.ModuleList([EncoderLayer(e, heads, ffn, p) for _ in range(layers)])
        self.head = nn.Linear(e, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=["resnet18-cifar", "transformer", "smoke-gpt", "smoke-moe"])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init-from", default=None)
    ap.add_argument("--dropout", type=float, default=0.1, help="transformer dropout")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    if a.model == "resnet18-cifar":
        model = resnet18_cifar()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
        pool = [(torch.randn(a.batch, 3, 32, 32), torch.randint(0, 10, (a.batch,))) for _ in range(4)]
        items_per_sample = 1
        classes = 10
    elif a.model == "smoke-gpt":
        model = gpt_eager.SmokeGpt()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
        pool = [(torch.randint(0, 4096, (a.batch, 128)), torch.randint(0, 4096, (a.batch, 128))) for _ in range(4)]
        items_per_sample = 128
        classes = 4096
    elif a.model == "smoke-moe":
        model = gpt_eager.SmokeMoe()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
        pool = [(torch.randint(0, 4096, (a.batch, 128)), torch.randint(0, 4096, (a.batch, 128))) for _ in range(4)]
        items_per_sample = 128
        classes = 4096
    else:
        model = TransformerLM(p=a.dropout)
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        pool = [(torch.randint(0, 1000, (a.batch, 64)), torch.randint(0, 1000, (a.batch, 64))) for _ in range(4)]
        items_per_sample = 64
        classes = 1000
    if a.init_from:
        manifest = seeded.load_manifest(a.init_from)
        seeded.init_model(model, manifest)
        pool = [tuple(b) for b in seeded.data_pool(manifest, a.batch)]
    model.train()
    # Dropout draws from the default generator: re-seed after model construction (which consumed draws), as
    # the trainbench side seeds it once before training.
    torch.manual_seed(a.seed)
    params = sum(p.numel() for p in model.parameters())

    times, losses = [], []
    cpu_start = time.process_time()
    for i in range(a.warmup + a.iters):
        t0 = time.perf_counter()
        x, y = pool[i % len(pool)]
        opt.zero_grad(set_to_none=True)
        out = model(x)
        # The MoE model returns its load-balancing loss beside the logits; it joins the training loss.
        out, aux = out if isinstance(out, tuple) else (out, 0.0)
        loss = F.cross_entropy(out.reshape(-1, classes), y.reshape(-1)) + aux
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        losses.append(loss.item())
        if i >= a.warmup:
            times.append(dt)
        if i == a.warmup - 1:
            cpu_start = time.process_time()
    cpu_per_step = (time.process_time() - cpu_start) / a.iters
    median = statistics.median(times)
    print(
        f"RESULT impl=pytorch model={a.model} batch={a.batch} params={params} threads={torch.get_num_threads()} "
        f"median_s={median:.6f} mean_s={statistics.fmean(times):.6f} cpu_s_per_step={cpu_per_step:.6f} "
        f"items_per_s={a.batch * items_per_sample / median:.2f} loss_first={losses[a.warmup]:.4f} loss_last={losses[-1]:.4f}"
    )


if __name__ == "__main__":
    main()
