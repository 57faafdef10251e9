//! What the tch backend's lowering refuses beyond its declared capabilities (layers whose shapes or wiring it
//! cannot lower, the gradient penalty under fp16 loss scaling), and the roles of a WGAN-GP graph's nodes its
//! training step needs. Pure functions of the plan and the graph: a process without libtorch answers them.

use crate::backend_kind::BackendKind;
use crate::error::BackendError;
use crate::plan::RunPlan;
use trainbench_graph::graph::{Graph, LossKind, NodeId, Op};
use trainbench_graph::training::Precision;

fn unsupported(layer: &str, op: &str, reason: impl Into<String>) -> BackendError {
    BackendError::Unsupported {
        backend: BackendKind::Tch.name(),
        layer: layer.to_string(),
        op: op.to_string(),
        reason: reason.into(),
    }
}

/// What the lowering refuses beyond the declared capabilities ([`crate::capability::TCH`]:
/// devices, precisions, CPU features): every layer and loss whose shapes or wiring it cannot lower, and the
/// WGAN-GP gradient penalty under fp16 loss scaling.
pub fn supports_lowering(plan: &RunPlan, graph: &Graph) -> Result<(), BackendError> {
    if plan.batch_size == 0 {
        return Err(unsupported(&graph.name, "batch", "batch_size must be at least 1"));
    }
    for (i, node) in graph.nodes.iter().enumerate() {
        check_node(graph, i).map_err(|reason| unsupported(&node.name, node.op.kind_name(), reason))?;
    }
    if !plan.schedule.checkpointing.is_none() && graph.blocks.is_empty() {
        return Err(unsupported(
            &graph.name,
            "activation_checkpointing",
            "the model declares no recomputable blocks (the `gpt` and `vit` families do); use \"none\"",
        ));
    }
    if !plan.schedule.checkpointing.is_none()
        && let Some(node) = graph.nodes.iter().find(|n| matches!(n.op, Op::Moe { aux_loss, .. } if aux_loss > 0.0))
    {
        return Err(unsupported(
            &node.name,
            "activation_checkpointing",
            "a recomputed block's forward runs without gradients, so its MoE load-balancing loss would not train; \
             set `model.moe.aux_loss = 0` or `training.activation_checkpointing = \"none\"`",
        ));
    }
    check_sharded(plan, graph)?;
    let wgan = wgan_roles_if_any(graph)?;
    if wgan.is_some() && plan.schedule.micro_batches() > 1 {
        return Err(unsupported(
            &graph.name,
            "grad_accumulation",
            "gradient accumulation is not implemented for the WGAN-GP two-optimizer step; use \
             `training.grad_accumulation = 1`",
        ));
    }
    if let Some(roles) = wgan
        && plan.precision == Precision::Fp16
    {
        return Err(unsupported(
            &graph.nodes[roles.loss].name,
            "loss",
            "the gradient penalty under fp16 loss scaling is not implemented; use bf16 or fp32",
        ));
    }
    Ok(())
}

/// What the ZeRO stages refuse: fp16 (each worker steps its shard with plain gradients, no loss scaling), and
/// ZeRO-3 on a model with blocks unless every block is recomputed (the block's weights are gathered again for
/// its backward by replaying it).
fn check_sharded(plan: &RunPlan, graph: &Graph) -> Result<(), BackendError> {
    let strategy = plan.topology.strategy;
    if strategy.zero_stage().is_none() || plan.topology.world_size() <= 1 {
        return Ok(());
    }
    if plan.precision == Precision::Fp16 {
        return Err(unsupported(
            &graph.name,
            "data_parallel",
            format!(
                "`{}` steps each worker's shard with plain gradients, and fp16 needs loss scaling; use bf16 or fp32",
                strategy.name()
            ),
        ));
    }
    if strategy.zero_stage() == Some(3)
        && !graph.blocks.is_empty()
        && plan.schedule.checkpointing != trainbench_graph::training::Checkpointing::Full
    {
        return Err(unsupported(
            &graph.name,
            "data_parallel",
            format!(
                "`zero-3` gathers each of the {} blocks' weights again for its backward by replaying the block; set \
                 `training.activation_checkpointing = \"full\"`",
                graph.blocks.len()
            ),
        ));
    }
    Ok(())
}

/// The WGAN-GP roles when the graph is trained as a GAN (it has parts or a Wasserstein loss), `None` for a
/// plain graph; a GAN graph that breaks the zoo's convention is refused naming what is wrong.
pub fn wgan_roles_if_any(graph: &Graph) -> Result<Option<WganRoles>, BackendError> {
    let has_parts = graph.nodes.iter().any(|n| n.part.is_some());
    let wgan =
        graph.losses.iter().any(|&l| matches!(graph.nodes[l].op, Op::Loss { loss: LossKind::Wasserstein { .. }, .. }));
    if !(has_parts || wgan) {
        return Ok(None);
    }
    wgan_roles(graph).map(Some).map_err(|reason| unsupported(&graph.name, "wgan_gp", reason.to_string()))
}

fn is_int_input(graph: &Graph, id: NodeId) -> bool {
    graph.nodes[id].op.is_index_input()
}

fn check_node(graph: &Graph, id: NodeId) -> Result<(), String> {
    let node = &graph.nodes[id];
    let rank = |i: usize| graph.nodes[node.inputs[i]].shape.rank();
    match &node.op {
        Op::Conv { kernel, .. } if !(1..=2).contains(&kernel.len()) => {
            Err(format!("{}-d convolution is not lowered (1-d and 2-d are)", kernel.len()))
        }
        Op::Pool { kernel, .. } if !(1..=2).contains(&kernel.len()) => {
            Err(format!("{}-d pooling is not lowered (1-d and 2-d are)", kernel.len()))
        }
        Op::AdaptivePool { output, .. } if !(1..=2).contains(&output.len()) => {
            Err(format!("{}-d adaptive pooling is not lowered (1-d and 2-d are)", output.len()))
        }
        Op::RoiAlign { output, .. } if output.len() != 2 || rank(0) != 3 => {
            Err("RoI align needs a [C, H, W] feature map and a 2-d output size".into())
        }
        Op::Rnn { .. } if rank(0) != 2 => Err("recurrent layers take [time, features] inputs".into()),
        Op::Attention { .. } if node.inputs.len() != 3 => Err("attention takes query, key and value inputs".into()),
        Op::Add | Op::Mul if node.inputs.len() < 2 => Err("needs at least two inputs".into()),
        Op::Embedding { .. } if !is_int_input(graph, node.inputs[0]) => {
            Err("embedding ids must come straight from an integer (tokens or labels) input".into())
        }
        Op::CriticBatch
            if !graph.nodes.iter().any(|n| {
                matches!(n.op, Op::Loss { loss: LossKind::Wasserstein { .. }, .. }) && n.inputs.get(1) == Some(&id)
            }) =>
        {
            Err("critic_batch is only lowered as input 1 of a Wasserstein loss".into())
        }
        Op::SinusoidalPositions { .. } if rank(0) != 2 => Err("positions take [time, width] inputs".into()),
        Op::Loss { loss, .. } => check_loss(graph, id, *loss),
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
        | Op::Moe { .. } => Ok(()),
    }
}

fn check_loss(graph: &Graph, id: NodeId, loss: LossKind) -> Result<(), String> {
    let node = &graph.nodes[id];
    match loss {
        LossKind::CrossEntropy | LossKind::Ctc if !is_int_input(graph, node.inputs[1]) => {
            Err("labels (input 1) must be an integer labels or tokens input".into())
        }
        LossKind::ActorCritic { .. } if !is_int_input(graph, node.inputs[2]) => {
            Err("actions taken (input 2) must be an integer labels input".into())
        }
        LossKind::Wasserstein { .. } if graph.losses.len() != 1 => {
            Err("a Wasserstein loss must be the graph's only loss (the generator loss derives from it)".into())
        }
        _ => Ok(()),
    }
}

/// The nodes a WGAN-GP training step works with.
#[derive(Debug, Clone, PartialEq)]
pub struct WganRoles {
    /// The Wasserstein loss node.
    pub loss: NodeId,
    /// The critic's scores `[3, 1]` on the stacked (real, fake, interpolated) batch (loss input 0).
    pub scores: NodeId,
    /// The `critic_batch` node (loss input 1).
    pub critic_batch: NodeId,
    /// Name of the critic's part (that of the `critic_batch` node); every other part is the generator's.
    pub critic_part: String,
}

/// What a WGAN-GP graph must look like (the tail of every [`NotWgan`] message).
const WGAN_HINT: &str = "expected one Wasserstein loss over the critic's scores [3, 1] and a critic_batch node, \
                         with the critic and the generator in two parts";

/// Why a graph is not a WGAN-GP graph the tch lowering can train.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotWgan {
    /// Not exactly one loss (how many).
    #[error("{0} losses found; {hint}", hint = WGAN_HINT)]
    LossCount(usize),
    /// The loss (named) is not a Wasserstein loss.
    #[error("loss `{0}` is not a Wasserstein loss; {hint}", hint = WGAN_HINT)]
    NotWasserstein(String),
    /// Input 1 of the loss (named) is not a `critic_batch` node.
    #[error("input 1 of `{0}` is not a critic_batch node; {hint}", hint = WGAN_HINT)]
    NoCriticBatch(String),
    /// The `critic_batch` node (named) belongs to no part.
    #[error("`{0}` belongs to no part; {hint}", hint = WGAN_HINT)]
    NoPart(String),
    /// The generated images come from the critic's part, or from none.
    #[error(
        "the generated images `{fake}` must come from the generator's part, not `{critic_part}`; {hint}",
        hint = WGAN_HINT
    )]
    FakeInCriticPart {
        /// The node of the generated images.
        fake: String,
        /// The critic's part.
        critic_part: String,
    },
}

/// Identify the WGAN-GP roles (the zoo's convention, see `Op::CriticBatch`): exactly one loss, a Wasserstein
/// loss over the critic's scores and the `critic_batch` node; the critic's nodes in the part of that node,
/// the generator's in another part.
pub fn wgan_roles(graph: &Graph) -> Result<WganRoles, NotWgan> {
    let [loss] = graph.losses[..] else {
        return Err(NotWgan::LossCount(graph.losses.len()));
    };
    let node = &graph.nodes[loss];
    if !matches!(node.op, Op::Loss { loss: LossKind::Wasserstein { .. }, .. }) {
        return Err(NotWgan::NotWasserstein(node.name.clone()));
    }
    let (scores, critic_batch) = (node.inputs[0], node.inputs[1]);
    if !matches!(graph.nodes[critic_batch].op, Op::CriticBatch) {
        return Err(NotWgan::NoCriticBatch(node.name.clone()));
    }
    let Some(critic_part) = graph.nodes[critic_batch].part.clone() else {
        return Err(NotWgan::NoPart(graph.nodes[critic_batch].name.clone()));
    };
    let fake = graph.nodes[critic_batch].inputs[1];
    if graph.nodes[fake].part.as_ref().is_none_or(|p| *p == critic_part) {
        return Err(NotWgan::FakeInCriticPart { fake: graph.nodes[fake].name.clone(), critic_part });
    }
    Ok(WganRoles { loss, scores, critic_batch, critic_part })
}
