//! Small workload graphs that exercise every layer family the backend lowers; the tests, the cross-backend
//! agreement check and the PyTorch reference export train these.

use trainbench_graph::graph::{Activation, InputKind, LossKind, MoeRouter, NodeId, Op, PoolKind, RnnCell};
use trainbench_graph::lora::{LoraSpec, LoraTarget};
use trainbench_graph::{ConvCfg, Graph, GraphBuilder, ShapeError};

/// Names of the fixtures, in a stable order.
pub const NAMES: [&str; 10] = ["mlp", "cnn", "lstm", "transformer", "gru", "ctc", "gpt", "vit", "lora", "moe"];

/// Fixtures of a training mode or layer a backend may refuse as a whole (LoRA's frozen base, mixture-of-experts
/// layers): the agreement skips them on a backend whose `supports` refuses them, saying so; every other fixture
/// must train everywhere.
pub const OPTIONAL: [&str; 2] = ["lora", "moe"];

/// Build a fixture by name.
pub fn build(name: &str) -> Option<Result<Graph, ShapeError>> {
    Some(match name {
        "mlp" => mlp(),
        "cnn" => cnn(),
        "lstm" => lstm(),
        "transformer" => transformer(),
        "gru" => gru(),
        "ctc" => ctc(),
        "gpt" => gpt(),
        "vit" => vit(),
        "lora" => lora(),
        "moe" => moe(),
        _ => return None,
    })
}

/// Three dense layers with tanh and leaky ReLU, cross-entropy over 4 classes.
pub fn mlp() -> Result<Graph, ShapeError> {
    let mut b = GraphBuilder::new("mlp");
    let x = b.input("x", &[20], InputKind::Dense)?;
    let y = b.input("y", &[], InputKind::Labels { classes: 4 })?;
    let h = b.linear("fc1", x, 32, true)?;
    let h = b.act("tanh", h, Activation::Tanh)?;
    let h = b.linear("fc2", h, 32, true)?;
    let h = b.act("lrelu", h, Activation::LeakyRelu(0.1))?;
    let o = b.linear("fc3", h, 4, true)?;
    b.loss("loss", LossKind::CrossEntropy, &[o, y])?;
    b.finish(1, "samples")
}

/// Convolutions (bias, batch norm, grouped and strided), max and average pooling, global average pooling,
/// a residual add, dropout 0 and a classifier.
pub fn cnn() -> Result<Graph, ShapeError> {
    let mut b = GraphBuilder::new("cnn");
    let x = b.input("x", &[3, 16, 16], InputKind::Dense)?;
    let y = b.input("y", &[], InputKind::Labels { classes: 10 })?;
    let h = b.conv("conv1", x, ConvCfg::square(8, 3, 1, 1).with_bias(true))?;
    let h = b.batch_norm("bn1", h)?;
    let h = b.act("relu1", h, Activation::Relu)?;
    let h = b.pool("pool1", h, PoolKind::Max, 2, 2, 0)?;
    let h = b.conv("conv2", h, ConvCfg { groups: 2, ..ConvCfg::square(16, 3, 2, 1) })?;
    let h = b.batch_norm("bn2", h)?;
    let r = b.act("relu2", h, Activation::Relu)?;
    let p = b.pool("pool2", r, PoolKind::Avg, 3, 1, 1)?;
    let h = b.add_nodes("res", &[r, p])?;
    let h = b.adaptive_pool("gap", h, PoolKind::Avg, vec![1, 1])?;
    let h = b.flatten("flat", h)?;
    let h = b.dropout("drop", h, 0.0)?;
    let o = b.linear("fc", h, 10, true)?;
    b.loss("loss", LossKind::CrossEntropy, &[o, y])?;
    b.finish(1, "samples")
}

/// Embedding, a 2-layer bidirectional LSTM and per-token cross-entropy.
pub fn lstm() -> Result<Graph, ShapeError> {
    let mut b = GraphBuilder::new("lstm");
    let t = b.input("tokens", &[12], InputKind::Tokens { vocab: 50 })?;
    let y = b.input("y", &[12], InputKind::Labels { classes: 50 })?;
    let e = b.embedding("embed", t, 50, 16)?;
    let h = b.rnn("lstm", e, RnnCell::Lstm, 24, 2, true)?;
    let o = b.linear("out", h, 50, true)?;
    b.loss("loss", LossKind::CrossEntropy, &[o, y])?;
    b.finish(12, "tokens")
}

/// A pre-norm Transformer decoder block: embedding, causal multi-head self-attention, GELU feed-forward,
/// residual adds and per-token cross-entropy.
pub fn transformer() -> Result<Graph, ShapeError> {
    let mut b = GraphBuilder::new("transformer");
    let t = b.input("tokens", &[10], InputKind::Tokens { vocab: 40 })?;
    let y = b.input("y", &[10], InputKind::Labels { classes: 40 })?;
    let e = b.embedding("embed", t, 40, 32)?;
    let n1 = b.layer_norm("ln1", e, 1e-5)?;
    let a = b.attention("attn", n1, n1, 4, true)?;
    let h = b.add_nodes("res1", &[e, a])?;
    let n2 = b.layer_norm("ln2", h, 1e-5)?;
    let f = b.linear("ff1", n2, 64, true)?;
    let f = b.act("gelu", f, Activation::Gelu)?;
    let f = b.linear("ff2", f, 32, true)?;
    let h = b.add_nodes("res2", &[h, f])?;
    let o = b.linear("out", h, 40, true)?;
    b.loss("loss", LossKind::CrossEntropy, &[o, y])?;
    b.finish(10, "tokens")
}

/// A bidirectional GRU over dense frames, mean over time, sigmoid gate product, classifier.
pub fn gru() -> Result<Graph, ShapeError> {
    let mut b = GraphBuilder::new("gru");
    let x = b.input("x", &[10, 8], InputKind::Dense)?;
    let y = b.input("y", &[], InputKind::Labels { classes: 5 })?;
    let h = b.rnn("gru", x, RnnCell::Gru, 16, 1, true)?;
    let m = b.mean("mean", h, 0)?;
    let g = b.act("gate", m, Activation::Sigmoid)?;
    let h = b.mul("gated", &[m, g])?;
    let o = b.linear("fc", h, 5, true)?;
    b.loss("loss", LossKind::CrossEntropy, &[o, y])?;
    b.finish(1, "samples")
}

/// 1-D convolution over `[C, L]`, transpose to `[time, features]`, GRU, clipped ReLU, CTC.
pub fn ctc() -> Result<Graph, ShapeError> {
    let mut b = GraphBuilder::new("ctc");
    let x = b.input("x", &[8, 24], InputKind::Dense)?;
    let y = b.input("y", &[5], InputKind::Labels { classes: 6 })?;
    let cfg = ConvCfg {
        kernel: vec![3],
        stride: vec![1],
        padding: vec![1],
        dilation: vec![1],
        output_padding: vec![0],
        ..ConvCfg::square(16, 1, 1, 0)
    };
    let h = b.conv("conv", x, cfg)?;
    let h = b.act("clip", h, Activation::HardTanh20)?;
    let h = b.transpose("tr", h, 0, 1)?;
    let h = b.rnn("gru", h, RnnCell::Gru, 12, 1, false)?;
    let o = b.linear("fc", h, 6, true)?;
    b.loss("loss", LossKind::Ctc, &[o, y])?;
    b.finish(1, "samples")
}

/// The first half of [`gpt`]'s and [`moe`]'s Llama-style block: token and label inputs, embedding, RMSNorm,
/// grouped-query causal attention (4 query heads over 2 key/value heads, rotary queries and keys), the residual
/// add and the second RMSNorm. Returns the labels, the residual stream and the feed-forward's input.
fn llama_attention(b: &mut GraphBuilder) -> Result<(NodeId, NodeId, NodeId), ShapeError> {
    let (heads, kv_heads, head_dim) = (4, 2, 8);
    let t = b.input("tokens", &[10], InputKind::Tokens { vocab: 40 })?;
    let y = b.input("y", &[10], InputKind::Labels { classes: 40 })?;
    let e = b.embedding("embed", t, 40, 32)?;
    let n1 = b.rms_norm("norm1", e, 1e-5)?;
    let q = b.linear("q_proj", n1, heads * head_dim, false)?;
    let k = b.linear("k_proj", n1, kv_heads * head_dim, false)?;
    let v = b.linear("v_proj", n1, kv_heads * head_dim, false)?;
    let q = b.rotary("q_rotary", q, heads, 10_000.0)?;
    let k = b.rotary("k_rotary", k, kv_heads, 10_000.0)?;
    let a = b.sdpa("sdpa", [q, k, v], heads, kv_heads, true)?;
    let a = b.linear("o_proj", a, 32, false)?;
    let h = b.add_nodes("res1", &[e, a])?;
    let n2 = b.rms_norm("norm2", h, 1e-5)?;
    Ok((y, h, n2))
}

/// The end of that block: the feed-forward's output `f` added to the residual stream `h`, the final RMSNorm, a
/// bias-free LM head and per-token cross-entropy against `y`.
fn llama_head(mut b: GraphBuilder, y: NodeId, h: NodeId, f: NodeId) -> Result<Graph, ShapeError> {
    let h = b.add_nodes("res2", &[h, f])?;
    let h = b.rms_norm("norm", h, 1e-5)?;
    let o = b.linear("lm_head", h, 40, false)?;
    b.loss("loss", LossKind::CrossEntropy, &[o, y])?;
    b.finish(10, "tokens")
}

/// A Llama-style decoder block: embedding, RMSNorm, grouped-query causal attention (4 query heads over 2
/// key/value heads) with rotary queries and keys, SwiGLU feed-forward, residual adds, a final RMSNorm and a
/// bias-free LM head with per-token cross-entropy.
pub fn gpt() -> Result<Graph, ShapeError> {
    let mut b = GraphBuilder::new("gpt");
    let (y, h, n2) = llama_attention(&mut b)?;
    let gate = b.linear("gate_proj", n2, 64, false)?;
    let gate = b.act("silu", gate, Activation::Silu)?;
    let up = b.linear("up_proj", n2, 64, false)?;
    let f = b.mul("gated", &[gate, up])?;
    let f = b.linear("down_proj", f, 32, false)?;
    llama_head(b, y, h, f)
}

/// A ViT block: 4x4 patch convolution of an 8x8 image, the class token, learned positions, a pre-norm encoder
/// layer (multi-head self-attention in `nn.MultiheadAttention`'s layout, GELU MLP, residual adds), a final
/// layer norm and a classifier on the class token.
pub fn vit() -> Result<Graph, ShapeError> {
    let mut b = GraphBuilder::new("vit");
    let x = b.input("image", &[3, 8, 8], InputKind::Dense)?;
    let y = b.input("labels", &[], InputKind::Labels { classes: 5 })?;
    let p = b.conv("conv_proj", x, ConvCfg::square(16, 4, 4, 0).with_bias(true))?;
    let p = b.reshape("patches", p, &[16, 4])?;
    let p = b.transpose("sequence", p, 0, 1)?;
    let c = b.class_token("class_token", p)?;
    let h = b.learned_positions("pos_embedding", c, 5)?;
    let n1 = b.layer_norm("ln_1", h, 1e-6)?;
    let a = b.attention("self_attention", n1, n1, 2, false)?;
    let r = b.add_nodes("attn_residual", &[a, h])?;
    let n2 = b.layer_norm("ln_2", r, 1e-6)?;
    let f = b.linear("mlp.0", n2, 32, true)?;
    let f = b.act("mlp.1", f, Activation::Gelu)?;
    let f = b.linear("mlp.3", f, 16, true)?;
    let h = b.add_nodes("mlp_residual", &[r, f])?;
    let h = b.layer_norm("ln", h, 1e-6)?;
    let cls = b.slice("class_output", h, 0, 0, 1)?;
    let cls = b.reshape("class_features", cls, &[16])?;
    let o = b.linear("head", cls, 5, true)?;
    b.loss("loss", LossKind::CrossEntropy, &[o, y])?;
    b.finish(1, "samples")
}

/// The Llama-style block of [`gpt`] fine-tuned with LoRA (rank 4, alpha 8, no dropout) on all seven projections:
/// every base weight frozen, the adapters trained (PEFT's `LoraLayer`).
pub fn lora() -> Result<Graph, ShapeError> {
    let spec = LoraSpec {
        rank: 4,
        alpha: Some(8.0),
        dropout: 0.0,
        targets: LoraTarget::ALL.to_vec(),
        base_dtype: Default::default(),
    };
    let graph = gpt()?;
    trainbench_graph::lora::adapt(&graph, &spec).map_err(|e| ShapeError {
        layer: format!("training.lora.{}", e.field),
        op: "lora",
        message: e.message,
    })
}

/// The Llama-style block of [`gpt`] with its feed-forward a mixture of experts (Mixtral's and Qwen3-MoE's
/// routing): a softmax router over 4 SwiGLU experts of width 16, the top 2 renormalised, a capacity factor of
/// 1.0 (assignments over capacity dropped in token order: the agreement run drops some in every step), a shared
/// SwiGLU expert of width 16 every token goes through, and the load-balancing loss (coefficient 0.01) added to the
/// training loss.
pub fn moe() -> Result<Graph, ShapeError> {
    let mut b = GraphBuilder::new("moe");
    let (y, h, n2) = llama_attention(&mut b)?;
    let op = Op::Moe {
        features: 32,
        experts: 4,
        top_k: 2,
        expert_ffn: 16,
        shared_ffn: 16,
        router: MoeRouter::Softmax,
        capacity_factor: Some(1.0),
        aux_loss: 0.01,
    };
    let f = b.moe("moe", n2, op)?;
    llama_head(b, y, h, f)
}
