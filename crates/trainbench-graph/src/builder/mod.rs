//! Building graphs with end-to-end shape inference: every method checks its inputs and returns a located error.
//!
//! The basic layers live here; tensors combined and reshaped in `combine.rs`; products, positional encodings, GAN
//! and detection ops, weight tying and losses in `heads_and_losses.rs`; today's transformer layers in
//! `transformer_layers.rs`.

mod combine;
mod heads_and_losses;
mod transformer_layers;

use crate::graph::{Activation, InputKind, Node, NodeId, Op, PoolKind, RnnCell, Shape};

/// A shape mismatch or invalid hyper-parameter found while building a graph.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("layer `{layer}` ({op}): {message}")]
pub struct ShapeError {
    /// Name of the layer being added.
    pub layer: String,
    /// Operation kind.
    pub op: &'static str,
    /// What is wrong, with both sizes when two disagree.
    pub message: String,
}

/// Incrementally builds a [`Graph`](crate::graph::Graph), inferring each node's per-sample shape.
#[derive(Debug, Clone)]
pub struct GraphBuilder {
    name: String,
    nodes: Vec<Node>,
    losses: Vec<NodeId>,
    part: Option<String>,
    prefix: Vec<String>,
    blocks: Vec<crate::graph::Block>,
    open_block: Option<(String, NodeId, NodeId)>,
    decoder: Option<crate::graph::DecoderDims>,
}

/// Convolution hyper-parameters for [`GraphBuilder::conv`].
#[derive(Debug, Clone, PartialEq)]
pub struct ConvCfg {
    /// Output channels.
    pub out_channels: usize,
    /// Kernel size per spatial dimension (1 or 2 entries).
    pub kernel: Vec<usize>,
    /// Stride per spatial dimension.
    pub stride: Vec<usize>,
    /// Padding per spatial dimension.
    pub padding: Vec<usize>,
    /// Dilation per spatial dimension.
    pub dilation: Vec<usize>,
    /// Groups.
    pub groups: usize,
    /// Bias term.
    pub bias: bool,
    /// Transposed convolution.
    pub transposed: bool,
    /// Output padding (transposed only).
    pub output_padding: Vec<usize>,
}

impl ConvCfg {
    /// A square 2-D convolution with `k x k` kernel, stride `s`, padding `p`, no bias (the CNN default).
    pub fn square(out_channels: usize, k: usize, s: usize, p: usize) -> Self {
        Self {
            out_channels,
            kernel: vec![k, k],
            stride: vec![s, s],
            padding: vec![p, p],
            dilation: vec![1, 1],
            groups: 1,
            bias: false,
            transposed: false,
            output_padding: vec![0, 0],
        }
    }
    /// A 2-D convolution with separate kernel/stride/padding per dimension.
    pub fn rect(out_channels: usize, k: [usize; 2], s: [usize; 2], p: [usize; 2]) -> Self {
        Self { kernel: k.to_vec(), stride: s.to_vec(), padding: p.to_vec(), ..Self::square(out_channels, 1, 1, 0) }
    }
    /// Set the bias flag.
    pub fn with_bias(mut self, bias: bool) -> Self {
        self.bias = bias;
        self
    }
    /// Make it a transposed convolution.
    pub fn transposed(mut self) -> Self {
        self.transposed = true;
        self
    }
}

fn conv_out(len: usize, k: usize, s: usize, p: usize, d: usize) -> Option<usize> {
    let eff = d * (k - 1) + 1;
    (len + 2 * p).checked_sub(eff).map(|v| v / s + 1)
}

impl GraphBuilder {
    /// Start a graph for the named model.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            nodes: Vec::new(),
            losses: Vec::new(),
            part: None,
            prefix: Vec::new(),
            blocks: Vec::new(),
            open_block: None,
            decoder: None,
        }
    }

    /// Nodes added from now on belong to the named sub-network (separate optimizer), or to none.
    pub fn set_part(&mut self, part: Option<&str>) {
        self.part = part.map(str::to_string);
    }

    /// Push a name scope (`layer1`, `0`, ...); node names are the scopes joined by dots.
    pub fn push(&mut self, scope: impl Into<String>) {
        self.prefix.push(scope.into());
    }

    /// Pop the innermost name scope.
    pub fn pop(&mut self) {
        self.prefix.pop();
    }

    /// Shape of an existing node.
    pub fn shape(&self, id: NodeId) -> &Shape {
        &self.nodes[id].shape
    }

    /// Nodes added so far (for inspection in tests).
    pub fn nodes_for_test(&self) -> &[Node] {
        &self.nodes
    }

    /// Number of nodes so far.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when no node has been added.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    fn full_name(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_string()
        } else if name.is_empty() {
            self.prefix.join(".")
        } else {
            format!("{}.{}", self.prefix.join("."), name)
        }
    }

    fn err(&self, name: &str, op: &'static str, message: impl Into<String>) -> ShapeError {
        ShapeError { layer: self.full_name(name), op, message: message.into() }
    }

    fn add(&mut self, name: &str, op: Op, inputs: Vec<NodeId>, shape: Vec<usize>) -> Result<NodeId, ShapeError> {
        let full = self.full_name(name);
        if self.nodes.iter().any(|n| n.name == full) {
            return Err(self.err(name, op.kind_name(), "duplicate layer name"));
        }
        if shape.contains(&0) {
            return Err(self.err(name, op.kind_name(), format!("output shape {} has a zero dimension", Shape(shape))));
        }
        self.nodes.push(Node {
            name: full,
            op,
            inputs,
            shape: Shape(shape),
            part: self.part.clone(),
            tied_to: None,
            frozen: false,
        });
        Ok(self.nodes.len() - 1)
    }

    /// Add a graph input of the given per-sample shape.
    pub fn input(&mut self, name: &str, shape: &[usize], kind: InputKind) -> Result<NodeId, ShapeError> {
        self.add(name, Op::Input { kind }, vec![], shape.to_vec())
    }

    /// Convolution (1-D or 2-D, per `cfg.kernel.len()`), optionally transposed.
    pub fn conv(&mut self, name: &str, x: NodeId, cfg: ConvCfg) -> Result<NodeId, ShapeError> {
        let op_name = if cfg.transposed {
            "conv_transpose"
        } else if cfg.kernel.len() == 1 {
            "conv1d"
        } else {
            "conv2d"
        };
        let nd = cfg.kernel.len();
        if !(1..=2).contains(&nd)
            || [&cfg.stride, &cfg.padding, &cfg.dilation, &cfg.output_padding].iter().any(|v| v.len() != nd)
        {
            return Err(self.err(name, op_name, "kernel, stride, padding and dilation must all have 1 or 2 entries"));
        }
        if cfg.kernel.contains(&0) || cfg.stride.contains(&0) || cfg.dilation.contains(&0) || cfg.groups == 0 {
            return Err(self.err(name, op_name, "kernel, stride, dilation and groups must be at least 1"));
        }
        let s = self.shape(x).0.clone();
        if s.len() < nd + 1 {
            return Err(self.err(
                name,
                op_name,
                format!("expects an input of rank >= {} ([C, ...spatial]), got {}", nd + 1, Shape(s)),
            ));
        }
        let c_axis = s.len() - nd - 1;
        let in_channels = s[c_axis];
        if in_channels % cfg.groups != 0 || cfg.out_channels % cfg.groups != 0 {
            return Err(self.err(
                name,
                op_name,
                format!(
                    "groups = {} must divide both input channels ({in_channels}) and output channels ({})",
                    cfg.groups, cfg.out_channels
                ),
            ));
        }
        let mut out = s[..c_axis].to_vec();
        out.push(cfg.out_channels);
        for i in 0..nd {
            let len = s[c_axis + 1 + i];
            let o = if cfg.transposed {
                ((len - 1) * cfg.stride[i] + cfg.dilation[i] * (cfg.kernel[i] - 1) + cfg.output_padding[i] + 1)
                    .checked_sub(2 * cfg.padding[i])
            } else {
                conv_out(len, cfg.kernel[i], cfg.stride[i], cfg.padding[i], cfg.dilation[i])
            };
            match o {
                Some(o) if o > 0 => out.push(o),
                _ => {
                    return Err(self.err(
                        name,
                        op_name,
                        format!(
                            "kernel {} (dilation {}, padding {}) does not fit input size {} in spatial dimension {i}",
                            cfg.kernel[i], cfg.dilation[i], cfg.padding[i], len
                        ),
                    ));
                }
            }
        }
        let op = Op::Conv {
            in_channels,
            out_channels: cfg.out_channels,
            kernel: cfg.kernel,
            stride: cfg.stride,
            padding: cfg.padding,
            dilation: cfg.dilation,
            groups: cfg.groups,
            bias: cfg.bias,
            transposed: cfg.transposed,
            output_padding: cfg.output_padding,
        };
        self.add(name, op, vec![x], out)
    }

    /// Batch normalisation over the channel axis (`[C, H, W]` or `[C, L]`, or `[F]` for dense features),
    /// PyTorch's default epsilon 1e-5.
    pub fn batch_norm(&mut self, name: &str, x: NodeId) -> Result<NodeId, ShapeError> {
        self.batch_norm_eps(name, x, 1e-5)
    }

    /// Batch normalisation with an explicit epsilon (torchvision's Inception-v3 uses 1e-3).
    pub fn batch_norm_eps(&mut self, name: &str, x: NodeId, eps: f32) -> Result<NodeId, ShapeError> {
        let s = self.shape(x).0.clone();
        let features = match s.len() {
            0 => return Err(self.err(name, "batch_norm", "cannot normalise a scalar")),
            1 => s[0],
            2 => s[0],
            n => s[n - 3],
        };
        self.add(name, Op::BatchNorm { features, eps }, vec![x], s)
    }

    /// Layer normalisation over the last axis.
    pub fn layer_norm(&mut self, name: &str, x: NodeId, eps: f32) -> Result<NodeId, ShapeError> {
        let s = self.shape(x).0.clone();
        let features = self.shape(x).last();
        self.add(name, Op::LayerNorm { features, eps }, vec![x], s)
    }

    /// Linear layer over the last axis.
    pub fn linear(&mut self, name: &str, x: NodeId, out_features: usize, bias: bool) -> Result<NodeId, ShapeError> {
        let mut s = self.shape(x).0.clone();
        if s.is_empty() {
            return Err(self.err(name, "linear", "expects at least a 1-D input, got a scalar"));
        }
        let in_features = s[s.len() - 1];
        *s.last_mut().expect("non-empty") = out_features;
        self.add(name, Op::Linear { in_features, out_features, bias }, vec![x], s)
    }

    /// Linear layer that also checks the input width the author declared.
    pub fn linear_checked(
        &mut self,
        name: &str,
        x: NodeId,
        in_features: usize,
        out_features: usize,
        bias: bool,
    ) -> Result<NodeId, ShapeError> {
        let got = self.shape(x).last();
        if got != in_features || self.shape(x).rank() == 0 {
            return Err(self.err(
                name,
                "linear",
                format!(
                    "declares in_features = {in_features} but its input `{}` has width {got} (shape {})",
                    self.nodes[x].name,
                    self.shape(x)
                ),
            ));
        }
        self.linear(name, x, out_features, bias)
    }

    /// Embedding lookup of integer ids.
    pub fn embedding(&mut self, name: &str, ids: NodeId, vocab: usize, dim: usize) -> Result<NodeId, ShapeError> {
        match self.nodes[ids].op.input_kind() {
            Some(InputKind::Tokens { vocab: v } | InputKind::Labels { classes: v }) if *v > vocab => {
                return Err(self.err(
                    name,
                    "embedding",
                    format!("input ids range over {v} values but the table has only {vocab} rows"),
                ));
            }
            Some(InputKind::Tokens { .. } | InputKind::Labels { .. }) => {}
            Some(InputKind::Dense) | None => {
                return Err(self.err(
                    name,
                    "embedding",
                    format!("input `{}` is not an integer id input", self.nodes[ids].name),
                ));
            }
        }
        let mut s = self.shape(ids).0.clone();
        s.push(dim);
        self.add(name, Op::Embedding { vocab, dim }, vec![ids], s)
    }

    /// Recurrent stack over `[time, features]`.
    pub fn rnn(
        &mut self,
        name: &str,
        x: NodeId,
        cell: RnnCell,
        hidden: usize,
        layers: usize,
        bidirectional: bool,
    ) -> Result<NodeId, ShapeError> {
        let op_name = match cell {
            RnnCell::Lstm => "lstm",
            RnnCell::Gru => "gru",
        };
        let s = self.shape(x).0.clone();
        if s.len() != 2 {
            return Err(self.err(name, op_name, format!("expects [time, features], got {}", Shape(s))));
        }
        if layers == 0 || hidden == 0 {
            return Err(self.err(name, op_name, "layers and hidden must be at least 1"));
        }
        let out = vec![s[0], hidden * if bidirectional { 2 } else { 1 }];
        self.add(name, Op::Rnn { cell, input_size: s[1], hidden, layers, bidirectional }, vec![x], out)
    }

    /// Multi-head attention: query `[Tq, E]`, key/value `[Tk, kdim]` / `[Tk, vdim]`.
    pub fn attention(
        &mut self,
        name: &str,
        q: NodeId,
        kv: NodeId,
        heads: usize,
        causal: bool,
    ) -> Result<NodeId, ShapeError> {
        let qs = self.shape(q).0.clone();
        let ks = self.shape(kv).0.clone();
        if qs.len() != 2 || ks.len() != 2 {
            return Err(self.err(
                name,
                "attention",
                format!("expects [time, features] inputs, got {} and {}", Shape(qs), Shape(ks)),
            ));
        }
        let e = qs[1];
        if heads == 0 || e % heads != 0 {
            return Err(self.err(name, "attention", format!("heads = {heads} must divide the model width {e}")));
        }
        if causal && qs[0] != ks[0] {
            return Err(self.err(name, "attention", "a causal mask needs query and key of the same length"));
        }
        let op = Op::Attention { embed_dim: e, heads, kdim: ks[1], vdim: ks[1], causal, tensor_shards: 1 };
        self.add(name, op, vec![q, kv, kv], qs)
    }

    /// Max or average pooling over the trailing 1 or 2 dimensions.
    pub fn pool(
        &mut self,
        name: &str,
        x: NodeId,
        kind: PoolKind,
        k: usize,
        s: usize,
        p: usize,
    ) -> Result<NodeId, ShapeError> {
        self.pool_nd(name, x, kind, vec![k, k], vec![s, s], vec![p, p], false)
    }

    /// Pooling with per-dimension window, stride and padding.
    #[allow(clippy::too_many_arguments)]
    pub fn pool_nd(
        &mut self,
        name: &str,
        x: NodeId,
        kind: PoolKind,
        kernel: Vec<usize>,
        stride: Vec<usize>,
        padding: Vec<usize>,
        ceil_mode: bool,
    ) -> Result<NodeId, ShapeError> {
        let op_name = if kind == PoolKind::Max { "max_pool" } else { "avg_pool" };
        let s = self.shape(x).0.clone();
        let nd = kernel.len();
        if s.len() < nd + 1 || stride.len() != nd || padding.len() != nd || kernel.contains(&0) || stride.contains(&0) {
            return Err(self.err(
                name,
                op_name,
                format!("window {kernel:?} / stride {stride:?} do not fit input {}", Shape(s)),
            ));
        }
        let mut out = s[..s.len() - nd].to_vec();
        for i in 0..nd {
            let len = s[s.len() - nd + i];
            let span = (len + 2 * padding[i]).checked_sub(kernel[i]);
            let Some(span) = span else {
                return Err(self.err(
                    name,
                    op_name,
                    format!("window {} is larger than the padded input {}", kernel[i], len + 2 * padding[i]),
                ));
            };
            let mut o = if ceil_mode { span.div_ceil(stride[i]) + 1 } else { span / stride[i] + 1 };
            if ceil_mode && (o - 1) * stride[i] >= len + padding[i] {
                o -= 1;
            }
            out.push(o);
        }
        self.add(name, Op::Pool { kind, kernel, stride, padding, ceil_mode }, vec![x], out)
    }

    /// Adaptive pooling to `output` over the trailing dimensions.
    pub fn adaptive_pool(
        &mut self,
        name: &str,
        x: NodeId,
        kind: PoolKind,
        output: Vec<usize>,
    ) -> Result<NodeId, ShapeError> {
        let s = self.shape(x).0.clone();
        if s.len() < output.len() + 1 {
            return Err(self.err(name, "adaptive_pool", format!("output {output:?} does not fit input {}", Shape(s))));
        }
        let mut out = s[..s.len() - output.len()].to_vec();
        out.extend(&output);
        self.add(name, Op::AdaptivePool { kind, output }, vec![x], out)
    }

    /// Element-wise activation.
    pub fn act(&mut self, name: &str, x: NodeId, function: Activation) -> Result<NodeId, ShapeError> {
        let s = self.shape(x).0.clone();
        self.add(name, Op::Act { function }, vec![x], s)
    }

    /// Softmax over the last axis.
    pub fn softmax(&mut self, name: &str, x: NodeId) -> Result<NodeId, ShapeError> {
        let s = self.shape(x).0.clone();
        self.add(name, Op::Softmax, vec![x], s)
    }

    /// Dropout with probability `p`.
    pub fn dropout(&mut self, name: &str, x: NodeId, p: f64) -> Result<NodeId, ShapeError> {
        if !(0.0..1.0).contains(&p) {
            return Err(self.err(name, "dropout", format!("p = {p} must be in [0, 1)")));
        }
        let s = self.shape(x).0.clone();
        // The graph stores the probability as f32, as the kernels take it.
        self.add(name, Op::Dropout { p: p as f32 }, vec![x], s)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "mod_tests.rs"]
mod tests;
