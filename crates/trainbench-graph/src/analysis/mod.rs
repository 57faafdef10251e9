//! Exact static analysis of a workload graph: parameters, FLOPs, activations kept for backward and a memory
//! estimate per batch size, precision and optimizer. Pure and deterministic: the same graph always gives the
//! same numbers, so they are snapshot-tested.
//!
//! # What is counted
//! - **Parameters**: trained and frozen tensors of [`crate::params::graph_tensors`] (exactly what backends
//!   allocate; tied weights once; batch-norm running statistics are *buffers*, reported apart); the trained
//!   ones apart (`trainable_parameters`: LoRA's adapters only).
//! - **FLOPs** (per sample), the convention of PyTorch's `torch.utils.flop_counter`: 2 x multiply-accumulates
//!   of convolutions (transposed ones by their input size, as PyTorch counts them), linear layers, batched
//!   matrix products, the four projections and the two products (`QK^T`, `PV`) of attention — all positions,
//!   causal or not — and the gate matmuls of LSTM/GRU cells (input and recurrent, every step). Nothing for
//!   biases, activations, element-wise sums and products, normalisation, pooling, softmax, dropout,
//!   embedding lookups, positional encodings, RoI align and losses.
//! - **Training FLOPs** = forward + backward. The backward of a layer with weights costs one forward for the
//!   weight gradient plus one for the input gradient, except where the input needs no gradient (it is data,
//!   or computed from data by parameter-free ops only): the first layer after the input costs 1 x. Products
//!   without weights (matmul, attention's core) cost 1 x per operand that needs a gradient. This is what
//!   `FlopCounterMode` records for `loss.backward()`. A frozen layer (LoRA's base) computes no weight
//!   gradient: its backward is its input gradient only. Not counted: the optimizer step, and the WGAN-GP
//!   penalty's second-order pass (see [`Analysis::notes`]).
//! - **Activations kept for backward** (per sample): every tensor some layer saves for its backward, counted
//!   once even when several layers save it. Rules: conv, linear, batch norm, layer norm (+ mean and rstd per
//!   row), pooling, GELU, leaky ReLU and clipped ReLU save their input; ReLU, tanh, sigmoid and softmax their
//!   output; matmul and element-wise products both operands; max pooling adds 8-byte indices; dropout a
//!   1-byte mask; LSTM/GRU keep, per layer, direction and step, the gates and states ((gates + 2) x hidden)
//!   plus their input; attention keeps its inputs, the projected Q, K, V, the probabilities
//!   (heads x Tq x Tk) and the pre-projection output; cross-entropy keeps the log-softmax, CTC also its
//!   alpha table. Sums, concatenations, reshapes, slices and RoI align keep nothing; a saved view
//!   (reshape, transpose, slice) counts as its underlying tensor. Integer inputs
//!   (token ids, labels) are not counted; dense inputs saved by their first layer are.
//! - **Types**: a half-precision run keeps some of those tensors in fp32 ([`autocast`]: CUDA autocast's policy
//!   per operation); the memory estimate prices them at 4 bytes, the rest at 2.
//! - **Workspace**: the largest transient working set of one layer's backward: its output gradient, its
//!   inputs' gradients and, for convolutions with kernels above 1x1, an im2col buffer (C_in/groups x
//!   kernel x output positions).

mod analyze;
pub mod autocast;
mod model_flops;
mod rules;
mod summary;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "mod_tests.rs"]
mod tests;

pub use analyze::{analyze, memory_estimate, memory_estimate_checkpointed};
pub use summary::{
    ActivationTotals, Analysis, BlockAnalysis, COUNTER_CONVENTION, DECODER_CONVENTION, FlopTotals, KindTotals,
    LORA_DECODER_CONVENTION, LayerAnalysis, MOE_DECODER_CONVENTION, MemoryEstimate, ModelFlops,
};
