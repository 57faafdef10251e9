//! Which tensors a half-precision (fp16/bf16) run keeps in fp32: CUDA autocast's policy per operation, as the
//! tch backend lowers each one (PyTorch 2.13's `autocast_mode.cpp`: products in half precision; layer and RMS
//! norms, softmax and the losses in fp32; everything else in the type its inputs promote to), and the output
//! type that follows through the graph. A transformer's residual stream stays fp32 (its embedding tables are
//! fp32 and the sums promote), and so do the norms' saved inputs and the loss's log-probabilities, while every
//! product saves half-precision copies of its inputs; the memory estimate prices each kept tensor at its own
//! type. (The CPU's autocast runs the norms and softmax in bf16: there the estimate is high by those outputs.)

use crate::graph::{Graph, Op};

/// What autocast does with an operation's inputs and output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Casts its inputs to half precision: its output, and the copies of its inputs it saves, are half.
    Lower,
    /// Casts its inputs to fp32: its output, and the copies it saves, are fp32.
    Fp32,
    /// Combines its input with an fp32 table or parameter without a cast (an embedding lookup, a positional
    /// table, a class token, a gated sum of experts): its output is fp32; it saves its inputs as they come.
    Widens,
    /// Runs in the type its inputs promote to (fp32 when any is): it saves its inputs as they come.
    Promotes,
}

/// The policy of `op` under CUDA autocast, as the tch backend runs it.
pub fn policy(op: &Op) -> Policy {
    match op {
        Op::Conv { .. }
        | Op::Linear { .. }
        | Op::MatMul { .. }
        | Op::Attention { .. }
        | Op::Sdpa { .. }
        | Op::Rnn { .. }
        | Op::Lora { .. } => Policy::Lower,
        Op::LayerNorm { .. } | Op::RmsNorm { .. } | Op::Softmax | Op::Loss { .. } => Policy::Fp32,
        Op::Input { .. }
        | Op::Embedding { .. }
        | Op::EmbeddingBag { .. }
        | Op::SinusoidalPositions { .. }
        | Op::LearnedPositions { .. }
        | Op::ClassToken { .. }
        | Op::Rotary { .. }
        | Op::Moe { .. } => Policy::Widens,
        Op::BatchNorm { .. }
        | Op::Pool { .. }
        | Op::AdaptivePool { .. }
        | Op::Act { .. }
        | Op::Dropout { .. }
        | Op::Add
        | Op::Mul
        | Op::Concat { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Slice { .. }
        | Op::Mean { .. }
        | Op::CriticBatch
        | Op::RoiAlign { .. } => Policy::Promotes,
    }
}

/// Whether each node's output is fp32 in a half-precision run (graph order: inputs before their users).
pub fn wide_outputs(graph: &Graph) -> Vec<bool> {
    let mut wide = vec![false; graph.nodes.len()];
    for (i, node) in graph.nodes.iter().enumerate() {
        wide[i] = match policy(&node.op) {
            Policy::Lower => false,
            Policy::Fp32 | Policy::Widens => true,
            Policy::Promotes => node.inputs.iter().any(|&j| wide[j]),
        };
    }
    wide
}

/// Whether the copy of an input of type `input_wide` that a node of `consumer` policy saves is fp32.
pub fn saved_wide(consumer: Policy, input_wide: bool) -> bool {
    match consumer {
        Policy::Lower => false,
        Policy::Fp32 => true,
        Policy::Widens | Policy::Promotes => input_wide,
    }
}

/// Whether the tensors a node of `policy` keeps of its own (gates, probabilities, log-softmax) are fp32, its
/// output being `output_wide`.
pub fn internal_wide(policy: Policy, output_wide: bool) -> bool {
    match policy {
        Policy::Lower => false,
        Policy::Fp32 => true,
        Policy::Widens | Policy::Promotes => output_wide,
    }
}
