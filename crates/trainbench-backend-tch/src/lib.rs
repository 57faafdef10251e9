//! trainbench's libtorch backend: lowers the workload graph to libtorch functional ops through tch and trains
//! it on the CPU or a CUDA device, timing each phase of every iteration.
//!
//! Construct it with [`TchBackend::new`] and drive it through the [`trainbench_contract::Backend`] trait: `check`
//! refuses what it cannot run (with the layer and the reason), `run` trains and measures.
//!
//! # What one run does
//! - Weights: every tensor `trainbench_graph::params::tensors` declares, with the values of
//!   `trainbench_graph::init::initial_values` (identical on every backend), fp32 master copies.
//! - Data: with synthetic data, a pool of up to 4 synthetic batches (`init::synthetic_input`, data steps 0..k)
//!   generated before the run in host memory (pinned on CUDA) and cycled; the data phase is the host-to-device
//!   copy of one batch (a no-copy handle on the CPU). With a dataset (`RunContext::data`), each step waits for
//!   the next host batch (the stall), checks it against the graph's inputs and copies it into tensors (pinned,
//!   non-blocking on CUDA; the conversion on the CPU): `data_s` = stall + copy. A dataset error fails the run
//!   with `BackendError::Data`.
//! - Target (time-to-accuracy): evaluation of the evaluation split under `no_grad` (losses and, for a
//!   cross-entropy loss, argmax accuracy of its logits), as often as the target says; the run ends at the target
//!   or its budget. Batch norm uses batch statistics in evaluation as in training.
//! - Forward: graph nodes in topological order, outputs freed after their last consumer; ReLU after
//!   convolution / batch norm / linear / add, and residual adds, run in place when their input has no other
//!   consumer (as torchvision does). Losses are averaged over the batch and summed.
//! - Backward, then the optimizer (`optim`): on CUDA the fused SGD / Adam / AdamW kernels through the shim
//!   (`fused`), with fp16's loss scale and found-infinity flag on the device; on the CPU libtorch's C++
//!   `torch::optim`. Gradients are set to none after each step.
//! - Precision: bf16 = autocast to bfloat16 (CPU or CUDA); fp16 = CUDA autocast to half with dynamic loss
//!   scaling (GradScaler semantics, initial scale `plan.numerics.loss_scale`), refused on the CPU. On CUDA the
//!   TF32 switches and cuDNN autotuning are set from `plan.numerics` and what libtorch reads back is recorded.
//! - Timing (`clock`): on the CPU host clocks between phases (ops are synchronous); on CUDA with
//!   `plan.phase_timing`, CUDA events at each phase boundary (`events`) and one synchronisation at the step's
//!   end, so phases are device time and the CPU still queues ahead; without it, only each step's total. After
//!   the measured steps, a CUDA run adds a free-running window (up to 50 steps, one synchronisation).
//! - Memory: weights, gradients and optimizer state from tensor sizes (the fused optimizers' state as
//!   allocated); on CUDA, the caching allocator's allocated bytes before and after each forward pass
//!   (activations), and peak allocated and peak reserved bytes over the measured iterations (reset after
//!   warm-up) through the C++ shim. libtorch's CPU allocator keeps no statistics, so CPU runs report `None`.
//! - Out of memory: any allocation failure (the caching allocator's, cuBLAS's and cuDNN's
//!   `*_STATUS_ALLOC_FAILED`, the host's) becomes [`trainbench_contract::BackendError::OutOfMemory`]; the run's
//!   tensors are dropped and the CUDA cache emptied, so the next run starts clean.
//! - Devices: each CUDA device reports its PCI bus id (the CUDA driver's), which tells NVML which GPU to sample;
//!   without a device, the refusal names the driver's CUDA version and libtorch's.
//!
//! # Lowering notes
//! - RoI align: proposals are the fixed grid of [`ops::roi_boxes`]; bins average `sampling_ratio^2` bilinear
//!   samples taken with `grid_sampler_2d` (torchvision's `roi_align` is not part of libtorch).
//! - Attention: `nn.MultiheadAttention` layout (packed or separate projections) with
//!   `scaled_dot_product_attention`, no attention dropout.
//! - Recurrent layers: `at::lstm` / `at::gru`, batch first, zero initial state; on CUDA with cuDNN the weights
//!   are flattened into one cuDNN buffer once per run (`_cudnn_rnn_flatten_weight`, as `flatten_parameters()`).
//! - Tied weights (`Node::tied_to`) are one tensor, counted and optimised once; sinusoidal position tables
//!   and RoI sampling grids are computed once per run.
//! - WGAN-GP (the zoo's `critic_batch` convention, see `train`): one critic step with gradient penalty, then
//!   one generator step with the critic frozen, each with its own optimizer built from the plan's optimizer
//!   spec; n_critic = 1; the reported loss is the critic's.

pub mod autograd;
mod backend;
pub mod calibrate;
pub mod check;
mod checkpoint;
mod clock;
pub mod device;
pub mod diff_op;
mod dist;
mod error;
pub mod events;
pub mod expert_parallel;
mod expert_state;
pub mod feed;
pub mod fused;
pub mod loss;
pub mod lower;
pub mod moe;
pub mod moe_stats;
pub mod nccl;
mod norms;
pub mod ops;
mod optim;
mod overlap;
mod pipeline;
mod pipeline_run;
pub mod shim;
mod step;
pub mod tensor_parallel;
pub mod transformer_ops;
mod zero;

pub use backend::TchBackend;
