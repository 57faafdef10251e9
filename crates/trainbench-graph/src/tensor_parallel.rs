//! Megatron-style tensor parallelism of a graph: which nodes one rank of a tensor group computes on its share
//! of heads, FFN columns or vocabulary rows ([`Role`]), where activations enter and leave the parallel regions,
//! and the graph that rank holds ([`TensorShard::local`]: the same nodes with their local widths, so the
//! parameter layout every data-parallel strategy exchanges is the rank's own shards).
//!
//! The split follows the data: a linear layer reading a replicated activation is column-parallel (its output
//! rows split), one reading a split activation row-parallel (its input columns split, its output summed over
//! the group); attention, rotary embeddings, per-head norms and element-wise operations on split activations
//! run on the local heads or columns; the token embedding and the language-model head are split over the
//! vocabulary and the cross-entropy is computed over the split logits. A fused self-attention layer (a ViT
//! block's) is a region of its own ([`Role::Heads`]): its packed `in_proj` keeps this rank's rows of each of q,
//! k and v ([`Split::Chunked`]), its `out_proj` is row-parallel; a ViT's stem (patch convolution, class token,
//! positions) is replicated and its classifier split over the classes. A mixture-of-experts feed-forward runs
//! whole on every rank of the group, on its replica's tokens (expert parallelism shards it along the data
//! dimension; sequence parallelism refuses it: its capacity and balance loss are the batch's). With sequence
//! parallelism the
//! replicated activations between the regions are split along the sequence instead (norms, dropout, residual
//! adds on sequence shards, [`TensorShard::on_shards`]): gathered on entering a region, reduce-scattered on
//! leaving it. A stem that builds the sequence (a ViT's convolution and class token) runs whole on every rank
//! and its output is cut to the rank's shard as the blocks read it ([`TensorShard::narrows`]); an operation over
//! the whole sequence after the blocks (a ViT's class-token slice) reads it gathered whole
//! ([`TensorShard::gathers`]).

use crate::graph::{Graph, LossKind, NodeId, Op};
use crate::params::{ParamDecl, node_tensors};

/// What one node does on a rank of a tensor group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Computed whole on every rank from a replicated (or, with sequence parallelism, sequence-split) input:
    /// inputs, norms, residual adds, position embeddings, dropout between the regions.
    Replicated,
    /// Computed on this rank's heads or columns, without communication: rotary embeddings, attention,
    /// per-head norms, activations and products inside a region.
    Local,
    /// A linear layer reading a replicated activation: its weight's rows (outputs) and bias are split.
    Column,
    /// A linear layer reading a split activation: its weight's columns (inputs) are split; its output is summed
    /// over the group (reduce-scattered along the sequence with sequence parallelism), then its whole bias added.
    Row,
    /// The token embedding, its rows split over the vocabulary; ids outside this rank's rows look up zeros and
    /// the output is summed over the group (reduce-scattered along the sequence with sequence parallelism).
    VocabEmbedding,
    /// A fused self-attention layer (`Op::Attention`) reading a replicated activation: its input projection
    /// column-parallel on this rank's heads (`heads / t` of them), attention on them, its output projection
    /// row-parallel (summed over the group, then its whole bias added).
    Heads,
    /// Cross-entropy over vocabulary-split logits: the maximum and the sum of exponentials are reduced over the
    /// group, never the full logits.
    VocabLoss,
}

/// How one of a node's declared tensors is split over the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Every rank holds all of it; `partial` when each rank's gradient is only its share of the whole one (a
    /// per-head norm's weight, or with sequence parallelism a tensor used on sequence shards), so the
    /// gradients are summed over the group after the backward pass.
    Replicated {
        /// Each rank's gradient is a part of the whole gradient.
        partial: bool,
    },
    /// This rank holds `len` indices from `start` along `axis` of the full tensor.
    Sharded {
        /// The axis split.
        axis: usize,
        /// First index held.
        start: usize,
        /// Indices held.
        len: usize,
    },
    /// The tensor is `chunks` equal blocks along `axis` (a packed q, k, v projection), and this rank holds
    /// indices `start..start + len` of every block.
    Chunked {
        /// The axis split.
        axis: usize,
        /// Blocks along it.
        chunks: usize,
        /// First index held within each block.
        start: usize,
        /// Indices held per block.
        len: usize,
    },
}

/// The graph one rank of a tensor group holds, and what each node does there.
#[derive(Debug, Clone)]
pub struct TensorShard {
    /// Ranks in the tensor group.
    pub degree: usize,
    /// This rank's place in it.
    pub rank: usize,
    /// Activations between the regions are split along the sequence.
    pub sequence_parallel: bool,
    /// Each node's role (indexed like the graph's nodes).
    pub roles: Vec<Role>,
    /// Nodes whose output enters a parallel region (every consumer is column-parallel): copied into it (its
    /// gradient summed over the group), or, when it is on sequence shards, gathered along the sequence.
    pub enters: Vec<bool>,
    /// With sequence parallelism, nodes whose output each rank holds a sequence shard of (axis 0 of the
    /// per-sample shape, `seq / degree` positions); all `false` without it.
    pub on_shards: Vec<bool>,
    /// Whole outputs read on sequence shards (a ViT stem's): each rank keeps its shard as the output leaves the
    /// node (no communication; the gradient reaching the stem is the shard's, so the stem's is partial).
    pub narrows: Vec<bool>,
    /// Sequence-shard outputs read whole (before a ViT's class-token slice): gathered along the sequence as the
    /// output leaves the node; in the backward pass each rank keeps its shard of the (identical) gradient.
    pub gathers: Vec<bool>,
    /// The graph with every node's local widths (node indices, names and blocks unchanged).
    pub local: Graph,
}

/// Why a graph cannot be split over a tensor group.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tensor parallelism over {degree} ranks: {message}")]
pub struct TensorSplitError {
    /// The tensor-parallel degree asked for.
    pub degree: usize,
    /// What cannot be split, naming the node.
    pub message: String,
}

/// What a node's output is on a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The whole activation (sequence-split with sequence parallelism).
    Full,
    /// Split along this per-sample axis (the last for projections, the heads axis for per-head reshapes).
    Split(usize),
}

impl TensorShard {
    /// The split of `graph` for rank `rank` of a tensor group of `degree`, with or without sequence parallelism.
    pub fn new(graph: &Graph, degree: usize, rank: usize, sequence_parallel: bool) -> Result<Self, TensorSplitError> {
        let fail = |message: String| TensorSplitError { degree, message };
        if degree == 0 || rank >= degree {
            return Err(fail(format!("rank {rank} is outside the group")));
        }
        let n = graph.nodes.len();
        let mut roles = vec![Role::Replicated; n];
        let mut states = vec![State::Full; n];
        let mut local = graph.clone();
        let divide = |what: &str, name: &str, size: usize| -> Result<usize, TensorSplitError> {
            if size % degree != 0 {
                return Err(fail(format!("`{name}` has {size} {what}, which do not divide over {degree} ranks")));
            }
            Ok(size / degree)
        };
        for (i, node) in graph.nodes.iter().enumerate() {
            let ins: Vec<State> = node.inputs.iter().map(|&j| states[j]).collect();
            let all_full = ins.iter().all(|s| *s == State::Full);
            let first = ins.first().copied().unwrap_or(State::Full);
            let unsupported = |why: &str| fail(format!("`{}` ({}) {why}", node.name, node.op.kind_name()));
            let mut shape = node.shape.0.clone();
            let (role, state) = match &node.op {
                Op::Input { .. } => (Role::Replicated, State::Full),
                Op::Embedding { vocab, dim } => {
                    let v = divide("vocabulary rows", &node.name, *vocab)?;
                    local.nodes[i].op = Op::Embedding { vocab: v, dim: *dim };
                    (Role::VocabEmbedding, State::Full)
                }
                Op::Linear { in_features, out_features, bias } => match first {
                    State::Full => {
                        let out = divide("output features", &node.name, *out_features)?;
                        local.nodes[i].op = Op::Linear { in_features: *in_features, out_features: out, bias: *bias };
                        if let Some(last) = shape.last_mut() {
                            *last = out;
                        }
                        (Role::Column, State::Split(shape.len().saturating_sub(1)))
                    }
                    State::Split(axis) if axis + 1 == node.shape.rank() => {
                        let inf = divide("input features", &node.name, *in_features)?;
                        local.nodes[i].op = Op::Linear { in_features: inf, out_features: *out_features, bias: *bias };
                        (Role::Row, State::Full)
                    }
                    State::Split(_) => return Err(unsupported("reads an activation split along another axis")),
                },
                Op::Rotary { heads, head_dim, theta } => match first {
                    State::Split(axis) if axis + 1 == node.shape.rank() => {
                        let h = divide("heads", &node.name, *heads)?;
                        local.nodes[i].op = Op::Rotary { heads: h, head_dim: *head_dim, theta: *theta };
                        shape_last(&mut shape, degree);
                        (Role::Local, first)
                    }
                    _ => return Err(unsupported("reads a replicated activation; only split heads are rotated")),
                },
                Op::Sdpa { heads, kv_heads, head_dim, causal } => {
                    if ins.iter().any(|s| *s != State::Split(node.shape.rank() - 1)) {
                        return Err(unsupported("needs its queries, keys and values split by heads"));
                    }
                    let h = divide("query heads", &node.name, *heads)?;
                    let kv = divide("key/value heads", &node.name, *kv_heads)?;
                    local.nodes[i].op = Op::Sdpa { heads: h, kv_heads: kv, head_dim: *head_dim, causal: *causal };
                    shape_last(&mut shape, degree);
                    (Role::Local, first)
                }
                Op::Reshape { shape: to } => match first {
                    State::Full => (Role::Replicated, State::Full),
                    State::Split(axis) => {
                        let from = &graph.nodes[node.inputs[0]].shape.0;
                        if to.len() <= axis || from[..axis] != to[..axis] || to[axis] % degree != 0 {
                            return Err(unsupported("reshapes a split activation across its split axis"));
                        }
                        let mut t = to.clone();
                        t[axis] /= degree;
                        local.nodes[i].op = Op::Reshape { shape: t.clone() };
                        shape = t;
                        (Role::Local, State::Split(axis))
                    }
                },
                Op::RmsNorm { .. } | Op::LayerNorm { .. } => match first {
                    State::Full => (Role::Replicated, State::Full),
                    State::Split(axis) if axis + 1 < node.shape.rank() => {
                        shape[axis] /= degree;
                        (Role::Local, first)
                    }
                    State::Split(_) => return Err(unsupported("normalises over a split axis")),
                },
                Op::Act { .. } | Op::Dropout { .. } => match first {
                    State::Full => (Role::Replicated, State::Full),
                    State::Split(axis) => {
                        shape[axis] /= degree;
                        (Role::Local, first)
                    }
                },
                Op::Add | Op::Mul => {
                    if all_full {
                        (Role::Replicated, State::Full)
                    } else if ins.iter().all(|s| *s == first) {
                        if let State::Split(axis) = first {
                            shape[axis] /= degree;
                        }
                        (Role::Local, first)
                    } else {
                        return Err(unsupported("combines a split activation with a replicated one"));
                    }
                }
                // A mixture of experts runs whole on every rank of the group, on the replica's whole tokens (its
                // capacity and balance loss are the batch's); expert parallelism shards it along the data
                // dimension instead. On sequence shards it would route a shard's tokens alone.
                Op::Moe { .. } if all_full && !sequence_parallel => (Role::Replicated, State::Full),
                Op::Moe { .. } if sequence_parallel => {
                    return Err(unsupported(
                        "runs on whole sequences (its capacity and load-balancing loss are the batch's), so it is \
                         not split by sequence parallelism; set `sequence_parallel = false`",
                    ));
                }
                Op::LearnedPositions { .. }
                | Op::Conv { .. }
                | Op::ClassToken { .. }
                | Op::Transpose { .. }
                | Op::Slice { .. }
                    if all_full =>
                {
                    (Role::Replicated, State::Full)
                }
                Op::Attention { embed_dim, heads, kdim, vdim, causal, tensor_shards: 1 } => {
                    let same = node.inputs.iter().all(|&j| j == node.inputs[0]);
                    if !all_full || !same || kdim != embed_dim || vdim != embed_dim {
                        return Err(unsupported(
                            "is split as self-attention over one replicated input with a packed `in_proj`",
                        ));
                    }
                    let h = divide("heads", &node.name, *heads)?;
                    local.nodes[i].op = Op::Attention {
                        embed_dim: *embed_dim,
                        heads: h,
                        kdim: *kdim,
                        vdim: *vdim,
                        causal: *causal,
                        tensor_shards: degree,
                    };
                    (Role::Heads, State::Full)
                }
                Op::Loss { loss: LossKind::CrossEntropy, .. }
                    if first == State::Split(graph.nodes[node.inputs[0]].shape.rank() - 1)
                        && ins.get(1) == Some(&State::Full) =>
                {
                    (Role::VocabLoss, State::Full)
                }
                Op::Conv { .. }
                | Op::BatchNorm { .. }
                | Op::Rnn { .. }
                | Op::Attention { .. }
                | Op::ClassToken { .. }
                | Op::EmbeddingBag { .. }
                | Op::Pool { .. }
                | Op::AdaptivePool { .. }
                | Op::Softmax
                | Op::Concat { .. }
                | Op::Transpose { .. }
                | Op::Slice { .. }
                | Op::Mean { .. }
                | Op::MatMul { .. }
                | Op::SinusoidalPositions { .. }
                | Op::LearnedPositions { .. }
                | Op::CriticBatch
                | Op::RoiAlign { .. }
                | Op::Lora { .. }
                | Op::Moe { .. }
                | Op::Loss { .. } => {
                    return Err(unsupported(
                        "is not split by tensor parallelism (decoder and ViT blocks of linear layers, grouped-query \
                         or fused self-attention, norms, a ViT stem, a mixture of experts (whole on every rank) and a \
                         cross-entropy head are)",
                    ));
                }
            };
            roles[i] = role;
            states[i] = state;
            local.nodes[i].shape.0 = shape;
        }
        let mut enters = vec![false; n];
        for (i, node) in graph.nodes.iter().enumerate() {
            for &j in &node.inputs {
                if matches!(roles[i], Role::Column | Role::Heads) {
                    enters[j] = true;
                }
            }
        }
        for (i, node) in graph.nodes.iter().enumerate() {
            for &j in &node.inputs {
                if enters[j] && !matches!(roles[i], Role::Column | Role::Heads) {
                    return Err(fail(format!(
                        "`{}` is read both by column-parallel layers and by `{}`; only layers that split it may read it",
                        graph.nodes[j].name, node.name
                    )));
                }
            }
        }
        let none = vec![false; n];
        let mut shard = TensorShard {
            degree,
            rank,
            sequence_parallel,
            roles,
            enters,
            on_shards: none.clone(),
            narrows: none.clone(),
            gathers: none,
            local,
        };
        if sequence_parallel {
            shard.split_sequence(graph)?;
        }
        Ok(shard)
    }

    /// With sequence parallelism the activations between the regions hold `seq / degree` positions: the
    /// outputs of the layers that leave a region (reduce-scattered), the nodes inside the blocks and what
    /// follows them element-wise. A stem building the sequence stays whole and is narrowed where the blocks
    /// read it; an operation over the whole sequence reads its input gathered.
    fn split_sequence(&mut self, graph: &Graph) -> Result<(), TensorSplitError> {
        let fail = |message: String| TensorSplitError { degree: self.degree, message };
        let in_block = |i: usize| graph.blocks.iter().any(|b| (b.first..=b.last).contains(&i));
        for (i, node) in graph.nodes.iter().enumerate() {
            let shards_in = node.inputs.iter().any(|&j| self.on_shards[j]);
            self.on_shards[i] = match self.roles[i] {
                Role::Row | Role::VocabEmbedding | Role::Heads => true,
                Role::Column | Role::Local | Role::VocabLoss => false,
                Role::Replicated => match node.op {
                    Op::Input { .. } => false,
                    // Operations that build the sequence or read all of it: whole.
                    Op::Conv { .. }
                    | Op::ClassToken { .. }
                    | Op::Transpose { .. }
                    | Op::Slice { .. }
                    | Op::Mean { .. }
                    | Op::Pool { .. }
                    | Op::AdaptivePool { .. }
                    | Op::Concat { .. } => false,
                    // Per position: on the shards where what they read is, and everywhere inside the blocks.
                    Op::Embedding { .. }
                    | Op::Linear { .. }
                    | Op::Rotary { .. }
                    | Op::Sdpa { .. }
                    | Op::Reshape { .. }
                    | Op::RmsNorm { .. }
                    | Op::LayerNorm { .. }
                    | Op::Act { .. }
                    | Op::Dropout { .. }
                    | Op::Add
                    | Op::Mul
                    | Op::LearnedPositions { .. }
                    | Op::SinusoidalPositions { .. }
                    | Op::Attention { .. }
                    | Op::Loss { .. }
                    | Op::BatchNorm { .. }
                    | Op::Rnn { .. }
                    | Op::EmbeddingBag { .. }
                    | Op::Softmax
                    | Op::MatMul { .. }
                    | Op::CriticBatch
                    | Op::RoiAlign { .. }
                    | Op::Lora { .. }
                    | Op::Moe { .. } => shards_in || in_block(i),
                },
            };
        }
        let mut readers: Vec<Vec<usize>> = vec![Vec::new(); graph.nodes.len()];
        for (i, node) in graph.nodes.iter().enumerate() {
            for &j in &node.inputs {
                readers[j].push(i);
            }
        }
        for (j, node) in graph.nodes.iter().enumerate() {
            let whole_reader = |i: &usize| !self.on_shards[*i] && self.roles[*i] == Role::Replicated;
            let shard_reader = |i: &usize| self.on_shards[*i] && self.roles[*i] == Role::Replicated;
            let input = matches!(node.op, Op::Input { .. });
            if !self.on_shards[j] && !input && readers[j].iter().any(shard_reader) {
                self.narrows[j] = true;
            }
            if self.on_shards[j] && readers[j].iter().any(whole_reader) {
                self.gathers[j] = true;
            }
            let mixed = (self.narrows[j] && !readers[j].iter().all(shard_reader))
                || (self.gathers[j] && !readers[j].iter().all(whole_reader));
            if mixed {
                return Err(fail(format!(
                    "sequence parallelism: `{}` is read both whole and on sequence shards; train without sequence \
                     parallelism",
                    node.name
                )));
            }
        }
        for (i, node) in graph.nodes.iter().enumerate() {
            if !(self.on_shards[i] || self.narrows[i]) {
                continue;
            }
            let t = node.shape.0.first().copied().unwrap_or(0);
            if node.shape.rank() < 2 || t % self.degree != 0 {
                return Err(fail(format!(
                    "sequence parallelism splits `{}` ({} positions) along its sequence, which does not divide",
                    node.name, t
                )));
            }
            if self.on_shards[i] {
                self.local.nodes[i].shape.0[0] = t / self.degree;
            }
        }
        Ok(())
    }

    /// How `decl`, a tensor of node `id` of the full graph, is split on this rank.
    pub fn split_of(&self, graph: &Graph, id: NodeId, decl: &ParamDecl) -> Split {
        let whole = |axis: usize| {
            let size = decl.shape.get(axis).copied().unwrap_or(0);
            let len = size / self.degree.max(1);
            Split::Sharded { axis, start: self.rank * len, len }
        };
        let seq = self.sequence_parallel;
        match self.roles[id] {
            Role::Column => whole(0),
            Role::VocabEmbedding => whole(0),
            Role::Row if decl.local == "weight" => whole(1),
            // A row-parallel layer's bias is added after the sum: on sequence shards with sequence parallelism.
            Role::Row => Split::Replicated { partial: seq },
            // A tensor read on split heads or columns (a per-head norm's weight) sees this rank's share only.
            Role::Local => Split::Replicated { partial: true },
            Role::Replicated => {
                let on_shards = seq && !matches!(graph.nodes[id].op, Op::Input { .. });
                Split::Replicated { partial: on_shards }
            }
            Role::VocabLoss => Split::Replicated { partial: false },
            // q, k and v packed in one projection: this rank's rows of each.
            Role::Heads if decl.local.starts_with("in_proj") => {
                let len = decl.shape.first().copied().unwrap_or(0) / 3 / self.degree.max(1);
                Split::Chunked { axis: 0, chunks: 3, start: self.rank * len, len }
            }
            Role::Heads if decl.local == "out_proj.weight" => whole(1),
            // The output projection's bias is added after the sum: on sequence shards with sequence parallelism.
            Role::Heads => Split::Replicated { partial: seq },
        }
    }

    /// This rank's initial values of `decl` (a tensor of node `id` of the local graph): the slice of the full
    /// tensor's values ([`crate::init::initial_values`] of the full graph's declaration), so a run over a tensor
    /// group starts from exactly the weights one rank would.
    pub fn initial_values(&self, graph: &Graph, id: NodeId, decl: &ParamDecl, seed: u64) -> Vec<f32> {
        let Some(full) = node_tensors(graph, id).into_iter().find(|d| d.local == decl.local) else {
            return crate::init::initial_values(decl, seed);
        };
        let values = crate::init::initial_values(&full, seed);
        match self.split_of(graph, id, &full) {
            Split::Replicated { .. } => values,
            Split::Sharded { axis, start, len } => slice(&values, &full.shape, axis, start, len),
            Split::Chunked { axis, chunks, start, len } => {
                chunked_slice(&values, &full.shape, axis, chunks, start, len)
            }
        }
    }
}

/// The last dimension of a per-sample shape divided by the degree.
fn shape_last(shape: &mut [usize], degree: usize) {
    if let Some(last) = shape.last_mut() {
        *last /= degree;
    }
}

/// Indices `start..start + len` along `axis` of a row-major tensor of `shape`.
pub fn slice(values: &[f32], shape: &[usize], axis: usize, start: usize, len: usize) -> Vec<f32> {
    let outer: usize = shape[..axis].iter().product();
    let size = shape.get(axis).copied().unwrap_or(1);
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = Vec::with_capacity(outer * len * inner);
    for o in 0..outer {
        let base = o * size * inner;
        out.extend_from_slice(&values[base + start * inner..base + (start + len) * inner]);
    }
    out
}

/// Indices `start..start + len` of each of the `chunks` equal blocks along `axis` of a row-major tensor of
/// `shape`, the blocks' slices side by side along `axis`.
pub fn chunked_slice(
    values: &[f32],
    shape: &[usize],
    axis: usize,
    chunks: usize,
    start: usize,
    len: usize,
) -> Vec<f32> {
    let outer: usize = shape[..axis].iter().product();
    let size = shape.get(axis).copied().unwrap_or(1);
    let block = size / chunks.max(1);
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = Vec::with_capacity(outer * chunks * len * inner);
    for o in 0..outer {
        for c in 0..chunks {
            let base = (o * size + c * block + start) * inner;
            out.extend_from_slice(&values[base..base + len * inner]);
        }
    }
    out
}

#[cfg(test)]
#[path = "tensor_parallel_tests.rs"]
mod tests;
