//! A pipeline-parallel run's section of the result ([`section`]), merged on rank 0 from every stage's figures:
//! the bubble measured (the mean over stages of the share of a step each spent blocked waiting for a peer)
//! beside its formula, the bytes the busiest stage sent per step, and memory per stage with the most any stage
//! held as the headline (the peak of a 1F1B pipeline sits on its first stage, not its last).

use trainbench_comm::Mesh;
use trainbench_contract::PipelineMeasured;

use crate::result::distributed::{PipelineResult, PipelineStage, RankMemory};

/// What one stage's rank sent rank 0.
pub(crate) struct StageReport<'a> {
    /// The rank.
    pub(crate) rank: usize,
    /// Its pipeline figures.
    pub(crate) measured: &'a PipelineMeasured,
    /// Weights, gradients and optimizer state it held.
    pub(crate) memory: RankMemory,
    /// Activations at its peak.
    pub(crate) activations: Option<u64>,
}

/// The pipeline section of a run on `mesh` from its stages' reports (any order).
pub(crate) fn section(mesh: &Mesh, reports: &[StageReport<'_>]) -> PipelineResult {
    let mut per_stage: Vec<PipelineStage> = reports
        .iter()
        .map(|r| {
            let m = r.memory;
            PipelineStage {
                rank: r.rank,
                stage: r.measured.stage,
                chunks: r.measured.chunks.clone(),
                idle_s: r.measured.idle_s,
                step_s: r.measured.step_s,
                bytes_sent_per_step: r.measured.bytes_sent_per_step,
                microbatches_held: r.measured.microbatches_held,
                memory: m,
                activations: r.activations,
                held_bytes: m.weights + m.gradients + m.optimizer_state + r.activations.unwrap_or(0),
            }
        })
        .collect();
    per_stage.sort_by_key(|s| s.stage);
    let shares: Vec<f64> = per_stage.iter().filter(|s| s.step_s > 0.0).map(|s| s.idle_s / s.step_s).collect();
    let bubble = (!shares.is_empty()).then(|| shares.iter().sum::<f64>() / shares.len() as f64);
    let formula = crate::predict::mesh::bubble(mesh);
    let max = per_stage.iter().max_by_key(|s| s.held_bytes);
    PipelineResult {
        stages: mesh.pipeline_parallel,
        schedule: mesh.pipeline_schedule.name().to_string(),
        microbatches: mesh.microbatches,
        virtual_stages: mesh.virtual_stages,
        bubble,
        bubble_formula: formula.as_ref().map_or(0.0, |b| b.fraction),
        formula: formula.map(|b| b.formula).unwrap_or_default(),
        bytes_per_step: per_stage.iter().map(|s| s.bytes_sent_per_step).max().unwrap_or(0),
        max_memory_stage: max.map_or(0, |s| s.stage),
        max_memory_bytes: max.map_or(0, |s| s.held_bytes),
        per_stage,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(stage: usize, idle_s: f64, bytes: u64) -> PipelineMeasured {
        PipelineMeasured {
            stage,
            chunks: vec![stage],
            idle_s,
            step_s: 1.0,
            bytes_sent_per_step: bytes,
            microbatches_held: 2 - stage,
            data_bytes_per_step: 0,
        }
    }

    #[test]
    fn the_headline_is_the_stage_that_held_the_most_and_the_bubble_the_mean_idle_share() {
        let mesh = Mesh { pipeline_parallel: 2, microbatches: 4, ..Mesh::flat() };
        let (a, b) = (measured(0, 0.2, 100), measured(1, 0.4, 300));
        let mem = |w: u64| RankMemory { weights: w, gradients: w, optimizer_state: 2 * w, peak_allocated: None };
        let reports = [
            StageReport { rank: 1, measured: &b, memory: mem(10), activations: Some(5) },
            StageReport { rank: 0, measured: &a, memory: mem(10), activations: Some(50) },
        ];
        let s = section(&mesh, &reports);
        assert_eq!((s.max_memory_stage, s.max_memory_bytes), (0, 90), "stage 0 holds more activations");
        assert_eq!(s.per_stage[0].stage, 0);
        assert!((s.bubble.unwrap_or_default() - 0.3).abs() < 1e-12);
        assert!((s.bubble_formula - 1.0 / 5.0).abs() < 1e-12, "(p - 1) / (m + p - 1) = 1/5");
        assert_eq!(s.bytes_per_step, 300);
    }
}
