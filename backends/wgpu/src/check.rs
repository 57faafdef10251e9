//! What the wgpu backend refuses before anything runs: precisions, layers and losses it cannot execute (asked
//! when a spec is validated and planned), and data parallelism (asked before each run).

use trainbench_workload::graph::{LossKind, Op, PoolKind};
use trainbench_workload::{BackendError, Graph, Precision, RunPlan};

/// Backend name used in messages.
pub(crate) const NAME: &str = "wgpu";

/// Largest per-sample rank the lowering carries (the batch adds one; tensors are held at rank 6).
pub(crate) const MAX_SAMPLE_RANK: usize = 5;

fn unsupported(layer: &str, op: &str, reason: impl Into<String>) -> BackendError {
    BackendError::Unsupported { backend: NAME, layer: layer.to_string(), op: op.to_string(), reason: reason.into() }
}

/// Refuse a plan the backend cannot execute, naming the layer (or the precision) and why: [`supports`], and a
/// world size above 1.
pub fn check(plan: &RunPlan, graph: &Graph) -> Result<(), BackendError> {
    if plan.world_size > 1 {
        return Err(unsupported(
            &graph.name,
            "data-parallel",
            format!("world size {} needs collective communication, which the wgpu backend lacks", plan.world_size),
        ));
    }
    supports(plan, graph)
}

/// Refuse a model or precision the backend cannot execute, naming the layer (or the precision) and why. Data
/// parallelism is left to [`check`] (a sweep may mix topologies; the runs it cannot do are recorded as not run).
pub fn supports(plan: &RunPlan, graph: &Graph) -> Result<(), BackendError> {
    if plan.precision != Precision::Fp32 {
        return Err(unsupported(
            &graph.name,
            plan.precision.as_str(),
            "mixed precision is not implemented on the wgpu backend (burn has no autocast or loss scaling); \
             use precision = \"fp32\"",
        ));
    }
    if plan.batch_size == 0 {
        return Err(unsupported(&graph.name, "batch", "batch size must be at least 1"));
    }
    if graph.losses.is_empty() {
        return Err(unsupported(&graph.name, "loss", "the graph has no loss layer"));
    }
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
            Op::CriticBatch => {
                return Err(unsupported(
                    layer,
                    kind,
                    "WGAN-GP's critic batch feeds a gradient penalty (second-order gradients), which burn's autodiff \
                     does not provide",
                ));
            }
            Op::RoiAlign { .. } => {
                return Err(unsupported(layer, kind, "RoIAlign has no implementation in burn 0.22"));
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
            _ => {}
        }
    }
    Ok(())
}
