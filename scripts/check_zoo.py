#!/usr/bin/env python3
"""Check the zoo's parameter and FLOP counts against PyTorch / torchvision references.

For every model with a reference (torchvision's ResNets and Inception-v3; nn.Transformer with embeddings;
hand-written PyTorch modules of the original architectures otherwise), compare
  - parameters: sum of numel over the module's (deduplicated, so tied weights count once) parameters;
  - forward FLOPs per sample: torch.utils.flop_counter.FlopCounterMode around a forward pass;
  - training FLOPs per sample: the same around forward + backward of the summed outputs (losses add no
    counted FLOPs, so the backward graph is the one a training step runs);
with `trainbench analyze --format json` on a generated spec. Prints a table; exits 1 when a parameter count
differs or a FLOP count is off by more than 0.5%.

Informational (not checked): the bytes autograd keeps for backward in one fp32 forward pass, measured with
torch.autograd.graph.saved_tensors_hooks (distinct storages, parameters and buffers excluded), next to our
"activations kept for backward" without the loss layers (the references have no loss).

The decoder-only LMs (GPT-2 small, Llama-3.2-1B, Llama-3.1-8B) come from Hugging Face `transformers`
(GPT2LMHeadModel, LlamaForCausalLM built from the published configs) and ViT-B/16 from torchvision, all on
the meta device: exact parameter and FLOP counts without weights or memory (saved bytes are n/a there).
`transformers` is not a project dependency: `pip install transformers` into the venv to run those rows.

LoRA rows (`[training.lora]`): trainable and all parameters against PEFT's `get_peft_model` on the same
transformers config when `peft` is importable (`pip install peft`), else against PEFT's count written out
(r x (d_in + d_out) per adapted projection, plus the base model's published count).

Mixture-of-experts rows (`[model.moe]`): all and active parameters of Mixtral-8x7B and Qwen3-30B-A3B against
transformers' MixtralForCausalLM and Qwen3MoeForCausalLM on the meta device, else against the published counts.

Usage: /work/main/.venv/bin/python scripts/check_zoo.py [--bin target/debug/trainbench] [--only NAME ...]
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

TOLERANCE = 0.005


# ----- references -------------------------------------------------------------------------------------------


class TransformerRef(nn.Module):
    """nn.Transformer with shared embeddings (one matrix), sqrt(d) scaling, sinusoidal positions, tied output."""

    def __init__(self, vocab=37000, d=512, heads=8, layers=6, ffn=2048, seq=64):
        super().__init__()
        self.d = d
        self.embedding = nn.Embedding(vocab, d)
        self.transformer = nn.Transformer(d, heads, layers, layers, ffn, 0.1, batch_first=True)
        self.out = nn.Linear(d, vocab, bias=False)
        self.out.weight = self.embedding.weight
        pos = torch.arange(seq).unsqueeze(1)
        div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        pe = torch.zeros(seq, d)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq))

    def forward(self, src, tgt):
        s = self.embedding(src) * math.sqrt(self.d) + self.pe
        t = self.embedding(tgt) * math.sqrt(self.d) + self.pe
        return self.out(self.transformer(s, t, tgt_mask=self.mask, tgt_is_causal=True))


class BertLayer(nn.Module):
    def __init__(self, h, heads, ffn):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.attn_out, self.ln1 = nn.Linear(h, h), nn.LayerNorm(h, eps=1e-12)
        self.inter, self.out, self.ln2 = nn.Linear(h, ffn), nn.Linear(ffn, h), nn.LayerNorm(h, eps=1e-12)

    def forward(self, x):
        b, t, h = x.shape
        split = lambda y: y.view(b, t, self.heads, h // self.heads).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(h // self.heads), dim=-1)
        a = (p @ v).transpose(1, 2).reshape(b, t, h)
        x = self.ln1(x + self.attn_out(a))
        return self.ln2(x + self.out(F.gelu(self.inter(x))))


class BertRef(nn.Module):
    """BERT-base as released (BertForPreTraining layout): MLM head with tied decoder + bias, pooler, NSP."""

    def __init__(self, vocab=30522, h=768, layers=12, heads=12, ffn=3072, positions=512):
        super().__init__()
        self.word, self.pos, self.token_type = nn.Embedding(vocab, h), nn.Embedding(positions, h), nn.Embedding(2, h)
        self.ln = nn.LayerNorm(h, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(h, heads, ffn) for _ in range(layers))
        self.pooler, self.nsp = nn.Linear(h, h), nn.Linear(h, 2)
        self.transform, self.tln = nn.Linear(h, h), nn.LayerNorm(h, eps=1e-12)
        self.decoder = nn.Linear(h, vocab)
        self.decoder.weight = self.word.weight

    def forward(self, ids, types):
        t = ids.shape[1]
        x = self.ln(self.word(ids) + self.token_type(types) + self.pos(torch.arange(t)))
        for layer in self.layers:
            x = layer(x)
        nsp = self.nsp(torch.tanh(self.pooler(x[:, 0])))
        mlm = self.decoder(self.tln(F.gelu(self.transform(x))))
        return mlm, nsp


class Seq2seqRef(nn.Module):
    """LSTM encoder-decoder with Luong (general) attention, no input feeding."""

    def __init__(self, src_vocab=17000, tgt_vocab=17000, h=512, layers=2):
        super().__init__()
        self.src, self.tgt = nn.Embedding(src_vocab, h), nn.Embedding(tgt_vocab, h)
        self.enc, self.dec = nn.LSTM(h, h, layers, batch_first=True), nn.LSTM(h, h, layers, batch_first=True)
        self.memory_layer = nn.Linear(h, h, bias=False)
        self.attention_layer = nn.Linear(2 * h, h, bias=False)
        self.proj = nn.Linear(h, tgt_vocab, bias=False)

    def forward(self, src, tgt):
        enc, _ = self.enc(self.src(src))
        dec, _ = self.dec(self.tgt(tgt))
        w = torch.softmax(dec @ self.memory_layer(enc).transpose(1, 2), dim=-1)
        att = torch.tanh(self.attention_layer(torch.cat([dec, w @ enc], dim=-1)))
        return self.proj(att)


class DeepSpeech2Ref(nn.Module):
    def __init__(self, freq=161, hidden=1760, layers=7, chars=29):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 32, (41, 11), (2, 2), (20, 5)), nn.BatchNorm2d(32), nn.Hardtanh(0, 20),
            nn.Conv2d(32, 32, (21, 11), (2, 1), (10, 5)), nn.BatchNorm2d(32), nn.Hardtanh(0, 20))
        f = (freq + 40 - 41) // 2 + 1
        f = (f + 20 - 21) // 2 + 1
        self.rnn = nn.GRU(32 * f, hidden, layers, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(2 * hidden, chars)

    def forward(self, x):
        y = self.conv(x)
        b, c, f, t = y.shape
        y, _ = self.rnn(y.reshape(b, c * f, t).transpose(1, 2))
        return self.fc(y)


class FasterRcnnC4Ref(nn.Module):
    """ResNet-101 C4 Faster R-CNN from torchvision parts, fixed proposals (a grid), no NMS."""

    def __init__(self, classes=21, anchors=9, proposals=300, image=600):
        super().__init__()
        r = torchvision.models.resnet101()
        self.backbone = nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool, r.layer1, r.layer2, r.layer3)
        self.rpn_conv = nn.Conv2d(1024, 512, 3, padding=1)
        self.rpn_cls, self.rpn_box = nn.Conv2d(512, 2 * anchors, 1), nn.Conv2d(512, 4 * anchors, 1)
        self.head = r.layer4
        self.cls, self.box = nn.Linear(2048, classes), nn.Linear(2048, 4 * classes)
        g = math.ceil(math.sqrt(proposals))
        boxes = [[c * image / g, r_ * image / g, (c + 1) * image / g, (r_ + 1) * image / g]
                 for i in range(proposals) for r_, c in [divmod(i, g)]]
        self.register_buffer("boxes", torch.tensor(boxes))

    def forward(self, x):
        f = self.backbone(x)
        r = F.relu(self.rpn_conv(f))
        rois = torchvision.ops.roi_align(f, [self.boxes] * x.shape[0], 14, 1 / 16, 2)
        y = self.head(rois).mean((2, 3))
        return self.rpn_cls(r), self.rpn_box(r), self.cls(y), self.box(y)


class WganRef(nn.Module):
    """DCGAN-style generator and critic (no BN); critic on (real, fake, interpolated)."""

    def __init__(self, latent=128, w=64):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(latent, 8 * w * 16), nn.BatchNorm1d(8 * w * 16), nn.ReLU())
        layers, c = [], 8 * w
        for i in range(4):
            last = i == 3
            out = 3 if last else c // 2
            layers += [nn.ConvTranspose2d(c, out, 4, 2, 1, bias=last)]
            layers += [nn.Tanh()] if last else [nn.BatchNorm2d(out), nn.ReLU()]
            c = out
        self.gen = nn.Sequential(*layers)
        crit, c = [], 3
        for i in range(4):
            crit += [nn.Conv2d(c, w << i, 4, 2, 1), nn.LeakyReLU(0.2)]
            c = w << i
        self.critic = nn.Sequential(*crit, nn.Flatten(), nn.Linear(c * 16, 1))
        self.w = w

    def forward(self, z, real):
        fake = self.gen(self.fc(z).view(-1, 8 * self.w, 4, 4))
        eps = torch.rand(real.shape[0], 1, 1, 1)
        return self.critic(torch.cat([real, fake, eps * real + (1 - eps) * fake]))


def a3c_ref(actions=6):
    return nn.Sequential(nn.Conv2d(4, 16, 8, 4), nn.ReLU(), nn.Conv2d(16, 32, 4, 2), nn.ReLU(), nn.Flatten(),
                         nn.Linear(32 * 81, 256), nn.ReLU(), nn.Linear(256, actions + 1))


class NcfRef(nn.Module):
    def __init__(self, users=138493, items=26744, factors=64, layers=(256, 256, 128, 64)):
        super().__init__()
        self.gu, self.gi = nn.Embedding(users, factors), nn.Embedding(items, factors)
        self.mu, self.mi = nn.Embedding(users, layers[0] // 2), nn.Embedding(items, layers[0] // 2)
        mlp = []
        for a, b in zip(layers, layers[1:]):
            mlp += [nn.Linear(a, b), nn.ReLU()]
        self.mlp = nn.Sequential(*mlp)
        self.final = nn.Linear(factors + layers[-1], 1)

    def forward(self, u, i):
        m = self.mlp(torch.cat([self.mu(u), self.mi(i)], -1))
        return self.final(torch.cat([self.gu(u) * self.gi(i), m], -1))


def mlp_ref():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def ids(vocab, *shape):
    return torch.randint(0, vocab, shape)


class Logits(nn.Module):
    """A Hugging Face causal LM returning its logits only (no cache, no loss)."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        # One unpacked sequence per row: skip the packed-sequence detection, which reads values (item()) and so
        # cannot run on the meta device.
        import transformers.masking_utils as masking

        masking.find_packed_sequence_indices = lambda *args, **kwargs: None

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).logits


def gpt2_small():
    from transformers import GPT2Config, GPT2LMHeadModel

    return Logits(GPT2LMHeadModel(GPT2Config()))


def llama(layers, d, kv, ffn, tied, positions):
    """LlamaForCausalLM built from Llama 3's config values (no weights downloaded)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=128256, hidden_size=d, intermediate_size=ffn, num_hidden_layers=layers,
                      num_attention_heads=32, num_key_value_heads=kv, head_dim=d // 32, rms_norm_eps=1e-5,
                      rope_theta=500000.0, max_position_embeddings=positions, tie_word_embeddings=tied,
                      attention_bias=False, mlp_bias=False)
    cfg._attn_implementation = "sdpa"
    return Logits(LlamaForCausalLM(cfg))


GPT2_BODY = 'family = "gpt"\nseq_len = 1024\nmax_positions = 1024'
LLAMA_BODY = ('family = "gpt"\nactivation = "swiglu"\nnorm = "rmsnorm"\npositions = "rotary"\n'
              'rope_theta = 500000.0\nvocab = 128256\nheads = 32\nkv_heads = 8\nbias = false\n')
LLAMA_1B = LLAMA_BODY + "layers = 16\nd_model = 2048\nffn = 8192\ntied_embeddings = true\nseq_len = 2048"
LLAMA_8B = LLAMA_BODY + "layers = 32\nd_model = 4096\nffn = 14336\ntied_embeddings = false\nseq_len = 8192"


# name, [model] TOML body, reference factory, inputs factory (batch -> tuple), batch (2 where BN needs it) or
# "meta" (batch 1 on the meta device: exact counts without allocating the model)
CASES = [
    *[(f"resnet{d}", f'family = "resnet"\ndepth = {d}', getattr(torchvision.models, f"resnet{d}"),
       lambda b: (torch.randn(b, 3, 224, 224),), 1) for d in (18, 34, 50, 101, 152)],
    ("inception_v3+aux", 'family = "inception-v3"\naux_logits = true',
     lambda: torchvision.models.inception_v3(aux_logits=True, init_weights=False),
     lambda b: (torch.randn(b, 3, 299, 299),), 2),
    ("inception_v3", 'family = "inception-v3"\naux_logits = false',
     lambda: torchvision.models.inception_v3(aux_logits=False, init_weights=False),
     lambda b: (torch.randn(b, 3, 299, 299),), 2),
    ("transformer-base", 'family = "transformer"', TransformerRef,
     lambda b: (ids(37000, b, 64), ids(37000, b, 64)), 1),
    ("bert-base", 'family = "bert"', BertRef, lambda b: (ids(30522, b, 128), ids(2, b, 128)), 1),
    ("seq2seq", 'family = "seq2seq"', Seq2seqRef, lambda b: (ids(17000, b, 50), ids(17000, b, 50)), 1),
    ("deepspeech2", 'family = "deep-speech2"', DeepSpeech2Ref, lambda b: (torch.randn(b, 1, 161, 200),), 1),
    ("faster-rcnn-r101", 'family = "faster-rcnn"', FasterRcnnC4Ref, lambda b: (torch.randn(b, 3, 600, 600),), 1),
    ("wgan-gp", 'family = "wgan-gp"', WganRef, lambda b: (torch.randn(b, 128), torch.randn(b, 3, 64, 64)), 2),
    ("a3c", 'family = "a3c"', a3c_ref, lambda b: (torch.randn(b, 4, 84, 84),), 1),
    ("ncf", 'family = "ncf"', NcfRef, lambda b: (ids(138493, b), ids(26744, b)), 1),
    ("mlp", 'family = "mlp"', mlp_ref, lambda b: (torch.randn(b, 784),), 1),
    # Today's workloads, built on the meta device (shapes only: no memory, no weights, FLOPs still counted).
    ("gpt2-small", GPT2_BODY, gpt2_small, lambda b: (ids(50257, b, 1024),), "meta"),
    ("llama3.2-1b", LLAMA_1B, lambda: llama(16, 2048, 8, 8192, True, 131072), lambda b: (ids(128256, b, 2048),),
     "meta"),
    ("llama3.1-8b", LLAMA_8B, lambda: llama(32, 4096, 8, 14336, False, 131072), lambda b: (ids(128256, b, 8192),),
     "meta"),
    ("vit_b_16", 'family = "vit"', torchvision.models.vit_b_16, lambda b: (torch.randn(b, 3, 224, 224),), "meta"),
]


# LoRA (`[training.lora]`): trainable parameters against PEFT's `get_peft_model` on the same transformers config
# (meta device) when `peft` is importable, else against PEFT's count written out: each adapted linear layer
# d_in -> d_out adds r x (d_in + d_out) (lora_A [r, d_in], lora_B [d_out, r]; bias = "none").
LLAMA2_70B = dict(layers=80, d=8192, heads=64, kv=8, ffn=28672, vocab=32000)
LORA_CASES = [
    # name, model dims, rank, alpha, targets, base parameters (LlamaForCausalLM on the meta device)
    ("llama2-70b-lora", LLAMA2_70B, 16, 32, ["q", "k", "v", "o"], 68_976_648_192),
]


def lora_body(m, rank, alpha, targets):
    return ('family = "gpt"\nactivation = "swiglu"\nnorm = "rmsnorm"\npositions = "rotary"\nrope_theta = 10000.0\n'
            f'vocab = {m["vocab"]}\nheads = {m["heads"]}\nkv_heads = {m["kv"]}\nbias = false\n'
            f'layers = {m["layers"]}\nd_model = {m["d"]}\nffn = {m["ffn"]}\ntied_embeddings = false\nseq_len = 16\n\n'
            f'[training.lora]\nrank = {rank}\nalpha = {float(alpha)}\n'
            f'targets = [{", ".join(repr(t).replace(chr(39), chr(34)) for t in targets)}]')


def lora_formula(m, rank, targets):
    """PEFT's trainable count written out: r x (d_in + d_out) per adapted projection per layer."""
    hd = m["d"] // m["heads"]
    widths = {"q": (m["d"], m["heads"] * hd), "k": (m["d"], m["kv"] * hd), "v": (m["d"], m["kv"] * hd),
              "o": (m["heads"] * hd, m["d"]), "gate": (m["d"], m["ffn"]), "up": (m["d"], m["ffn"]),
              "down": (m["ffn"], m["d"])}
    return m["layers"] * sum(rank * sum(widths[t]) for t in targets)


def lora_peft(m, rank, alpha, targets):
    """(trainable, all) from PEFT's get_peft_model on LlamaForCausalLM on the meta device; None without peft."""
    try:
        from peft import LoraConfig, get_peft_model
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        return None
    cfg = LlamaConfig(vocab_size=m["vocab"], hidden_size=m["d"], intermediate_size=m["ffn"],
                      num_hidden_layers=m["layers"], num_attention_heads=m["heads"], num_key_value_heads=m["kv"],
                      tie_word_embeddings=False, attention_bias=False, mlp_bias=False)
    with torch.device("meta"):
        model = get_peft_model(LlamaForCausalLM(cfg), LoraConfig(
            r=rank, lora_alpha=alpha, target_modules=[f"{t}_proj" for t in targets], bias="none"))
    return model.get_nb_trainable_parameters()


def check_lora(binary, only):
    """Rows (name, ours, reference, source) of the LoRA cases, and whether any differs."""
    rows, failed = [], False
    for name, m, rank, alpha, targets, base in LORA_CASES:
        if only and name not in only:
            continue
        spec_name = "check-" + name
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write(f'version = 1\nname = "{spec_name}"\n\n[model]\n{lora_body(m, rank, alpha, targets)}\n')
            path = f.name
        try:
            out = subprocess.run([binary, "analyze", path, "--format", "json"], check=True, capture_output=True,
                                 text=True)
        finally:
            os.unlink(path)
        r = json.loads(out.stdout)
        ours = (r["trainable_parameters"], r["parameters"])
        peft = lora_peft(m, rank, alpha, targets)
        trained = lora_formula(m, rank, targets)
        theirs, source = (peft, "peft get_peft_model") if peft else ((trained, base + trained), "PEFT's formula")
        bad = ours != tuple(theirs)
        failed |= bad
        rows.append((name + (" !" if bad else ""), f"{ours[0]:,} of {ours[1]:,}", f"{theirs[0]:,} of {theirs[1]:,}",
                     source))
        print("checked", *rows[-1], sep=" | ", file=sys.stderr)
    return rows, failed


# Mixture of experts (`[model.moe]`): all and active parameters against transformers' MixtralForCausalLM and
# Qwen3MoeForCausalLM built from the published configs on the meta device when transformers has them, else against
# the published counts. Active = all less, in each layer, the (experts - top_k) experts a token skips.
MOE_BODY = ('family = "gpt"\nactivation = "swiglu"\nnorm = "rmsnorm"\npositions = "rotary"\nrope_theta = 1000000.0\n'
            'bias = false\ntied_embeddings = false\nseq_len = 16\n')
MOE_CASES = [
    # name, [model] body, factory name, config, (experts, top_k, layers, d, expert_ffn), published parameters
    ("mixtral-8x7b", MOE_BODY + 'layers = 32\nd_model = 4096\nheads = 32\nkv_heads = 8\nffn = 14336\nvocab = 32000\n'
     '[model.moe]\nexperts = 8\ntop_k = 2\nexpert_ffn = 14336', "Mixtral",
     dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
          num_key_value_heads=8, num_local_experts=8, num_experts_per_tok=2, tie_word_embeddings=False),
     (8, 2, 32, 4096, 14336), 46_702_792_704),
    ("qwen3-30b-a3b", MOE_BODY + 'layers = 48\nd_model = 2048\nheads = 32\nkv_heads = 4\nhead_dim = 128\nffn = 6144\n'
     'vocab = 151936\nnorm_eps = 1e-6\nqk_norm = true\n[model.moe]\nexperts = 128\ntop_k = 8\nexpert_ffn = 768',
     "Qwen3Moe",
     dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
          num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4, head_dim=128, num_experts=128,
          num_experts_per_tok=8, decoder_sparse_step=1, mlp_only_layers=[], tie_word_embeddings=False),
     (128, 8, 48, 2048, 768), 30_532_122_624),
]


def moe_reference(family, config):
    """All parameters of transformers' <family>ForCausalLM on the meta device; None where transformers lacks it."""
    try:
        import transformers
        cfg = getattr(transformers, f"{family}Config")(**config)
        model_class = getattr(transformers, f"{family}ForCausalLM")
    except (ImportError, AttributeError):
        return None
    with torch.device("meta"):
        return sum(p.numel() for p in model_class(cfg).parameters())


def check_moe(binary, only):
    """Rows (name, ours, reference, source) of the mixture-of-experts cases, and whether any differs."""
    rows, failed = [], False
    for name, body, family, config, (experts, top_k, layers, d, ffn), published in MOE_CASES:
        if only and name not in only:
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write(f'version = 1\nname = "check-{name}"\n\n[model]\n{body}\n')
            path = f.name
        try:
            out = subprocess.run([binary, "analyze", path, "--format", "json"], check=True, capture_output=True,
                                 text=True)
        finally:
            os.unlink(path)
        r = json.loads(out.stdout)
        ours = (r["active_parameters"], r["parameters"])
        total = moe_reference(family, config)
        total, source = (total, f"transformers {family}ForCausalLM") if total else (published, "published count")
        theirs = (total - layers * (experts - top_k) * 3 * d * ffn, total)
        bad = ours != theirs
        failed |= bad
        rows.append((name + (" !" if bad else ""), f"{ours[0]:,} of {ours[1]:,}", f"{theirs[0]:,} of {theirs[1]:,}",
                     source))
        print("checked", *rows[-1], sep=" | ", file=sys.stderr)
    return rows, failed


def outputs_sum(out):
    if isinstance(out, torch.Tensor):
        return out.float().sum()
    return sum(outputs_sum(o) for o in out if o is not None)


def saved_bytes(model, xs):
    """Bytes of the distinct storages autograd saves for backward during one forward (weights excluded)."""
    owned = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    seen = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in owned:
            seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(*xs)
    return sum(seen.values())


def torch_counts(factory, inputs, batch):
    torch.manual_seed(0)
    meta = batch == "meta"
    batch = 1 if meta else batch
    with torch.device("meta" if meta else "cpu"):
        model = factory()
        xs = inputs(batch)
    model.train()
    params = sum(p.numel() for p in model.parameters())
    # Math attention and no oneDNN RNN kernels: the flop counter sees their matmuls.
    with sdpa_kernel(SDPBackend.MATH), torch.backends.mkldnn.flags(enabled=False):
        saved = None if meta else saved_bytes(model, xs) // batch
        with FlopCounterMode(display=False) as fc:
            model(*xs)
        forward = fc.get_total_flops()
        with FlopCounterMode(display=False) as fc:
            outputs_sum(model(*xs)).backward()
        train = fc.get_total_flops()
    return params, forward // batch, train // batch, saved


def our_counts(binary, name, body):
    spec_name = "check-" + name.replace("+", "-")
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(f'version = 1\nname = "{spec_name}"\n\n[model]\n{body}\n')
        path = f.name
    try:
        cmd = [binary, "analyze", path, "--format", "json", "--per-layer", "--precision", "fp32"]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    finally:
        os.unlink(path)
    r = json.loads(out.stdout)
    saved = sum(4 * l["saved_elements"] + l["saved_other_bytes"] for l in r["layers"] if l["op"] != "loss")
    return r["parameters"], r["flops"]["forward_per_sample"], r["flops"]["train_per_sample"], saved


def pct(ours, theirs):
    return 0.0 if ours == theirs else 100.0 * (ours - theirs) / theirs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--bin", default=os.path.join(root, "target", "debug", "trainbench"))
    ap.add_argument("--only", nargs="*", help="model names to check (default: all)")
    args = ap.parse_args()
    if not os.path.exists(args.bin):
        subprocess.run(["cargo", "build", "--bin", "trainbench"], cwd=root, check=True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    header = ("model", "params ours", "params torch", "FLOPs ours", "FLOPs torch", "diff%", "train ours",
              "train torch", "diff%", "saved MiB ours", "saved MiB torch", "diff%")
    rows, failed = [], False
    for name, body, factory, inputs, batch in CASES:
        if args.only and name not in args.only:
            continue
        op, of, ot, osv = our_counts(args.bin, name, body)
        tp, tf, tt, tsv = torch_counts(factory, inputs, batch)
        df, dt = pct(of, tf), pct(ot, tt)
        bad = op != tp or abs(df) > 100 * TOLERANCE or abs(dt) > 100 * TOLERANCE
        failed |= bad
        tsv_text = "n/a" if tsv is None else f"{tsv / 2**20:.1f}"
        sv_diff = "n/a" if tsv is None else f"{pct(osv, tsv):+.1f}"
        rows.append((name + (" !" if bad else ""), f"{op:,}", f"{tp:,}", f"{of:,}", f"{tf:,}", f"{df:+.3f}",
                     f"{ot:,}", f"{tt:,}", f"{dt:+.3f}", f"{osv / 2**20:.1f}", tsv_text, sv_diff))
        print("checked", *rows[-1], sep=" | ", file=sys.stderr)
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(str(c).rjust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))
    lora_rows, lora_failed = check_lora(args.bin, args.only)
    if lora_rows:
        print()
        print("| LoRA | trainable of all, ours | reference | reference from |")
        print("|---|---|---|---|")
        for r in lora_rows:
            print("| " + " | ".join(r) + " |")
    moe_rows, moe_failed = check_moe(args.bin, args.only)
    if moe_rows:
        print()
        print("| MoE | active of all, ours | reference | reference from |")
        print("|---|---|---|---|")
        for r in moe_rows:
            print("| " + " | ".join(r) + " |")
    return 1 if failed or lora_failed or moe_failed else 0


if __name__ == "__main__":
    sys.exit(main())
