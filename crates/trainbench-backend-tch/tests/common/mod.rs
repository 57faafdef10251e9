//! Small graphs and plans shared by the tch backend's CPU tests.
#![allow(dead_code, missing_docs, clippy::unwrap_used)]

use trainbench_contract::RunPlan;
use trainbench_graph::graph::{Activation, Graph, InputKind, LossKind, PoolKind, RnnCell};
use trainbench_graph::{ConvCfg, GraphBuilder, OptimizerSpec};

pub fn plan(batch: usize, steps: u64, optimizer: OptimizerSpec) -> RunPlan {
    RunPlan { batch_size: batch, warmup: 0, optimizer, ..RunPlan::for_tests("test", steps) }
}

pub fn sgd(lr: f64) -> OptimizerSpec {
    OptimizerSpec::Sgd { lr, momentum: 0.9, weight_decay: 0.0, nesterov: false }
}

pub fn adam(lr: f64) -> OptimizerSpec {
    OptimizerSpec::Adam { lr, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }
}

pub fn mlp() -> Graph {
    let mut b = GraphBuilder::new("mlp");
    let x = b.input("x", &[32], InputKind::Dense).unwrap();
    let y = b.input("y", &[], InputKind::Labels { classes: 4 }).unwrap();
    let h = b.linear("fc1", x, 64, true).unwrap();
    let h = b.act("relu1", h, Activation::Relu).unwrap();
    let h = b.dropout("drop", h, 0.1).unwrap();
    let o = b.linear("fc2", h, 4, true).unwrap();
    b.loss("loss", LossKind::CrossEntropy, &[o, y]).unwrap();
    b.finish(1, "samples").unwrap()
}

/// conv-bn-relu stem, one residual block, global pooling, classifier.
pub fn small_cnn() -> Graph {
    let mut b = GraphBuilder::new("cnn");
    let x = b.input("x", &[3, 16, 16], InputKind::Dense).unwrap();
    let y = b.input("y", &[], InputKind::Labels { classes: 5 }).unwrap();
    let c = b.conv("conv1", x, ConvCfg::square(8, 3, 1, 1)).unwrap();
    let c = b.batch_norm("bn1", c).unwrap();
    let s = b.act("relu1", c, Activation::Relu).unwrap();
    b.push("block");
    let c = b.conv("conv1", s, ConvCfg::square(8, 3, 1, 1)).unwrap();
    let c = b.batch_norm("bn1", c).unwrap();
    let c = b.act("relu1", c, Activation::Relu).unwrap();
    let c = b.conv("conv2", c, ConvCfg::square(8, 3, 1, 1)).unwrap();
    let c = b.batch_norm("bn2", c).unwrap();
    let r = b.add_nodes("add", &[c, s]).unwrap();
    let r = b.act("relu2", r, Activation::Relu).unwrap();
    b.pop();
    let p = b.pool("pool", r, PoolKind::Max, 2, 2, 0).unwrap();
    let g = b.adaptive_pool("gap", p, PoolKind::Avg, vec![1, 1]).unwrap();
    let f = b.flatten("flat", g).unwrap();
    let o = b.linear("fc", f, 5, true).unwrap();
    b.loss("loss", LossKind::CrossEntropy, &[o, y]).unwrap();
    b.finish(1, "samples").unwrap()
}

/// Token tagger: embedding, 2-layer bidirectional LSTM, per-position classifier.
pub fn lstm_tagger() -> Graph {
    let mut b = GraphBuilder::new("lstm");
    let t = b.input("tokens", &[12], InputKind::Tokens { vocab: 20 }).unwrap();
    let y = b.input("tags", &[12], InputKind::Labels { classes: 6 }).unwrap();
    let e = b.embedding("emb", t, 20, 16).unwrap();
    let r = b.rnn("rnn", e, RnnCell::Lstm, 24, 2, true).unwrap();
    let o = b.linear("out", r, 6, true).unwrap();
    b.loss("loss", LossKind::CrossEntropy, &[o, y]).unwrap();
    b.finish(12, "tokens").unwrap()
}

/// A pre-norm-free transformer block: causal self-attention + residual + layer norm + GELU MLP.
pub fn attention_block() -> Graph {
    let mut b = GraphBuilder::new("attn");
    let t = b.input("tokens", &[10], InputKind::Tokens { vocab: 30 }).unwrap();
    let y = b.input("next", &[10], InputKind::Labels { classes: 30 }).unwrap();
    let e = b.embedding("emb", t, 30, 32).unwrap();
    let a = b.attention("attn", e, e, 4, true).unwrap();
    let r = b.add_nodes("res1", &[a, e]).unwrap();
    let n = b.layer_norm("ln1", r, 1e-5).unwrap();
    let h = b.linear("ff1", n, 64, true).unwrap();
    let h = b.act("gelu", h, Activation::Gelu).unwrap();
    let h = b.linear("ff2", h, 32, true).unwrap();
    let r = b.add_nodes("res2", &[h, n]).unwrap();
    let n = b.layer_norm("ln2", r, 1e-5).unwrap();
    let o = b.linear("head", n, 30, true).unwrap();
    b.loss("loss", LossKind::CrossEntropy, &[o, y]).unwrap();
    b.finish(10, "tokens").unwrap()
}

/// Deep-Speech-like: 1-d conv front end, bidirectional GRU, CTC.
pub fn ctc_model() -> Graph {
    let mut b = GraphBuilder::new("ctc");
    let x = b.input("spec", &[8, 24], InputKind::Dense).unwrap();
    let y = b.input("text", &[5], InputKind::Labels { classes: 7 }).unwrap();
    let c = b
        .conv(
            "conv",
            x,
            ConvCfg {
                kernel: vec![3],
                stride: vec![1],
                padding: vec![1],
                dilation: vec![1],
                output_padding: vec![0],
                ..ConvCfg::square(16, 1, 1, 0)
            },
        )
        .unwrap();
    let c = b.batch_norm("bn", c).unwrap();
    let c = b.act("clip", c, Activation::HardTanh20).unwrap();
    let s = b.transpose("to_time", c, 0, 1).unwrap();
    let r = b.rnn("gru", s, RnnCell::Gru, 16, 2, true).unwrap();
    let o = b.linear("fc", r, 7, true).unwrap();
    b.loss("ctc", LossKind::Ctc, &[o, y]).unwrap();
    b.finish(1, "samples").unwrap()
}

/// RoI head over a small feature map.
pub fn roi_model() -> Graph {
    let mut b = GraphBuilder::new("roi");
    let x = b.input("img", &[3, 16, 16], InputKind::Dense).unwrap();
    let y = b.input("cls", &[4], InputKind::Labels { classes: 3 }).unwrap();
    let f = b.conv("backbone", x, ConvCfg::square(6, 3, 2, 1)).unwrap();
    let r = b.roi_align("roi", f, 4, [3, 3], 0.5).unwrap();
    let c = b.conv("head", r, ConvCfg::square(8, 3, 1, 0)).unwrap();
    let c = b.act("relu", c, Activation::Relu).unwrap();
    let f = b.reshape("flat", c, &[4, 8]).unwrap();
    let o = b.linear("cls_fc", f, 3, true).unwrap();
    b.loss("loss", LossKind::CrossEntropy, &[o, y]).unwrap();
    b.finish(1, "images").unwrap()
}

/// Tiny WGAN-GP in the zoo's convention: a linear generator; the critic scores the stacked (real, fake,
/// interpolated) images of `critic_batch`; the Wasserstein loss takes the scores and that node.
pub fn wgan() -> Graph {
    let mut b = GraphBuilder::new("wgan");
    b.set_part(Some("generator"));
    let z = b.input("noise", &[8], InputKind::Dense).unwrap();
    let g = b.linear("g.fc", z, 48, true).unwrap();
    let g = b.act("g.tanh", g, Activation::Tanh).unwrap();
    let g = b.reshape("g.img", g, &[3, 4, 4]).unwrap();
    b.set_part(Some("critic"));
    let x = b.input("real", &[3, 4, 4], InputKind::Dense).unwrap();
    let both = b.critic_batch("d.inputs", x, g).unwrap();
    let c = b.conv("d.conv", both, ConvCfg::square(4, 3, 2, 1).with_bias(true)).unwrap();
    let c = b.act("d.lrelu", c, Activation::LeakyRelu(0.2)).unwrap();
    let f = b.reshape("d.flat", c, &[3, 16]).unwrap();
    let s = b.linear("d.fc", f, 1, true).unwrap();
    b.loss("wgan", LossKind::Wasserstein { gp_weight: 10.0 }, &[s, both]).unwrap();
    b.finish(1, "samples").unwrap()
}

/// Language model with the remaining sequence ops: sinusoidal and learned positions, a hand-written attention
/// (matmul, softmax, matmul), an output projection tied to the embedding, and an auxiliary weighted loss.
pub fn tied_lm() -> Graph {
    let mut b = GraphBuilder::new("tied");
    let t = b.input("tokens", &[8], InputKind::Tokens { vocab: 24 }).unwrap();
    let y = b.input("next", &[8], InputKind::Labels { classes: 24 }).unwrap();
    let box_t = b.input("boxes", &[8, 4], InputKind::Dense).unwrap();
    let emb = b.embedding("emb", t, 24, 16).unwrap();
    let e = b.sinusoidal_positions("sin", emb, 4.0).unwrap();
    let e = b.learned_positions("pos", e, 10).unwrap();
    let q = b.linear("q", e, 16, false).unwrap();
    let scores = b.matmul("scores", q, e, true).unwrap();
    let w = b.softmax("weights", scores).unwrap();
    let ctx = b.matmul("context", w, e, false).unwrap();
    let h = b.add_nodes("res", &[ctx, e]).unwrap();
    let o = b.linear("out", h, 24, false).unwrap();
    b.tie(o, emb).unwrap();
    let bx = b.linear("box", h, 4, true).unwrap();
    b.loss("ce", LossKind::CrossEntropy, &[o, y]).unwrap();
    b.loss_weighted("box_loss", LossKind::SmoothL1 { beta: 1.0 }, &[bx, box_t], 0.5).unwrap();
    b.finish(8, "tokens").unwrap()
}

/// A3C-like actor-critic with a conv torso.
pub fn actor_critic() -> Graph {
    let mut b = GraphBuilder::new("a3c");
    let x = b.input("frames", &[4, 12, 12], InputKind::Dense).unwrap();
    let a = b.input("actions", &[], InputKind::Labels { classes: 6 }).unwrap();
    let r = b.input("returns", &[1], InputKind::Dense).unwrap();
    let c = b.conv("conv", x, ConvCfg::square(8, 4, 2, 0).with_bias(true)).unwrap();
    let c = b.act("relu", c, Activation::Relu).unwrap();
    let f = b.flatten("flat", c).unwrap();
    let h = b.linear("fc", f, 32, true).unwrap();
    let h = b.act("relu2", h, Activation::Relu).unwrap();
    let pi = b.linear("policy", h, 6, true).unwrap();
    let v = b.linear("value", h, 1, true).unwrap();
    b.loss("loss", LossKind::ActorCritic { entropy: 0.01, value: 0.5 }, &[pi, v, a, r]).unwrap();
    b.finish(1, "samples").unwrap()
}

/// Regression and binary heads: MSE and BCE-with-logits summed.
pub fn two_losses() -> Graph {
    let mut b = GraphBuilder::new("two");
    let x = b.input("x", &[16], InputKind::Dense).unwrap();
    let t = b.input("target", &[4], InputKind::Dense).unwrap();
    let h = b.linear("fc", x, 32, true).unwrap();
    let h = b.act("sig", h, Activation::Sigmoid).unwrap();
    let reg = b.linear("reg", h, 4, true).unwrap();
    let bin = b.linear("bin", h, 4, true).unwrap();
    b.loss("mse", LossKind::Mse, &[reg, t]).unwrap();
    b.loss("bce", LossKind::BceWithLogits, &[bin, t]).unwrap();
    b.finish(1, "samples").unwrap()
}
