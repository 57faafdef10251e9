//! Rules of a run's step schedule (`training.activation_checkpointing`, `training.checkpoint_every`,
//! `training.grad_accumulation`): `checkpoint_every` with `every_n` and only with it, and checkpointing only
//! for a model whose graph has recomputable blocks.

use trainbench_graph::graph::Graph;

use super::finding::Finding;
use crate::spec::path::FieldPath;
use crate::spec::wire::{CheckpointingMode, TrainingSpec};

fn path(key: &str) -> FieldPath {
    FieldPath::keys(&["training", key])
}

/// `checkpoint_every` is required by `every_n` (at least 1) and refused with every other mode;
/// `grad_accumulation` is at least 1.
pub(super) fn check_schedule(out: &mut Vec<Finding>, training: &TrainingSpec) {
    let mode = training.activation_checkpointing;
    match (mode, training.checkpoint_every) {
        (CheckpointingMode::EveryN, None) => out.push(
            Finding::new(
                path("checkpoint_every"),
                "`training.activation_checkpointing = \"every_n\"` needs `training.checkpoint_every`",
            )
            .or_at(path("activation_checkpointing"))
            .expected("an integer >= 1")
            .hint("set e.g. `checkpoint_every = 2` to recompute blocks 0, 2, 4, ..., or use \"full\""),
        ),
        (CheckpointingMode::EveryN, Some(0)) => out.push(
            Finding::new(path("checkpoint_every"), "`training.checkpoint_every` must be at least 1, found 0")
                .expected("an integer >= 1")
                .hint("1 recomputes every block (the same as \"full\")"),
        ),
        (CheckpointingMode::None | CheckpointingMode::Full, Some(n)) => out.push(
            Finding::new(
                path("checkpoint_every"),
                format!(
                    "`training.checkpoint_every = {n}` is only read with `activation_checkpointing = \"every_n\"`; \
                     the mode is \"{}\"",
                    mode.as_str()
                ),
            )
            .or_at(path("activation_checkpointing"))
            .hint("set `activation_checkpointing = \"every_n\"`, or remove `checkpoint_every`"),
        ),
        _ => {}
    }
    if training.grad_accumulation == 0 {
        out.push(
            Finding::new(path("grad_accumulation"), "`training.grad_accumulation` must be at least 1, found 0")
                .expected("an integer >= 1")
                .hint("1 is one micro-batch per optimizer step (no accumulation)"),
        );
    }
}

/// Checkpointing needs recomputable blocks in the model's graph.
pub(super) fn check_schedule_graph(out: &mut Vec<Finding>, training: &TrainingSpec, graph: &Graph) {
    let mode = training.activation_checkpointing;
    if mode != CheckpointingMode::None && graph.blocks.is_empty() {
        out.push(
            Finding::new(
                path("activation_checkpointing"),
                format!(
                    "`training.activation_checkpointing = \"{}\"` needs recomputable blocks, and the model `{}` \
                     declares none",
                    mode.as_str(),
                    graph.name
                ),
            )
            .or_at(FieldPath::keys(&["model"]))
            .expected("\"none\" for this model")
            .hint(
                "the `gpt` and `vit` families declare their layers as blocks; use one of them, or remove \
                   `activation_checkpointing`",
            ),
        );
    }
}
