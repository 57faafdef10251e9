//! The pipeline dimension of a mesh prediction ([`super::mesh`]): the bubble's formula, the micro-batches each
//! stage holds at its peak, and the step's schedule replayed over the chunks' predicted passes and the link's
//! hops ([`replay_chunks`]), which gives the predicted step and bubble.

use serde::Serialize;
use trainbench_comm::schedule::{Pass, Replay, replay};
use trainbench_comm::{Mesh, PipelineSchedule};
use trainbench_graph::analysis::Analysis;
use trainbench_graph::stages::Stage;

use super::PredictError;
use super::parallel;

/// The pipeline's idle share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bubble {
    /// Fraction of the step the stages idle, their mean (as a run measures it): in a prediction, the schedule
    /// replayed with each chunk's predicted passes and the link's hops ([`trainbench_comm::schedule::replay`]);
    /// from [`bubble`], the formula's.
    pub fraction: f64,
    /// The formula's fraction: equal chunks and instant messages.
    pub formula_fraction: f64,
    /// The formula with its numbers.
    pub formula: String,
}

/// The idle fraction of a pipeline: `(p - 1) / (v m + p - 1)` (GPipe and 1F1B: `v = 1`).
pub fn bubble(mesh: &Mesh) -> Option<Bubble> {
    let (p, m) = (mesh.pipeline_parallel, mesh.microbatches.max(1));
    if p <= 1 {
        return None;
    }
    let v = mesh.chunks_per_rank();
    let fraction = parallel::bubble_fraction(p, v * m);
    let formula_fraction = fraction;
    let formula = if v > 1 {
        format!("(p-1)/(v*m+p-1) = {}/({v}*{m}+{}) (interleaved)", p - 1, p - 1)
    } else {
        format!("(p-1)/(m+p-1) = {}/({m}+{})", p - 1, p - 1)
    };
    Some(Bubble { fraction, formula_fraction, formula })
}

/// Micro-batches (chunk micro-batches when interleaved) whose activations pipeline rank `r` holds at its peak.
pub fn microbatches_held(mesh: &Mesh, r: usize) -> usize {
    let (p, m, v) = (mesh.pipeline_parallel.max(1), mesh.microbatches.max(1), mesh.virtual_stages.max(1));
    match mesh.pipeline_schedule {
        _ if p == 1 => 1,
        PipelineSchedule::Gpipe => m,
        PipelineSchedule::OneFOneB => m.min(p - r.min(p - 1)),
        // Megatron's warm-up forwards of an interleaved schedule, plus the one in the steady state.
        PipelineSchedule::Interleaved1F1B => (m * v).min((p - 1 - r.min(p - 1)) * 2 + (v - 1) * p + 1),
    }
}

/// Whether pipeline rank `r` holds node `i`: one of its `chunks` contains it (every node without a pipeline).
pub(super) fn holds(chunks: &[Stage], p: usize, r: usize) -> impl Fn(usize) -> bool + '_ {
    move |i| p == 1 || chunks.iter().any(|c| c.rank == r && c.nodes.contains(&i))
}

/// The pipeline's step replayed (`None` without one): chunk `c`'s forward pass lasts `forward_s` (one
/// micro-batch's on one device) times its share of the forward FLOPs times the share of them one tensor rank
/// computes (`tensor_shares[c]`: `1 / t`, more for a mixture of experts every rank computes whole), its
/// backward likewise; each message between stages `hop_s`.
pub(super) fn replay_chunks(
    mesh: &Mesh,
    chunks: &[Stage],
    (forward_s, backward_s): (f64, f64),
    a: &Analysis,
    tensor_shares: &[f64],
    hop_s: f64,
) -> Result<Option<Replay>, PredictError> {
    let p = mesh.pipeline_parallel;
    if p <= 1 {
        return Ok(None);
    }
    let v = mesh.chunks_per_rank();
    let forward_all = a.flops.forward_per_sample.max(1) as f64;
    let backward_all = a.flops.train_per_sample.saturating_sub(a.flops.forward_per_sample).max(1) as f64;
    let cost = |c: usize, pass: Pass| {
        let c = c.min(chunks.len().saturating_sub(1));
        let chunk = &chunks[c];
        let forward = chunk.forward_flops as f64;
        let share = match pass {
            Pass::Forward => forward_s * forward / forward_all,
            Pass::Backward => backward_s * (chunk.training_flops as f64 - forward) / backward_all,
        };
        share * tensor_shares.get(c).copied().unwrap_or(1.0)
    };
    replay(mesh.pipeline_schedule, (p, mesh.microbatches.max(1), v), &cost, hop_s)
        .map(Some)
        .map_err(|e| PredictError::Mesh { why: e.to_string() })
}
