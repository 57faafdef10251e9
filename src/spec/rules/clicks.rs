//! Rules of synthetic clicks (`[dataset] source = "clicks"`): the keys that only files have are refused, the
//! model must be a click model (a binary cross-entropy loss over a one-value target, dense and categorical
//! inputs), and the clicks left for training after the evaluation split must fill a global batch.

use trainbench_data::clicks::Clicks;
use trainbench_graph::Graph;

use super::finding::Finding;
use crate::spec::path::FieldPath;
use crate::spec::wire::{DataSource, DatasetSpec};

/// Clicks generated when `dataset.samples` is not set.
pub const DEFAULT_CLICK_SAMPLES: u64 = 8192;

fn key(k: &str) -> FieldPath {
    FieldPath::keys(&["dataset", k])
}

/// The training and evaluation samples of `dataset`'s clicks: the last `eval_fraction` of them (rounded up, at
/// least one) held out when set.
pub fn click_split(dataset: &DatasetSpec) -> (u64, u64) {
    let total = dataset.samples.unwrap_or(DEFAULT_CLICK_SAMPLES);
    let held = match dataset.eval_fraction.filter(|f| *f > 0.0 && *f < 1.0) {
        Some(f) => ((total as f64 * f).ceil() as u64).clamp(1, total),
        None => 0,
    };
    (total - held, held)
}

/// The keys of a clicks source that only local files have.
pub fn check_clicks(out: &mut Vec<Finding>, dataset: &DatasetSpec) {
    if dataset.source != DataSource::Clicks {
        return;
    }
    let keys = [
        ("path", dataset.path.is_some()),
        ("format", dataset.format.is_some()),
        ("workers", dataset.workers.is_some()),
        ("prefetch", dataset.prefetch.is_some()),
        ("on_error", dataset.on_error.is_some()),
        ("eval_path", dataset.eval_path.is_some()),
    ];
    let hint = "clicks are generated: `samples` sizes them and `eval_fraction` holds out the evaluation split";
    super::dataset::refuse_local_only_keys(out, &keys, "clicks", hint);
}

/// The model against the clicks: a click model, and a global batch of every swept size left to train on.
pub fn check_clicks_graph(dataset: &DatasetSpec, graph: &Graph, batch_sizes: &[usize]) -> Vec<Finding> {
    if dataset.source != DataSource::Clicks {
        return Vec::new();
    }
    if let Err(e) = Clicks::new(graph, 0) {
        return vec![Finding::new(key("source"), e.to_string()).hint("use `source = \"synthetic\"` for this model")];
    }
    let (train, held) = click_split(dataset);
    batch_sizes
        .iter()
        .copied()
        .filter(|&b| train < b as u64)
        .max()
        .map(|b| {
            Finding::new(
                key("samples"),
                format!("{train} clicks are left to train on ({held} held out), fewer than one batch of {b}"),
            )
            .or_at(key("eval_fraction"))
            .hint("generate more clicks (`dataset.samples`) or hold out fewer")
        })
        .into_iter()
        .collect()
}
