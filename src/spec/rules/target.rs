//! Rules of a training target (`[training.target]`, time-to-accuracy) and of the evaluation split it reads
//! (`dataset.eval_path`, `dataset.eval_fraction`): a target needs local data and exactly one evaluation split,
//! one cadence and at least one budget; an evaluation split without a target would be ignored, so it is refused;
//! an accuracy target needs a classifier (a cross-entropy loss in the graph), an AUC target a binary model (a
//! binary cross-entropy loss); the evaluation split's files are
//! opened as a run would open them; a target trains and evaluates on one worker, so a data-parallel topology
//! beside it is refused.

use std::path::Path;
use trainbench_contract::auc::binary_nodes;
use trainbench_contract::target::{TargetMetric, classifier_nodes};
use trainbench_data::Layout;
use trainbench_graph::graph::Graph;

use super::dataset::reader_format;
use super::finding::Finding;
use super::topology::EffectiveTopology;
use crate::spec::path::FieldPath;
use crate::spec::wire::{DataSource, DatasetSpec, TrainingSpec};

fn target_key(k: &str) -> FieldPath {
    FieldPath::keys(&["training", "target", k])
}

fn dataset_key(k: &str) -> FieldPath {
    FieldPath::keys(&["dataset", k])
}

/// A run with a target trains and evaluates on one worker (data-parallel workers do not evaluate yet): every
/// topology of more than one worker beside `[training.target]` is refused here rather than failing at run time.
pub fn check_target_world(out: &mut Vec<Finding>, training: &TrainingSpec, topologies: &[EffectiveTopology]) {
    if training.target.is_none() {
        return;
    }
    for t in topologies {
        let Some(workers) = t.world_size().filter(|&w| w > 1) else { continue };
        out.push(
            Finding::new(
                t.path.clone(),
                format!(
                    "`[training.target]` trains and evaluates on one worker; this topology has {workers} workers \
                     ({} node(s) x {} device(s))",
                    t.nodes, t.devices_per_node
                ),
            )
            .hint("run the target with `nodes = 1` and `devices_per_node = 1`, or remove `[training.target]`"),
        );
    }
}

/// The target's own fields and its agreement with `[dataset]`.
pub fn check_target(out: &mut Vec<Finding>, training: &TrainingSpec, dataset: Option<&DatasetSpec>) {
    let Some(t) = &training.target else {
        if let Some(d) = dataset {
            for (key, present) in [("eval_path", d.eval_path.is_some()), ("eval_fraction", d.eval_fraction.is_some())] {
                if present {
                    out.push(
                        Finding::new(
                            dataset_key(key),
                            format!(
                                "`dataset.{key}` is only read by a run with a target; there is no `[training.target]`"
                            ),
                        )
                        .hint("add `[training.target]` (metric, value, budget) or remove the key"),
                    );
                }
            }
        }
        return;
    };
    match t.metric {
        TargetMetric::Accuracy if !(t.value > 0.0 && t.value <= 1.0) => out.push(
            Finding::new(target_key("value"), format!("an accuracy target must be in (0, 1], found {}", t.value))
                .expected("a fraction such as 0.95")
                .hint("accuracy is a fraction of the evaluation split, not a percentage"),
        ),
        TargetMetric::Auc if !(t.value > 0.0 && t.value <= 1.0) => out.push(
            Finding::new(target_key("value"), format!("an AUC target must be in (0, 1], found {}", t.value))
                .expected("a fraction such as 0.8")
                .hint("AUC is the area under the ROC curve: 0.5 is chance, 1.0 a perfect ranking"),
        ),
        TargetMetric::Loss if !(t.value.is_finite() && t.value > 0.0) => out.push(
            Finding::new(target_key("value"), format!("a loss target must be greater than 0, found {}", t.value))
                .expected("a positive loss such as 0.1"),
        ),
        _ => {}
    }
    if t.eval_every_steps.is_some() && t.eval_every_epochs.is_some() {
        out.push(
            Finding::new(target_key("eval_every_epochs"), "set `eval_every_steps` or `eval_every_epochs`, not both")
                .or_at(target_key("eval_every_steps"))
                .hint("one cadence decides when the evaluation split is evaluated"),
        );
    }
    if t.max_epochs.is_none() && t.max_steps.is_none() && t.max_seconds.is_none() {
        out.push(
            Finding::new(target_key("metric"), "a target needs a budget for runs that never reach it")
                .expected("`max_epochs`, `max_steps` or `max_seconds`")
                .hint("e.g. `max_epochs = 50`"),
        );
    }
    if let Some(s) = t.max_seconds.filter(|s| !(s.is_finite() && *s > 0.0)) {
        out.push(Finding::new(target_key("max_seconds"), format!("`max_seconds` must be greater than 0, found {s}")));
    }
    let Some(d) = dataset else { return };
    if d.source == DataSource::Synthetic {
        out.push(
            Finding::new(
                target_key("metric"),
                "a target needs real data: synthetic data has random labels, so there is nothing to reach",
            )
            .or_at(dataset_key("source"))
            .expected("`[dataset] source = \"local\"` with an evaluation split")
            .hint(
                "point `[dataset]` at a local dataset (see specs/real/digits_mlp.toml), or remove `[training.target]`",
            ),
        );
        return;
    }
    match (&d.eval_path, d.eval_fraction) {
        (None, None) => out.push(
            Finding::new(dataset_key("eval_path"), "a target needs an evaluation split")
                .or_at(target_key("metric"))
                .expected("`dataset.eval_path` or `dataset.eval_fraction`")
                .hint("`eval_path` names a held-out dataset of the same format; `eval_fraction = 0.2` holds out the last 20%"),
        ),
        (Some(_), Some(_)) => out.push(
            Finding::new(dataset_key("eval_fraction"), "set `dataset.eval_path` or `dataset.eval_fraction`, not both")
                .or_at(dataset_key("eval_path")),
        ),
        (None, Some(f)) if !(f > 0.0 && f < 1.0) => out.push(
            Finding::new(dataset_key("eval_fraction"), format!("`dataset.eval_fraction` must be in (0, 1), found {f}"))
                .expected("a fraction such as 0.2"),
        ),
        _ => {}
    }
}

/// What needs the graph: an accuracy target needs a cross-entropy loss, whose logits are scored; an AUC target
/// a binary cross-entropy loss, whose logits are ranked.
pub fn check_target_graph(out: &mut Vec<Finding>, training: &TrainingSpec, graph: &Graph) {
    if let Some(t) = &training.target {
        if t.metric == TargetMetric::Auc && binary_nodes(graph).is_none() {
            out.push(
                Finding::new(
                    target_key("metric"),
                    format!("an AUC target needs a binary model, but `{}` has no binary cross-entropy loss", graph.name),
                )
                .expected("`metric = \"loss\"`")
                .hint("AUC ranks the logits of the binary cross-entropy loss against its 0/1 targets (e.g. `family = \"dlrm\"`)"),
            );
        }
        if t.metric == TargetMetric::Accuracy && classifier_nodes(graph).is_none() {
            out.push(
                Finding::new(
                    target_key("metric"),
                    format!("an accuracy target needs a classifier, but `{}` has no cross-entropy loss", graph.name),
                )
                .expected("`metric = \"loss\"`")
                .hint("accuracy compares the argmax of the cross-entropy loss's logits with the labels"),
            );
        }
    }
}

/// The evaluation split's files, opened as a run would open them: `dataset.eval_path` exists and reads as the
/// dataset's format for this model (headers, shapes, element types, label range where cheap), and
/// `dataset.eval_fraction` leaves at least one global batch of every swept size to train on.
pub fn check_eval_data(dataset: &DatasetSpec, graph: &Graph, batch_sizes: &[usize], base: &Path) -> Vec<Finding> {
    let (DataSource::Local, Some(format)) = (dataset.source, dataset.format) else { return Vec::new() };
    let Ok(layout) = Layout::of(graph) else { return Vec::new() };
    let format = reader_format(format);
    let mut out = Vec::new();
    if let Some(p) = &dataset.eval_path {
        let root = base.join(p);
        if !root.exists() {
            out.push(
                Finding::new(
                    dataset_key("eval_path"),
                    format!("evaluation split `{p}` does not exist (relative to the spec's folder)"),
                )
                .hint("paths are resolved relative to the folder holding the spec file"),
            );
        } else if let Err(e) = trainbench_data::open(format, &root, &layout) {
            out.push(
                Finding::new(dataset_key("eval_path"), format!("evaluation split: {e}"))
                    .hint("the evaluation split is read with the dataset's `format` for the same model"),
            );
        }
    }
    if let (Some(f), Some(p)) = (dataset.eval_fraction.filter(|f| *f > 0.0 && *f < 1.0), &dataset.path) {
        let root = base.join(p);
        if let Ok(d) = trainbench_data::open(format, &root, &layout) {
            let n = d.len();
            let held = ((n as f64 * f).ceil() as usize).max(1);
            let train = n.saturating_sub(held);
            if let Some(b) = batch_sizes.iter().copied().filter(|&b| train < b).max() {
                out.push(
                    Finding::new(
                        dataset_key("eval_fraction"),
                        format!(
                            "holding out {f} of the {n} samples of `{}` leaves {train} to train on, fewer than one \
                             batch of {b}",
                            root.display()
                        ),
                    )
                    .hint("hold out a smaller fraction, or use a smaller batch size"),
                );
            }
        }
    }
    out
}
