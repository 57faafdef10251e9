//! The classifications of an [`Op`] that more than one stage reads (the analysis, the performance model, the
//! lowerings), each written once here as an exhaustive match, beside [`Op::input_kind`] and [`Op::kind_name`].

use crate::graph::{InputKind, Op};

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
            | Op::Loss { .. } => false,
        }
    }
}
