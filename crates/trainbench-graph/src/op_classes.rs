//! What an [`Op`] is called, what a graph input holds, and the classifications of an op that more than one stage
//! reads (the analysis, the performance model, the lowerings), each written once here as an exhaustive match.

use crate::graph::{InputKind, Op, PoolKind, RnnCell};

impl InputKind {
    /// Whether the input holds integer indices (token ids, class labels): fed as 64-bit integers, never
    /// differentiated, never kept for a backward pass.
    pub fn holds_indices(&self) -> bool {
        match self {
            InputKind::Tokens { .. } | InputKind::Labels { .. } => true,
            InputKind::Dense => false,
        }
    }
}

impl Op {
    /// Whether the node is an input of integer indices (see [`InputKind::holds_indices`]).
    pub fn is_index_input(&self) -> bool {
        self.input_kind().is_some_and(InputKind::holds_indices)
    }

    /// Whether the node's output is a view of its first input's storage (reshape, transpose, slice): it moves
    /// no data, and keeping it keeps the underlying tensor.
    pub fn is_view(&self) -> bool {
        match self {
            Op::Reshape { .. } | Op::Transpose { .. } | Op::Slice { .. } => true,
            Op::Input { .. }
            | Op::Conv { .. }
            | Op::BatchNorm { .. }
            | Op::LayerNorm { .. }
            | Op::RmsNorm { .. }
            | Op::Linear { .. }
            | Op::Embedding { .. }
            | Op::Rnn { .. }
            | Op::Attention { .. }
            | Op::Rotary { .. }
            | Op::Sdpa { .. }
            | Op::ClassToken { .. }
            | Op::EmbeddingBag { .. }
            | Op::Pool { .. }
            | Op::AdaptivePool { .. }
            | Op::Act { .. }
            | Op::Softmax
            | Op::Dropout { .. }
            | Op::Add
            | Op::Mul
            | Op::Concat { .. }
            | Op::Mean { .. }
            | Op::MatMul { .. }
            | Op::SinusoidalPositions { .. }
            | Op::LearnedPositions { .. }
            | Op::CriticBatch
            | Op::RoiAlign { .. }
            | Op::Lora { .. }
            | Op::Moe { .. }
            | Op::Loss { .. } => false,
        }
    }
}

impl Op {
    /// A short, stable name of the operation kind (used in tables and error messages).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Op::Input { .. } => "input",
            Op::Conv { transposed: true, .. } => "conv_transpose",
            Op::Conv { kernel, .. } if kernel.len() == 1 => "conv1d",
            Op::Conv { .. } => "conv2d",
            Op::BatchNorm { .. } => "batch_norm",
            Op::LayerNorm { .. } => "layer_norm",
            Op::RmsNorm { .. } => "rms_norm",
            Op::Rotary { .. } => "rotary",
            Op::Sdpa { .. } => "sdpa",
            Op::ClassToken { .. } => "class_token",
            Op::EmbeddingBag { .. } => "embedding_bag",
            Op::Linear { .. } => "linear",
            Op::Embedding { .. } => "embedding",
            Op::Rnn { cell: RnnCell::Lstm, .. } => "lstm",
            Op::Rnn { cell: RnnCell::Gru, .. } => "gru",
            Op::Attention { .. } => "attention",
            Op::Pool { kind: PoolKind::Max, .. } => "max_pool",
            Op::Pool { kind: PoolKind::Avg, .. } => "avg_pool",
            Op::AdaptivePool { .. } => "adaptive_pool",
            Op::Act { .. } => "activation",
            Op::Softmax => "softmax",
            Op::Dropout { .. } => "dropout",
            Op::Add => "add",
            Op::Mul => "mul",
            Op::Concat { .. } => "concat",
            Op::Reshape { .. } => "reshape",
            Op::Transpose { .. } => "transpose",
            Op::Slice { .. } => "slice",
            Op::Mean { .. } => "mean",
            Op::MatMul { .. } => "matmul",
            Op::SinusoidalPositions { .. } => "sinusoidal_positions",
            Op::LearnedPositions { .. } => "learned_positions",
            Op::CriticBatch => "critic_batch",
            Op::RoiAlign { .. } => "roi_align",
            Op::Lora { .. } => "lora",
            Op::Moe { .. } => "moe",
            Op::Loss { .. } => "loss",
        }
    }

    /// What a graph input holds; `None` for every operation that computes its output.
    pub fn input_kind(&self) -> Option<&InputKind> {
        match self {
            Op::Input { kind } => Some(kind),
            Op::Conv { .. }
            | Op::BatchNorm { .. }
            | Op::LayerNorm { .. }
            | Op::RmsNorm { .. }
            | Op::Linear { .. }
            | Op::Embedding { .. }
            | Op::Rnn { .. }
            | Op::Attention { .. }
            | Op::Rotary { .. }
            | Op::Sdpa { .. }
            | Op::ClassToken { .. }
            | Op::EmbeddingBag { .. }
            | Op::Pool { .. }
            | Op::AdaptivePool { .. }
            | Op::Act { .. }
            | Op::Softmax
            | Op::Dropout { .. }
            | Op::Add
            | Op::Mul
            | Op::Concat { .. }
            | Op::Reshape { .. }
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
            | Op::Loss { .. } => None,
        }
    }
}
