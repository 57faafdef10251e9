"""Reference losses from PyTorch for the wgpu backend's agreement test.

Reads what `cargo run -p trainbench-contract --features testing --example export_reference -- DIR` wrote (per fixture: the workload
graph, the seeded initial tensors in PyTorch's layouts, and the synthetic batch of every iteration), trains the
same model with PyTorch's own modules and optimizer on the CPU in fp32, and writes the loss of every iteration
to OUT/<fixture>.json.

Recurrent layers and attention run through torch.nn.LSTM / nn.GRU / nn.MultiheadAttention (not written out),
so the reference is independent of the backend's hand-written recurrences; RMSNorm, grouped-query attention and
embedding bags through F.rms_norm, F.scaled_dot_product_attention (enable_gqa) and F.embedding_bag. Rotary
embeddings have no torch function: they are written out in Llama's half-split layout.

Usage: python torch_reference.py DIR OUT
"""

import json
import math
import pathlib
import sys

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


def run_fixture(doc):
    graph = doc["graph"]
    batch = doc["batch"]
    nodes = graph["nodes"]
    tensors = {}
    trainable = []
    for p in doc["params"]:
        t = torch.tensor(p["values"], dtype=torch.float32).reshape(p["shape"])
        if p["trainable"]:
            t.requires_grad_(True)
            trainable.append(t)
        tensors[(p["node"], p["local"])] = t

    modules = {}
    for i, n in enumerate(nodes):
        op = n["op"]
        if op["op"] == "rnn":
            cls = torch.nn.LSTM if op["cell"] == "lstm" else torch.nn.GRU
            m = cls(op["input_size"], op["hidden"], op["layers"], batch_first=True, bidirectional=op["bidirectional"])
            bind(m, i, tensors, trainable)
            modules[i] = m
        elif op["op"] == "attention":
            e = op["embed_dim"]
            m = torch.nn.MultiheadAttention(e, op["heads"], batch_first=True, kdim=op["kdim"], vdim=op["vdim"])
            bind(m, i, tensors, trainable)
            modules[i] = m

    opt_spec = doc["optimizer"]
    assert opt_spec["kind"] == "sgd", opt_spec
    opt = torch.optim.SGD(trainable, lr=opt_spec["lr"], momentum=opt_spec["momentum"],
                          weight_decay=opt_spec["weight_decay"], nesterov=opt_spec["nesterov"])
    losses = []
    for inputs in doc["batches"]:
        opt.zero_grad(set_to_none=True)
        loss = forward(graph, batch, inputs, tensors, modules)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    return losses


def bind(module, node, tensors, trainable):
    """Replace a module's parameters with the exported leaves (names are PyTorch's)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(tensors[(node, name)])
    # The module's own parameters are trained; drop the exported leaves from the list.
    for name, p in module.named_parameters():
        leaf = tensors.pop((node, name))
        trainable[:] = [t for t in trainable if t is not leaf]
        trainable.append(p)


def fold(x, nd):
    """[B, extra.., C, spatial(nd)..] -> [N, C, spatial..] and the leading shape to restore."""
    lead = x.shape[: x.dim() - nd - 1]
    return x.reshape(-1, *x.shape[x.dim() - nd - 1:]), lead


def forward(graph, batch, inputs, tensors, modules):
    nodes = graph["nodes"]
    vals = {}
    total = None
    aux_losses = []
    for i, n in enumerate(nodes):
        op = n["op"]
        kind = op["op"]
        out_shape = [batch] + n["shape"]
        args = [vals[j] for j in n["inputs"]]
        p = lambda local: tensors.get((i, local))  # noqa: E731
        if kind == "input":
            data = inputs[n["name"]]
            dtype = torch.float32 if data["kind"] == "dense" else torch.int64
            y = torch.tensor(data["values"], dtype=dtype).reshape(out_shape)
        elif kind == "conv":
            nd = len(op["kernel"])
            x, _ = fold(args[0], nd)
            kw = dict(stride=op["stride"], padding=op["padding"], dilation=op["dilation"], groups=op["groups"])
            if op["transposed"]:
                f = F.conv_transpose1d if nd == 1 else F.conv_transpose2d
                y = f(x, p("weight"), p("bias"), output_padding=op["output_padding"], **kw)
            else:
                f = F.conv1d if nd == 1 else F.conv2d
                y = f(x, p("weight"), p("bias"), **kw)
            y = y.reshape(out_shape)
        elif kind == "batch_norm":
            x = args[0]
            if x.dim() >= 4:
                x = x.reshape(-1, *x.shape[-3:])
            y = F.batch_norm(x, p("running_mean"), p("running_var"), p("weight"), p("bias"),
                             training=True, momentum=0.1, eps=op["eps"]).reshape(out_shape)
        elif kind == "layer_norm":
            y = F.layer_norm(args[0], (op["features"],), p("weight"), p("bias"), op["eps"])
        elif kind == "rms_norm":
            y = F.rms_norm(args[0], (op["features"],), p("weight"), op["eps"])
        elif kind == "rotary":
            y = rotary(args[0], op["heads"], op["head_dim"], op["theta"])
        elif kind == "sdpa":
            y = sdpa(args, op["heads"], op["kv_heads"], op["head_dim"], op["causal"])
        elif kind == "class_token":
            x = args[0]
            y = torch.cat([p("class_token").expand(x.shape[0], -1, -1), x], dim=1)
        elif kind == "learned_positions":
            t = args[0].shape[1]
            y = args[0] + p("weight")[:t]
        elif kind == "embedding_bag":
            y = F.embedding_bag(args[0], p("weight"), mode=op["mode"])
        elif kind == "linear":
            y = F.linear(args[0], p("weight"), p("bias"))
        elif kind == "embedding":
            y = F.embedding(args[0], p("weight"))
        elif kind == "rnn":
            y, _ = modules[i](args[0])
        elif kind == "attention":
            q, k, v = args
            mask = None
            if op["causal"]:
                t = q.shape[1]
                mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
            y, _ = modules[i](q, k, v, attn_mask=mask, need_weights=False)
        elif kind == "pool":
            nd = len(op["kernel"])
            x = args[0].reshape(-1, 1, *args[0].shape[-nd:])
            if op["kind"] == "max":
                f = F.max_pool1d if nd == 1 else F.max_pool2d
                y = f(x, op["kernel"], op["stride"], op["padding"], ceil_mode=op["ceil_mode"])
            else:
                f = F.avg_pool1d if nd == 1 else F.avg_pool2d
                y = f(x, op["kernel"], op["stride"], op["padding"], ceil_mode=op["ceil_mode"], count_include_pad=True)
            y = y.reshape(out_shape)
        elif kind == "adaptive_pool":
            nd = len(op["output"])
            x = args[0].reshape(-1, 1, *args[0].shape[-nd:])
            if op["kind"] == "max":
                f = F.adaptive_max_pool1d if nd == 1 else F.adaptive_max_pool2d
            else:
                f = F.adaptive_avg_pool1d if nd == 1 else F.adaptive_avg_pool2d
            y = f(x, op["output"]).reshape(out_shape)
        elif kind == "act":
            fn = op["function"]
            x = args[0]
            if fn == "relu":
                y = F.relu(x)
            elif isinstance(fn, dict) and "leaky_relu" in fn:
                y = F.leaky_relu(x, fn["leaky_relu"])
            elif fn == "gelu":
                y = F.gelu(x)
            elif fn == "tanh":
                y = torch.tanh(x)
            elif fn == "sigmoid":
                y = torch.sigmoid(x)
            elif fn == "silu":
                y = F.silu(x)
            elif fn == "hard_tanh20":
                y = F.hardtanh(x, 0.0, 20.0)
            else:
                raise ValueError(f"activation {fn}")
        elif kind == "softmax":
            y = F.softmax(args[0], -1)
        elif kind == "lora":
            # PEFT's LoraLayer: lora_B(lora_A(dropout(x))) * (lora_alpha / r), beside the frozen base layer
            # (whose exported tensors are not trainable: no gradient, not in the optimizer).
            x = F.dropout(args[0], op["dropout"], training=True) if op["dropout"] > 0 else args[0]
            y = F.linear(F.linear(x, p("lora_A")), p("lora_B")) * (op["alpha"] / op["rank"])
        elif kind == "moe":
            y, aux = moe(args[0], op, p)
            if op["aux_loss"] > 0:
                aux_losses.append(aux * op["aux_loss"])
        elif kind == "dropout":
            y = F.dropout(args[0], op["p"], training=True)
        elif kind == "add":
            y = sum(args[1:], args[0])
        elif kind == "mul":
            y = args[0]
            for a in args[1:]:
                y = y * a
        elif kind == "concat":
            y = torch.cat(args, op["axis"] + 1)
        elif kind == "reshape":
            y = args[0].reshape(out_shape)
        elif kind == "transpose":
            y = args[0].transpose(op["a"] + 1, op["b"] + 1).contiguous()
        elif kind == "slice":
            y = args[0].narrow(op["axis"] + 1, op["start"], op["len"])
        elif kind == "mean":
            y = args[0].mean(op["axis"] + 1)
        elif kind == "loss":
            y = loss_value(op["loss"], args, nodes, n)
            total = y if total is None else total + y
        else:
            raise ValueError(f"op {kind} has no reference lowering")
        vals[i] = y
    # The mixture-of-experts layers' load-balancing losses join the training loss.
    for aux in aux_losses:
        total = total + aux
    return total


def swiglu(x, gate, up, down):
    return F.linear(F.silu(F.linear(x, gate)) * F.linear(x, up), down)


def moe(x, op, p):
    """A mixture-of-experts feed-forward as Mixtral's and DeepSeek-V3's reference code routes it: the router in fp32
    (softmax, or sigmoid scores), the top k renormalised to sum to 1; each expert's assignments in token order, those
    beyond ceil(capacity_factor * tokens * k / experts) dropped; each expert's SwiGLU output weighted by the router
    and added back at its tokens (index_add_), then the shared expert. Also Switch Transformer's balance,
    experts * sum_e (share of the assignments routed to e) * (mean router probability of e), before its coefficient."""
    d, e, k = op["features"], op["experts"], op["top_k"]
    shape = x.shape
    flat = x.reshape(-1, d)
    n = flat.shape[0]
    logits = F.linear(flat, p("router.weight")).float()
    scores = logits.softmax(-1) if op["router"] == "softmax" else logits.sigmoid()
    top, chosen = scores.topk(k, -1, largest=True, sorted=True)
    weights = (top / top.sum(-1, keepdim=True).clamp_min(1e-20)).to(x.dtype)
    flat_expert = chosen.reshape(-1)
    counts = torch.bincount(flat_expert, minlength=e)
    cf = op.get("capacity_factor")
    capacity = None if cf is None else math.ceil(cf * n * k / e)
    out = torch.zeros_like(flat)
    gate, up, down = p("experts.gate_proj"), p("experts.up_proj"), p("experts.down_proj")
    for ex in range(e):
        pos = (flat_expert == ex).nonzero().reshape(-1)
        if capacity is not None:
            pos = pos[:capacity]
        if pos.numel() == 0:
            continue
        token = pos // k
        h = swiglu(flat[token], gate[ex], up[ex], down[ex]) * weights.reshape(-1)[pos].unsqueeze(1)
        out = out.index_add(0, token, h)
    if op["shared_ffn"] > 0:
        out = out + swiglu(flat, p("shared.gate_proj.weight"), p("shared.up_proj.weight"),
                           p("shared.down_proj.weight"))
    probs = scores if op["router"] == "softmax" else scores / scores.sum(-1, keepdim=True)
    share = counts.float() / (n * k)
    balance = (probs.mean(0) * share).sum() * e
    return out.reshape(shape), balance


def rotary(x, heads, head_dim, theta):
    """Half-split RoPE (Llama's reference layout) over [B, T, heads * head_dim], angles t * theta^(-2i/d) in f64."""
    b, t, _ = x.shape
    half = head_dim // 2
    inv_freq = theta ** (-torch.arange(0, half, dtype=torch.float64) * 2.0 / head_dim)
    angle = torch.arange(t, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos, sin = angle.cos().float()[:, None, :], angle.sin().float()[:, None, :]
    h = x.reshape(b, t, heads, head_dim)
    x1, x2 = h[..., :half], h[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).reshape(b, t, heads * head_dim)


def sdpa(args, heads, kv_heads, head_dim, causal):
    """torch's fused attention over [B, T, heads * d] queries and [B, T, kv_heads * d] keys and values."""
    q, k, v = (a.reshape(a.shape[0], a.shape[1], n, head_dim).transpose(1, 2)
               for a, n in zip(args, (heads, kv_heads, kv_heads)))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv_heads != heads)
    b, _, t, _ = y.shape
    return y.transpose(1, 2).reshape(b, t, heads * head_dim)


def loss_value(loss, args, nodes, node):
    kind = loss["kind"]
    if kind == "cross_entropy":
        c = args[0].shape[-1]
        return F.cross_entropy(args[0].reshape(-1, c), args[1].reshape(-1))
    if kind == "mse":
        return F.mse_loss(args[0], args[1])
    if kind == "bce_with_logits":
        target = args[1].float() if args[1].dtype == torch.int64 else (args[1] > 0).float()
        return F.binary_cross_entropy_with_logits(args[0], target)
    if kind == "ctc":
        b, t, _ = args[0].shape
        s = args[1].shape[1]
        logp = F.log_softmax(args[0], -1).transpose(0, 1)
        return F.ctc_loss(logp, args[1], torch.full((b,), t, dtype=torch.int64), torch.full((b,), s, dtype=torch.int64),
                          blank=0, reduction="mean", zero_infinity=True)
    if kind == "actor_critic":
        b = args[0].shape[0]
        logp = F.log_softmax(args[0].reshape(b, -1), -1)
        v = args[1].reshape(b)
        ret = args[3].reshape(b)
        adv = ret - v
        policy = -(logp.gather(1, args[2].reshape(b, 1)).reshape(b) * adv.detach()).mean()
        ent = -(logp.exp() * logp).sum(1).mean()
        return policy - loss["entropy"] * ent + loss["value"] * adv.square().mean()
    raise ValueError(f"loss {kind} has no reference lowering")


def main():
    src, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(src.glob("*.json")):
        doc = json.loads(path.read_text())
        losses = run_fixture(doc)
        result = {
            "fixture": doc["fixture"],
            "torch": torch.__version__,
            "batch": doc["batch"],
            "seed": doc["seed"],
            "optimizer": doc["optimizer"],
            "losses": losses,
        }
        (out / path.name).write_text(json.dumps(result, indent=1) + "\n")
        print(doc["fixture"], " ".join(f"{x:.6f}" for x in losses))


if __name__ == "__main__":
    main()
