"""The smoke GPT of specs/llm/smoke_gpt.toml in torch.nn, for scripts/parity/pytorch_eager.py: 4 layers, d_model
256, 8 query heads over 4 key/value heads, RMSNorm (eps 1e-5), SwiGLU FFN 688, half-split rotary positions (theta
10000), vocab 4096, 128 tokens, untied head, no biases: the structure of crates/trainbench-graph/src/zoo/gpt.rs."""

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
