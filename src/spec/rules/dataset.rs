//! Rules on a local dataset that read its files: the formats read, the model's inputs against what a dataset
//! supplies, and the files themselves opened as a run would open them (headers, shapes, element types, the
//! label range of small label files, at least one global batch) without reading every sample.

use std::path::Path;

use trainbench_data::{Format, Layout, loader::EpochShape};
use trainbench_graph::Graph;

use super::finding::Finding;
use crate::spec::path::FieldPath;
use crate::spec::wire::{DataFormat, DataSource, DatasetSpec};

/// The reader of a spec's format.
pub fn reader_format(format: DataFormat) -> Format {
    match format {
        DataFormat::Npy => Format::Npy,
        DataFormat::RawF32 => Format::RawF32,
        DataFormat::Cifar10 => Format::Cifar10,
        DataFormat::ImageFolder => Format::ImageFolder,
    }
}

/// Open the local dataset of `dataset` (resolved against `base`) for `graph` and report what is wrong with it,
/// each problem naming the file; nothing for synthetic data or a path the other rules already refused.
pub fn check_local_data(dataset: &DatasetSpec, graph: &Graph, batch_sizes: &[usize], base: &Path) -> Vec<Finding> {
    let key = |k: &str| FieldPath::keys(&["dataset", k]);
    let (DataSource::Local, Some(path), Some(format)) = (dataset.source, &dataset.path, dataset.format) else {
        return Vec::new();
    };
    let root = base.join(path);
    if !root.exists() {
        return Vec::new();
    }
    let format = reader_format(format);
    let layout = match Layout::of(graph) {
        Ok(l) => l,
        Err(why) => {
            return vec![
                Finding::new(key("source"), why.to_string()).hint("use `source = \"synthetic\"` for this model"),
            ];
        }
    };
    let dataset = match trainbench_data::open(format, &root, &layout) {
        Ok(d) => d,
        Err(e) => {
            return vec![
                Finding::new(key("path"), format!("local dataset: {e}"))
                    .or_at(key("format"))
                    .hint("fix or regenerate the file; `trainbench validate` opens the files as a run would"),
            ];
        }
    };
    let samples = dataset.len();
    batch_sizes
        .iter()
        .filter_map(|&b| EpochShape::new(samples, b).err())
        .take(1)
        .map(|why| {
            Finding::new(key("path"), format!("local dataset `{}`: {why}", root.display()))
                .or_at(FieldPath::keys(&["sweep", "batch_sizes"]))
        })
        .collect()
}

/// Refuses, at its key, each of `keys` (a key of `[dataset]` and whether the spec sets it) that only a local source
/// reads, naming the spec's `source` and giving `hint`.
pub fn refuse_local_only_keys(out: &mut Vec<Finding>, keys: &[(&str, bool)], source: &str, hint: &str) {
    for (key, _) in keys.iter().filter(|(_, present)| *present) {
        out.push(
            Finding::new(
                FieldPath::keys(&["dataset", key]),
                format!("`dataset.{key}` is only read when `source = \"local\"`; the source is {source}"),
            )
            .or_at(FieldPath::keys(&["dataset", "source"]))
            .hint(hint),
        );
    }
}
