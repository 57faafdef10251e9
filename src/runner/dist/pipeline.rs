//! A pipeline-parallel run's section of the result ([`section`]), merged on rank 0 from every stage's figures:
//! the bubble measured (the mean over stages of the share of a step each spent blocked waiting for a peer)
//! beside its formula, the bytes the busiest stage sent per step, and memory per stage with the most any stage
//! held as the headline (the peak of a 1F1B pipeline sits on its first stage, not its last); and the bubble its
//! cut gives when replayed with each pass as long as its chunk's FLOPs ([`replay_cut`]).

use trainbench_comm::Mesh;
use trainbench_comm::schedule::{Pass, replay};
use trainbench_contract::PipelineMeasured;

use crate::result::analysis::StageRecord;
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
                idle_replayed: None,
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
    let formula = crate::predict::pipeline_step::bubble(mesh);
    let max = per_stage.iter().max_by_key(|s| s.held_bytes);
    PipelineResult {
        stages: mesh.pipeline_parallel,
        schedule: mesh.pipeline_schedule.name().to_string(),
        microbatches: mesh.microbatches,
        virtual_stages: mesh.virtual_stages,
        bubble,
        bubble_formula: formula.as_ref().map_or(0.0, |b| b.formula_fraction),
        bubble_replayed: None,
        formula: formula.map(|b| b.formula).unwrap_or_default(),
        bytes_per_step: per_stage.iter().map(|s| s.bytes_sent_per_step).max().unwrap_or(0),
        max_memory_stage: max.map_or(0, |s| s.stage),
        max_memory_bytes: max.map_or(0, |s| s.held_bytes),
        per_stage,
    }
}

/// Fill `section`'s replayed bubble and each stage's replayed idle share: `mesh`'s schedule over the recorded
/// `chunks`, each pass as long as its FLOPs per sample (the forward's, and the rest for the backward), messages
/// instant. Left empty when the chunks do not match the mesh (a result without them).
pub(crate) fn replay_cut(section: &mut PipelineResult, mesh: &Mesh, chunks: &[StageRecord]) {
    let (p, v) = (mesh.pipeline_parallel, mesh.chunks_per_rank());
    if chunks.len() != p * v || chunks.iter().enumerate().any(|(i, c)| c.chunk != i) {
        return;
    }
    let cost = |c: usize, pass: Pass| {
        let r = &chunks[c];
        let forward = r.forward_flops_per_sample.min(r.train_flops_per_sample) as f64;
        match pass {
            Pass::Forward => forward,
            Pass::Backward => r.train_flops_per_sample as f64 - forward,
        }
    };
    let Ok(r) = replay(mesh.pipeline_schedule, (p, mesh.microbatches.max(1), v), &cost, 0.0) else { return };
    let shares = r.idle_shares();
    section.bubble_replayed = Some(r.bubble());
    for s in &mut section.per_stage {
        s.idle_replayed = shares.get(s.stage).copied();
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

    #[test]
    fn the_replayed_bubble_is_the_formula_for_equal_chunks_and_above_it_for_a_heavy_last_one() {
        let mesh = Mesh { pipeline_parallel: 2, microbatches: 4, ..Mesh::flat() };
        let (a, b) = (measured(0, 0.2, 100), measured(1, 0.4, 300));
        let mem = RankMemory::default();
        let reports = [
            StageReport { rank: 0, measured: &a, memory: mem, activations: None },
            StageReport { rank: 1, measured: &b, memory: mem, activations: None },
        ];
        let chunk = |chunk: usize, flops: u64| StageRecord {
            chunk,
            stage: chunk,
            blocks: [chunk, chunk + 1],
            parameters: 0,
            train_flops_per_sample: 3 * flops,
            forward_flops_per_sample: flops,
        };
        let mut s = section(&mesh, &reports);
        replay_cut(&mut s, &mesh, &[chunk(0, 10), chunk(1, 10)]);
        assert!((s.bubble_replayed.unwrap_or_default() - 0.2).abs() < 1e-12);
        replay_cut(&mut s, &mesh, &[chunk(0, 10), chunk(1, 20)]);
        // Stage 1 computes 4 x 60 = 240 of a 270 step (stage 0's first forward before it); stage 0 120.
        let idle: Vec<f64> = s.per_stage.iter().map(|x| x.idle_replayed.unwrap_or_default()).collect();
        assert!((idle[0] - (1.0 - 120.0 / 270.0)).abs() < 1e-12 && (idle[1] - (1.0 - 240.0 / 270.0)).abs() < 1e-12);
        // Chunks of another mesh leave it as it was.
        let mut t = section(&mesh, &reports);
        replay_cut(&mut t, &mesh, &[chunk(0, 10)]);
        assert_eq!(t.bubble_replayed, None);
    }
}
