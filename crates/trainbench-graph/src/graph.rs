//! The backend-neutral workload graph: operations, per-sample shapes and the node list every backend lowers.
//!
//! Shapes are *per sample*: the batch dimension is implicit and leading. A sequence is `[time, features]`,
//! an image `[channels, height, width]`, a set of region features `[proposals, channels, height, width]`.
//! Nodes are stored in topological order; a node's inputs always precede it.
//! Two nodes may share one weight tensor (tied embeddings): see [`Node::tied_to`]; backends allocate exactly the
//! tensors of [`crate::params::graph_tensors`].

use serde::{Deserialize, Serialize};

pub use crate::frozen_dtype::FrozenDtype;

/// Index of a node in [`Graph::nodes`].
pub type NodeId = usize;

/// A per-sample tensor shape (the batch dimension is implicit and leading).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shape(pub Vec<usize>);

impl Shape {
    /// Number of elements per sample.
    pub fn numel(&self) -> u64 {
        self.0.iter().map(|&d| d as u64).product()
    }
    /// Number of dimensions (without the batch dimension).
    pub fn rank(&self) -> usize {
        self.0.len()
    }
    /// The last dimension, or 1 for a scalar.
    pub fn last(&self) -> usize {
        self.0.last().copied().unwrap_or(1)
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{d}")?;
        }
        write!(f, "]")
    }
}

/// What a graph input carries, so backends and synthetic datasets can generate it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum InputKind {
    /// Real-valued features (images, spectrograms, dense features, latent noise).
    Dense,
    /// Integer token ids in `0..vocab`.
    Tokens {
        /// Vocabulary size.
        vocab: usize,
    },
    /// Integer class labels in `0..classes` (one per position of the shape).
    Labels {
        /// Number of classes.
        classes: usize,
    },
}

/// Element-wise activation functions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// max(x, 0)
    Relu,
    /// Leaky ReLU with the given negative slope.
    LeakyRelu(f32),
    /// Gaussian error linear unit (erf form).
    Gelu,
    /// Hyperbolic tangent.
    Tanh,
    /// Logistic sigmoid.
    Sigmoid,
    /// Clipped ReLU min(max(x, 0), 20) as in Deep Speech 2.
    HardTanh20,
    /// x * sigmoid(x) (SiLU, the gate of SwiGLU).
    Silu,
}

/// How an embedding bag pools the rows it looks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BagMode {
    /// Sum of the rows (DLRM's pooling).
    Sum,
    /// Mean of the rows.
    Mean,
}

/// Pooling reductions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolKind {
    /// Maximum over the window.
    Max,
    /// Average over the window (padding counted, as PyTorch's default).
    Avg,
}

/// Recurrent cell types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RnnCell {
    /// Long short-term memory (4 gates).
    Lstm,
    /// Gated recurrent unit (3 gates).
    Gru,
}

/// How a mixture-of-experts router turns its logits into the weights of the chosen experts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MoeRouter {
    /// Softmax over every expert, the top k kept and renormalised to sum to 1 (Mixtral, Qwen3-MoE).
    #[default]
    Softmax,
    /// A sigmoid score per expert, the top k kept and normalised to sum to 1 (DeepSeek-V3).
    Sigmoid,
}

/// Training losses; a loss node outputs a scalar per sample (shape `[]`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LossKind {
    /// Softmax cross-entropy over the last dimension of the logits, against integer labels
    /// (input 0: logits `[.., classes]`, input 1: labels `[..]`).
    CrossEntropy,
    /// Connectionist temporal classification (input 0: logits `[time, classes]`, input 1: labels `[label_len]`,
    /// class 0 is the blank).
    Ctc,
    /// Mean squared error between input 0 and input 1 (same shape).
    Mse,
    /// Smooth-L1 (Huber-like) loss between input 0 and input 1 (same shape), quadratic below `beta`
    /// (PyTorch `smooth_l1_loss`); used for bounding-box regression.
    SmoothL1 {
        /// Threshold between the quadratic and the linear part.
        beta: f32,
    },
    /// Binary cross-entropy with logits (input 0: logits, input 1: dense targets of the same shape).
    BceWithLogits,
    /// WGAN-GP critic loss: mean(critic(fake)) - mean(critic(real)) + gp_weight * (|grad_x critic(x_hat)| - 1)^2.
    /// Input 0: critic scores `[3, 1]` of the stacked (real, fake, interpolated) images; input 1: the
    /// [`Op::CriticBatch`] node whose third slot (x_hat) the penalty differentiates against (second-order
    /// gradients). The generator's loss is -mean(critic(fake)) (see [`Op::CriticBatch`]).
    Wasserstein {
        /// Gradient-penalty weight (lambda, 10 in the paper).
        gp_weight: f32,
    },
    /// A3C loss: policy-gradient with entropy bonus plus value regression
    /// (input 0: policy logits `[actions]`, input 1: value `[1]`, input 2: actions taken (labels `[]`),
    /// input 3: returns `[1]`).
    ActorCritic {
        /// Entropy bonus coefficient.
        entropy: f32,
        /// Value-loss coefficient.
        value: f32,
    },
}

/// The default of [`Op::Attention::tensor_shards`]: the node whole.
fn one_shard() -> usize {
    1
}

/// Whether an attention node is whole (its `tensor_shards` left out of the serialized graph).
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_one_shard(n: &usize) -> bool {
    *n == 1
}

/// One operation of the graph. Parameter counts and FLOPs are derived from these fields in `analysis`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// A graph input (data fed by the dataset).
    Input {
        /// What the input holds.
        kind: InputKind,
    },
    /// N-d convolution (N = kernel.len(), 1 or 2) over `[.., C, L]` or `[.., C, H, W]`; leading extra
    /// dimensions are folded into the batch.
    Conv {
        /// Input channels.
        in_channels: usize,
        /// Output channels.
        out_channels: usize,
        /// Kernel size per spatial dimension.
        kernel: Vec<usize>,
        /// Stride per spatial dimension.
        stride: Vec<usize>,
        /// Zero padding per spatial dimension.
        padding: Vec<usize>,
        /// Dilation per spatial dimension.
        dilation: Vec<usize>,
        /// Groups (depthwise when equal to the channels).
        groups: usize,
        /// Whether the layer has a bias.
        bias: bool,
        /// Transposed convolution (fractionally strided); weight is `[in, out/groups, k..]`.
        transposed: bool,
        /// Extra size added to one side of a transposed convolution's output.
        output_padding: Vec<usize>,
    },
    /// Batch normalisation over the channel dimension (dimension `-3` for images, `-2` for `[C, L]`).
    BatchNorm {
        /// Channels normalised.
        features: usize,
        /// Numerical epsilon.
        eps: f32,
    },
    /// Layer normalisation over the last dimension, with affine parameters.
    LayerNorm {
        /// Size of the last dimension.
        features: usize,
        /// Numerical epsilon.
        eps: f32,
    },
    /// Root-mean-square normalisation over the last dimension (Llama's `RMSNorm`):
    /// `y = x / sqrt(mean(x^2) + eps) * weight`; parameter `weight` `[features]`, no bias.
    RmsNorm {
        /// Size of the last dimension.
        features: usize,
        /// Numerical epsilon.
        eps: f32,
    },
    /// Affine map over the last dimension.
    Linear {
        /// Input width.
        in_features: usize,
        /// Output width.
        out_features: usize,
        /// Whether the layer has a bias.
        bias: bool,
    },
    /// Embedding lookup: integer ids `[..]` -> `[.., dim]`.
    Embedding {
        /// Vocabulary size.
        vocab: usize,
        /// Embedding width.
        dim: usize,
    },
    /// Multi-layer recurrent network over `[time, features]`, returning all time steps.
    Rnn {
        /// LSTM or GRU.
        cell: RnnCell,
        /// Input width.
        input_size: usize,
        /// Hidden width per direction.
        hidden: usize,
        /// Stacked layers.
        layers: usize,
        /// Bidirectional (output width is 2 x hidden).
        bidirectional: bool,
    },
    /// Multi-head attention with input projections (PyTorch `nn.MultiheadAttention` layout).
    /// Inputs: query `[Tq, E]`, key `[Tk, kdim]`, value `[Tk, vdim]`; output `[Tq, E]`.
    Attention {
        /// Model width E.
        embed_dim: usize,
        /// Number of heads (E must divide).
        heads: usize,
        /// Key width (E for self-attention).
        kdim: usize,
        /// Value width (E for self-attention).
        vdim: usize,
        /// Causal mask (decoder self-attention).
        causal: bool,
        /// Ranks of a tensor group this node is split over (1 whole): the node then holds `heads` of the
        /// `heads * tensor_shards` heads, `3 E / tensor_shards` rows of `in_proj` and `E / tensor_shards`
        /// columns of `out_proj`, head width `E / (heads * tensor_shards)`. Not serialized when 1.
        #[serde(default = "one_shard", skip_serializing_if = "is_one_shard")]
        tensor_shards: usize,
    },
    /// Rotary position embedding (RoPE) over `[T, heads * head_dim]`, in the half-split layout of Llama's
    /// reference code: per head, with `x = [x1, x2]` (halves of `head_dim`) and the angles
    /// `a[t, i] = t * theta^(-2i / head_dim)` for `i < head_dim / 2`, `y = [x1 cos a - x2 sin a,
    /// x2 cos a + x1 sin a]`. Positions are `0..T`. No parameters.
    Rotary {
        /// Heads in the last dimension.
        heads: usize,
        /// Width of each head (even).
        head_dim: usize,
        /// Base of the angle frequencies (10000 in RoFormer, 500000 in Llama 3).
        theta: f32,
    },
    /// Scaled dot-product attention over already projected heads (PyTorch's
    /// `scaled_dot_product_attention`, scale `1/sqrt(head_dim)`): inputs q `[T, heads * head_dim]`,
    /// k and v `[T, kv_heads * head_dim]`; output `[T, heads * head_dim]`. Grouped-query attention when
    /// `kv_heads < heads`: query head `h` reads key/value head `h / (heads / kv_heads)`. No parameters.
    Sdpa {
        /// Query heads.
        heads: usize,
        /// Key/value heads (divides `heads`).
        kv_heads: usize,
        /// Width of each head.
        head_dim: usize,
        /// Causal mask (a position attends to itself and earlier ones only).
        causal: bool,
    },
    /// A learned class token prepended to a sequence (ViT): `[T, E]` -> `[T + 1, E]`; parameter
    /// `class_token` `[1, 1, E]` (torchvision's layout), zero-initialised.
    ClassToken {
        /// Width E.
        dim: usize,
    },
    /// Embedding bag: integer ids `[bag]` -> `[dim]`, the rows looked up and pooled (PyTorch
    /// `nn.EmbeddingBag` with fixed-size bags); parameter `weight` `[vocab, dim]`.
    EmbeddingBag {
        /// Rows of the table.
        vocab: usize,
        /// Embedding width.
        dim: usize,
        /// Sum or mean.
        mode: BagMode,
    },
    /// Spatial pooling over the trailing 1 or 2 dimensions.
    Pool {
        /// Max or average.
        kind: PoolKind,
        /// Window size per spatial dimension.
        kernel: Vec<usize>,
        /// Stride per spatial dimension.
        stride: Vec<usize>,
        /// Padding per spatial dimension.
        padding: Vec<usize>,
        /// Round the output size up (PyTorch `ceil_mode`).
        ceil_mode: bool,
    },
    /// Adaptive pooling to a fixed output size over the trailing 1 or 2 dimensions.
    AdaptivePool {
        /// Max or average.
        kind: PoolKind,
        /// Output size per spatial dimension.
        output: Vec<usize>,
    },
    /// Element-wise activation.
    Act {
        /// The function.
        function: Activation,
    },
    /// Softmax over the last dimension.
    Softmax,
    /// Dropout (identity at evaluation; active in training).
    Dropout {
        /// Drop probability.
        p: f32,
    },
    /// Element-wise sum of all inputs (same shapes).
    Add,
    /// Element-wise product of all inputs (same shapes).
    Mul,
    /// Concatenation along a per-sample axis.
    Concat {
        /// Axis in the per-sample shape.
        axis: usize,
    },
    /// Reshape to a per-sample shape with the same element count.
    Reshape {
        /// Target per-sample shape.
        shape: Vec<usize>,
    },
    /// Swap two per-sample axes (a view followed by a contiguous copy where needed).
    Transpose {
        /// First axis.
        a: usize,
        /// Second axis.
        b: usize,
    },
    /// Select a contiguous range along a per-sample axis (e.g. the `[CLS]` token).
    Slice {
        /// Axis in the per-sample shape.
        axis: usize,
        /// First index kept.
        start: usize,
        /// Number of indices kept.
        len: usize,
    },
    /// Mean over a per-sample axis (the axis is removed).
    Mean {
        /// Axis in the per-sample shape.
        axis: usize,
    },
    /// Batched matrix product over the last two axes: input 0 `[.., M, K]` times input 1 `[.., K, N]`
    /// (or `[.., N, K]` when `transpose_b`) -> `[.., M, N]`; leading axes must agree. No parameters.
    MatMul {
        /// Use input 1 transposed in its last two axes.
        transpose_b: bool,
    },
    /// Fixed sinusoidal position encoding (Vaswani et al.): `y = scale * x + PE[:T]` over `[T, E]`, with
    /// `PE[t, 2i] = sin(t / 10000^(2i/E))`, `PE[t, 2i+1] = cos(..)`. No parameters. The scale is the
    /// `sqrt(d_model)` embedding multiplier (1.0 for none).
    SinusoidalPositions {
        /// Multiplier applied to `x` before adding the encoding.
        scale: f32,
    },
    /// Learned absolute position embedding (BERT): `y = x + P[:T]` over `[T, E]`; parameter `weight`
    /// `[max_positions, E]` (PyTorch `nn.Embedding` layout, looked up at positions `0..T`).
    LearnedPositions {
        /// Rows of the table (at least T).
        max_positions: usize,
        /// Width E.
        dim: usize,
    },
    /// WGAN-GP critic input: inputs real `[..]` and fake `[..]` images -> `[3, ..]` stacked as
    /// (real, fake, x_hat) with `x_hat = eps * real + (1 - eps) * fake`, `eps ~ U(0, 1)` drawn per sample.
    /// The critic's layers then run on the three slots at once (the leading 3 folds into the batch).
    /// Training (one iteration): the critic update uses `fake` detached, and the loss needs the gradient of
    /// the critic's score w.r.t. x_hat (create_graph); the generator update re-evaluates
    /// `-mean(critic(fake))` with the critic frozen. No parameters.
    CriticBatch,
    /// Region-of-interest align (torchvision `roi_align`, `aligned = false`): features `[C, H, W]` and a fixed
    /// number of proposals -> `[P, C, oh, ow]`. Proposals are not an input: every backend uses the same
    /// deterministic boxes, so the cost is static. With the image size `H / spatial_scale` x
    /// `W / spatial_scale` and `g = ceil(sqrt(P))`, proposal `i` (row `r = i / g`, column `c = i % g`) is the
    /// box `(x1, y1, x2, y2) = (c * IW / g, r * IH / g, (c + 1) * IW / g, (r + 1) * IH / g)` in image pixels.
    /// The gradient flows to the features only.
    RoiAlign {
        /// Proposals per image.
        proposals: usize,
        /// Output size (height, width).
        output: Vec<usize>,
        /// Scale from image to feature-map coordinates (1/16 for a stride-16 feature map).
        spatial_scale: f32,
        /// Bilinear samples per output bin per dimension.
        sampling_ratio: usize,
    },
    /// A LoRA adapter (Hu et al. 2021) beside a frozen linear layer: `y = (alpha / rank) * B A dropout(x)`
    /// over the last dimension, `[.., in_features]` -> `[.., out_features]`; parameters `lora_A` `[rank,
    /// in_features]` (Kaiming-uniform, as a linear layer's weight) and `lora_B` `[out_features, rank]` (zeros,
    /// so the adapted layer starts equal to the base). An [`Op::Add`] sums it with the base layer's output.
    Lora {
        /// Input width (the base layer's).
        in_features: usize,
        /// Output width (the base layer's).
        out_features: usize,
        /// Rank r of the update.
        rank: usize,
        /// Scale numerator: the update is multiplied by `alpha / rank`.
        alpha: f32,
        /// Dropout probability on the adapter's input (training only).
        dropout: f32,
    },
    /// A mixture-of-experts feed-forward block over `[.., features]` (same shape out): a router `[experts,
    /// features]` scores every token, each token goes to its `top_k` experts (SwiGLU feed-forwards of width
    /// `expert_ffn`, no biases: `down(silu(gate x) * up x)`), and their outputs are summed weighted by the
    /// router (see [`MoeRouter`]); `shared_ffn > 0` adds a SwiGLU feed-forward of that width that every token
    /// goes through (DeepSeek's shared experts). Parameters: `router.weight` `[experts, features]`,
    /// `experts.gate_proj` and `experts.up_proj` `[experts, expert_ffn, features]`, `experts.down_proj`
    /// `[experts, features, expert_ffn]`, and where shared, `shared.{gate,up,down}_proj.weight` as linear
    /// layers. With a capacity factor `c`, an expert takes at most `ceil(c x tokens x top_k / experts)` of a
    /// micro-batch's assignments (first come, first served; the rest are dropped and counted); without one
    /// nothing is dropped. The load-balancing loss `aux_loss x experts x sum_e f_e P_e` (f: share of the
    /// assignments, P: mean router probability) joins the training loss where `aux_loss > 0`.
    Moe {
        /// Model width (the last dimension in and out).
        features: usize,
        /// Routed experts.
        experts: usize,
        /// Experts each token goes to.
        top_k: usize,
        /// Inner width of each routed expert.
        expert_ffn: usize,
        /// Inner width of the shared feed-forward every token goes through (0: none).
        shared_ffn: usize,
        /// How the router weighs the chosen experts.
        router: MoeRouter,
        /// Capacity factor (`None`: dropless).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        capacity_factor: Option<f32>,
        /// Coefficient of the load-balancing loss (0: none).
        aux_loss: f32,
    },
    /// A training loss (see [`LossKind`]); outputs `[]` per sample.
    Loss {
        /// Which loss.
        loss: LossKind,
        /// Weight of this loss in the sum minimised (Inception-v3's auxiliary loss: 0.4).
        #[serde(default = "one_f32")]
        weight: f32,
    },
}

/// A node of the graph: an operation applied to earlier nodes, with its inferred per-sample output shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Hierarchical, unique name (`layer1.0.conv1`); parameter names derive from it.
    pub name: String,
    /// The operation.
    pub op: Op,
    /// Input nodes, in the order the operation expects.
    pub inputs: Vec<NodeId>,
    /// Inferred per-sample output shape.
    pub shape: Shape,
    /// Sub-network this node belongs to when a model trains several with separate optimizers
    /// (WGAN-GP: `generator` / `critic`); `None` for the single network of most models.
    pub part: Option<String>,
    /// Weight tying: this node's `weight` parameter *is* the `weight` parameter of the given earlier node
    /// (same shape; e.g. a Linear `[vocab, dim]` output projection tied to an Embedding `[vocab, dim]`).
    /// Backends must not allocate it again but use the owner's tensor, so gradients from both uses add up
    /// in one tensor; the owner is never itself tied. Other parameters of the node (a bias) stay its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tied_to: Option<NodeId>,
    /// The node's parameters are held fixed (LoRA's base model): allocated and counted as parameters, but
    /// without gradient or optimizer state; its backward computes its inputs' gradients only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub frozen: bool,
}

fn one_f32() -> f32 {
    1.0
}

/// A training workload graph: nodes in topological order and the loss nodes whose sum is minimised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    /// Model name (for display).
    pub name: String,
    /// Nodes, topologically ordered.
    pub nodes: Vec<Node>,
    /// Loss nodes (their per-sample values are averaged over the batch and summed).
    pub losses: Vec<NodeId>,
    /// Items counted per sample for throughput (tokens for sequence models, 1 otherwise).
    pub items_per_sample: u64,
    /// Unit of those items (`samples`, `tokens`, `frames`).
    pub item_unit: String,
    /// Blocks that activation checkpointing may recompute (the layers of a transformer), in order. Each is a
    /// contiguous range of nodes that reads exactly one node from before it (its input) and whose nodes
    /// are read from after it only through its last node (its output); [`GraphBuilder::finish`] checks this.
    ///
    /// [`GraphBuilder::finish`]: crate::builder::GraphBuilder::finish
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<Block>,
    /// The shape of a decoder-only language model, which its model FLOPs follow (PaLM's convention);
    /// `None` for every other model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decoder: Option<DecoderDims>,
    /// The type the frozen nodes' weights and biases ([`Node::frozen`]) are kept in (fp32 unless LoRA's
    /// `base_dtype` says otherwise).
    #[serde(default, skip_serializing_if = "FrozenDtype::is_fp32")]
    pub frozen_dtype: FrozenDtype,
}

/// What PaLM's model-FLOPs convention reads from a decoder: `12 x layers x heads x head_dim x seq_len`
/// attention FLOPs per token on top of `6 x` the matmul parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecoderDims {
    /// Decoder layers.
    pub layers: usize,
    /// Query heads.
    pub heads: usize,
    /// Width of each head.
    pub head_dim: usize,
    /// Tokens per sequence.
    pub seq_len: usize,
}

/// A recomputable block of [`Graph::nodes`]: nodes `first..=last`, reading only `input` from before them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// Name scope of the block (`layers.3`).
    pub name: String,
    /// The one node before the block that the block reads.
    pub input: NodeId,
    /// First node of the block.
    pub first: NodeId,
    /// Last node of the block: its output, the only node read after the block.
    pub last: NodeId,
}

impl Graph {
    /// Graph inputs in order of appearance.
    pub fn inputs(&self) -> impl Iterator<Item = (NodeId, &Node)> {
        self.nodes.iter().enumerate().filter(|(_, n)| matches!(n.op, Op::Input { .. }))
    }
    /// Find a node by name.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }
}
