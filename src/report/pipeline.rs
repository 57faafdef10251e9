//! The pipeline-stage table of a report ([`table`]): per pipeline-parallel configuration and stage, the chunks
//! it ran, its idle share beside its share in the schedule's replay and the bubble formula, the bytes it sent
//! per step and the memory it held (weights, gradients, optimizer state, activations), the stage that held the
//! most marked as the headline.

use super::model::ReportModel;
use crate::format::{self, human_bytes};

/// Column headings of [`table`]'s rows.
pub const HEADINGS: [&str; 11] = [
    "stage",
    "chunks",
    "idle (bubble)",
    "replayed",
    "formula",
    "bytes sent/step",
    "weights",
    "gradients",
    "optimizer state",
    "activations",
    "held",
];

/// What the table's figures are.
pub const NOTE: &str = "Idle: the share of a step a stage spent blocked waiting for a peer (its sends and \
    receives and the end-of-step agreement), mean over the measured steps. Replayed: the share the stage idles \
    when its schedule is replayed with each pass as long as its chunk's FLOPs and messages instant (unequal \
    chunks show here). Formula: the bubble (p - 1) / (v m + p - 1) of equal chunks. Held: weights + gradients \
    + optimizer state + activations at the step's peak; the stage marked * held the most, the run's headline \
    memory.";

/// One row: a configuration's stage.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineRow {
    /// Configuration id.
    pub config: String,
    /// Cells under [`HEADINGS`].
    pub cells: Vec<String>,
}

/// The rows of every pipeline-parallel configuration (its first repeat's figures), stage by stage.
pub fn table(model: &ReportModel<'_>) -> Vec<PipelineRow> {
    let mut rows = Vec::new();
    for c in &model.configs {
        let Some(p) = c.distributed().find_map(|d| d.pipeline.as_ref()) else { continue };
        for s in &p.per_stage {
            let mark = if s.stage == p.max_memory_stage { "*" } else { "" };
            let share = (s.step_s > 0.0).then(|| s.idle_s / s.step_s);
            let chunks: Vec<String> = s.chunks.iter().map(ToString::to_string).collect();
            rows.push(PipelineRow {
                config: c.config.clone(),
                cells: vec![
                    format!("{}{mark}", s.stage),
                    chunks.join(", "),
                    share.map_or_else(|| "-".into(), format::percent),
                    s.idle_replayed.map_or_else(|| "-".into(), format::percent),
                    format::percent(p.bubble_formula),
                    human_bytes(s.bytes_sent_per_step),
                    human_bytes(s.memory.weights),
                    human_bytes(s.memory.gradients),
                    human_bytes(s.memory.optimizer_state),
                    s.activations.map_or_else(|| "-".into(), human_bytes),
                    human_bytes(s.held_bytes),
                ],
            });
        }
    }
    rows
}
