//! What the wgpu backend's lowering refuses beyond its declared capabilities (shapes and graph structures
//! burn cannot train). Pure functions of the plan and the graph: a process without burn answers them.

use crate::backend_kind::BackendKind;
use crate::error::BackendError;
use crate::plan::RunPlan;
use trainbench_graph::graph::{Graph, LossKind, Op, PoolKind};

/// Largest per-sample rank the lowering carries (the batch adds one; tensors are held at rank 6).
pub const MAX_SAMPLE_RANK: usize = 5;

fn unsupported(layer: &str, op: &str, reason: impl Into<String>) -> BackendError {
    BackendError::Unsupported {
        backend: BackendKind::Wgpu.name(),
        layer: layer.to_string(),
        op: op.to_string(),
        reason: reason.into(),
    }
}

/// The step schedule: burn's autodiff has no recomputation hook, and its step has no gradient accumulation.
fn check_schedule(plan: &RunPlan, graph: &Graph) -> Result<(), BackendError> {
    let schedule = plan.schedule;
    if !schedule.checkpointing.is_none() {
        return Err(unsupported(
            &graph.name,
            "activation_checkpointing",
            format!(
                "activation checkpointing (`training.activation_checkpointing = \"{}\"`) is not implemented on \
                 wgpu: burn's autodiff keeps every activation; use \"none\", or the tch backend",
                schedule.checkpointing.mode_name()
            ),
        ));
    }
    if schedule.micro_batches() > 1 {
        return Err(unsupported(
            &graph.name,
            "grad_accumulation",
            format!(
                "gradient accumulation (`training.grad_accumulation = {}`) is not implemented on wgpu; use 1 \
                 with a larger batch size, or the tch backend",
                schedule.grad_accumulation
            ),
        ));
    }
    Ok(())
}

/// What the lowering refuses beyond the declared capabilities ([`crate::capability::WGPU`]:
/// fp32 only, no RoIAlign, no critic batch): shapes and graph structures it cannot lower, naming the layer.
pub fn supports_lowering(plan: &RunPlan, graph: &Graph) -> Result<(), BackendError> {
    if plan.batch_size == 0 {
        return Err(unsupported(&graph.name, "batch", "batch size must be at least 1"));
    }
    if graph.losses.is_empty() {
        return Err(unsupported(&graph.name, "loss", "the graph has no loss layer"));
    }

    check_schedule(plan, graph)?;
    if let Some(n) = graph.nodes.iter().find(|n| n.part.is_some()) {
        return Err(unsupported(
            &n.name,
            n.op.kind_name(),
            "models trained as several sub-networks with separate optimizers (GANs) are not supported",
        ));
    }
    for node in &graph.nodes {
        let layer = node.name.as_str();
        let kind = node.op.kind_name();
        if node.shape.rank() > MAX_SAMPLE_RANK {
            return Err(unsupported(layer, kind, format!("per-sample rank {} exceeds 5", node.shape.rank())));
        }
        match &node.op {
            Op::Conv { kernel, dilation, transposed, .. } => {
                if !(1..=2).contains(&kernel.len()) {
                    return Err(unsupported(layer, kind, "only 1-D and 2-D convolutions are supported"));
                }
                if *transposed && kernel.len() == 1 && dilation.iter().any(|&d| d != 1) {
                    return Err(unsupported(layer, kind, "dilated 1-D transposed convolution is not supported"));
                }
            }
            Op::Pool { kernel, .. } if !(1..=2).contains(&kernel.len()) => {
                return Err(unsupported(layer, kind, "only 1-D and 2-D pooling is supported"));
            }
            Op::AdaptivePool { kind: pool, output } => {
                if !(1..=2).contains(&output.len()) {
                    return Err(unsupported(layer, kind, "only 1-D and 2-D adaptive pooling is supported"));
                }
                if *pool == PoolKind::Max {
                    let input = &graph.nodes[node.inputs[0]].shape.0;
                    let spatial = &input[input.len() - output.len()..];
                    if spatial.iter().zip(output).any(|(i, o)| i % o != 0) {
                        return Err(unsupported(
                            layer,
                            kind,
                            format!(
                                "adaptive max pooling from {spatial:?} to {output:?} has uneven windows; burn only \
                                 has adaptive average pooling (even windows run as max pooling)"
                            ),
                        ));
                    }
                }
            }
            Op::Loss { loss: LossKind::Wasserstein { .. }, .. } => {
                return Err(unsupported(
                    layer,
                    "wasserstein-gp",
                    "the gradient penalty needs second-order gradients, which burn's autodiff does not provide",
                ));
            }
            Op::Loss { loss: LossKind::Ctc, .. } => {
                let logits = &graph.nodes[node.inputs[0]].shape;
                let labels = &graph.nodes[node.inputs[1]].shape;
                if logits.rank() != 2 || labels.rank() != 1 {
                    return Err(unsupported(layer, "ctc", "CTC expects logits [time, classes] and labels [len]"));
                }
            }
            Op::Input { .. }
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
            | Op::Loss { .. } => {}
        }
    }
    Ok(())
}
