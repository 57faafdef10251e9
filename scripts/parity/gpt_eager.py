"""The smoke GPT of specs/llm/smoke_gpt.toml in torch.nn, for scripts/parity/pytorch_eager.py: 4 layers, d_model
256, 8 query heads over 4 key/value heads, RMSNorm (eps 1e-5), SwiGLU FFN 688, half-split rotary positions (theta
10000), vocab 4096, 128 tokens, untied head, no biases: the structure of crates/trainbench-graph/src/zoo/gpt.rs.
Also the smoke MoE of specs/llm/smoke_moe.toml (SmokeMoe), every feed-forward routed as Mixtral's reference code
routes it."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rotary_table(t: int, head_dim: int, theta: float) -> torch.Tensor:
    """cos and sin of the rotary angles, [2, t, head_dim / 2] (the trainbench table)."""
    inv = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.stack([angles.cos(), angles.sin()]).float()


def rotate(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """[B, T, H, D] rotated pairwise by halves (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)."""
    x1, x2 = x.chunk(2, dim=-1)
    cos, sin = table[0][:, None, :], table[1][:, None, :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Block(nn.Module):
    def __init__(self, d: int, heads: int, kv: int, ffn: int):
        super().__init__()
        self.heads, self.kv, self.hd = heads, kv, d // heads
        self.attn_norm = nn.RMSNorm(d, eps=1e-5)
        self.q_proj = nn.Linear(d, heads * self.hd, bias=False)
        self.k_proj = nn.Linear(d, kv * self.hd, bias=False)
        self.v_proj = nn.Linear(d, kv * self.hd, bias=False)
        self.o_proj = nn.Linear(heads * self.hd, d, bias=False)
        self.mlp_norm = nn.RMSNorm(d, eps=1e-5)
        self.gate_proj = nn.Linear(d, ffn, bias=False)
        self.up_proj = nn.Linear(d, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, d, bias=False)

    def forward(self, x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        h = self.attn_norm(x)
        q = rotate(self.q_proj(h).view(b, t, self.heads, self.hd), table).transpose(1, 2)
        k = rotate(self.k_proj(h).view(b, t, self.kv, self.hd), table).transpose(1, 2)
        v = self.v_proj(h).view(b, t, self.kv, self.hd).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv != self.heads)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, t, -1))
        h = self.mlp_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class SmokeGpt(nn.Module):
    def __init__(self, vocab=4096, d=256, heads=8, kv=4, ffn=688, layers=4, seq=128, theta=10000.0):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([Block(d, heads, kv, ffn) for _ in range(layers)])
        self.norm = nn.RMSNorm(d, eps=1e-5)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("rotary", rotary_table(seq, d // heads, theta), persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x, self.rotary)
        return self.lm_head(self.norm(x))


class MoeFfn(nn.Module):
    """A routed SwiGLU feed-forward as Mixtral's reference code computes it: a softmax router (no bias), the top k
    renormalised, a loop over experts gathering each one's assignments (in token order, those over
    ceil(capacity_factor * tokens * k / experts) dropped), each output weighted and added back with index_add_;
    Switch Transformer's balance (experts x sum_e share_e x mean probability_e) returned beside it."""

    def __init__(self, d: int, experts: int, top_k: int, ffn: int, capacity_factor):
        super().__init__()
        self.experts, self.top_k, self.capacity_factor = experts, top_k, capacity_factor
        self.router = nn.Linear(d, experts, bias=False)
        bound = lambda fan_in: 1.0 / fan_in ** 0.5  # noqa: E731
        self.gate_proj = nn.Parameter(torch.empty(experts, ffn, d).uniform_(-bound(d), bound(d)))
        self.up_proj = nn.Parameter(torch.empty(experts, ffn, d).uniform_(-bound(d), bound(d)))
        self.down_proj = nn.Parameter(torch.empty(experts, d, ffn).uniform_(-bound(ffn), bound(ffn)))

    def forward(self, x: torch.Tensor):
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        n, e, k = flat.shape[0], self.experts, self.top_k
        probs = self.router(flat).softmax(-1)
        top, chosen = probs.topk(k, -1)
        weights = (top / top.sum(-1, keepdim=True)).reshape(-1)
        flat_expert = chosen.reshape(-1)
        counts = torch.bincount(flat_expert, minlength=e)
        order = flat_expert.argsort(stable=True)
        capacity = n * k if self.capacity_factor is None else math.ceil(self.capacity_factor * n * k / e)
        out = torch.zeros_like(flat)
        start = 0
        for ex, c in enumerate(counts.tolist()):
            pos = order[start:start + min(c, capacity)]
            start += c
            if pos.numel() == 0:
                continue
            token = pos // k
            xe = flat[token]
            h = F.linear(F.silu(F.linear(xe, self.gate_proj[ex])) * F.linear(xe, self.up_proj[ex]), self.down_proj[ex])
            out.index_add_(0, token, h * weights[pos].unsqueeze(1))
        balance = e * (probs.mean(0) * counts.float() / (n * k)).sum()
        return out.reshape(shape), balance


class MoeBlock(Block):
    """A decoder block whose feed-forward is a [`MoeFfn`]."""

    def __init__(self, d: int, heads: int, kv: int, experts: int, top_k: int, ffn: int, capacity_factor):
        super().__init__(d, heads, kv, 1)
        del self.gate_proj, self.up_proj, self.down_proj
        self.mlp = MoeFfn(d, experts, top_k, ffn, capacity_factor)

    def forward(self, x: torch.Tensor, table: torch.Tensor):
        b, t, _ = x.shape
        h = self.attn_norm(x)
        q = rotate(self.q_proj(h).view(b, t, self.heads, self.hd), table).transpose(1, 2)
        k = rotate(self.k_proj(h).view(b, t, self.kv, self.hd), table).transpose(1, 2)
        v = self.v_proj(h).view(b, t, self.kv, self.hd).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv != self.heads)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, t, -1))
        y, balance = self.mlp(self.mlp_norm(x))
        return x + y, balance


class SmokeMoe(nn.Module):
    """specs/llm/smoke_moe.toml: the smoke GPT with every feed-forward routed, 8 experts of width 256, top 2,
    capacity factor 1.25; `forward` returns the logits and the load-balancing loss (coefficient 0.01 applied)."""

    def __init__(self, vocab=4096, d=256, heads=8, kv=4, layers=4, seq=128, theta=10000.0, experts=8, top_k=2,
                 expert_ffn=256, capacity_factor=1.25, aux_loss=0.01):
        super().__init__()
        self.aux_loss = aux_loss
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(
            [MoeBlock(d, heads, kv, experts, top_k, expert_ffn, capacity_factor) for _ in range(layers)])
        self.norm = nn.RMSNorm(d, eps=1e-5)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("rotary", rotary_table(seq, d // heads, theta), persistent=False)

    def forward(self, tokens: torch.Tensor):
        x = self.embed_tokens(tokens)
        aux = 0.0
        for layer in self.layers:
            x, balance = layer(x, self.rotary)
            aux = aux + balance
        return self.lm_head(self.norm(x)), self.aux_loss * aux
