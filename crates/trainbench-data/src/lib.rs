//! The contract between a dataset pipeline and a backend: batches on the host, and the source they come from.
//!
//! The runner builds a [`BatchSource`] from a spec's `[dataset]` when it reads local files and hands it to the
//! backend through the contract's `RunContext::data`; with synthetic data there is none and the backend generates its
//! batches itself. Beside this file: what a model's batches hold ([`Layout`], `layout.rs`), one reader per
//! format (`npy.rs`, `raw.rs`, `cifar.rs`,
//! `image_folder.rs` with the image transform in `transform.rs`), and the pipeline that turns a [`Dataset`] into batches (`loader.rs`: epochs, shuffling,
//! sharding, worker threads, prefetching).

pub mod cifar;
pub mod image_folder;
mod layout;
pub mod loader;
pub mod npy;
pub mod raw;
pub mod split;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
pub mod transform;

use std::path::Path;

pub mod memory;

use trainbench_graph::graph::NodeId;
use trainbench_graph::init::{HostTensor, SeededRng};

pub use layout::{Layout, ValueKind};
pub use loader::{Loader, LoaderConfig, LoaderStats, OnError};

pub use memory::MemorySource;

/// One training batch on the host: the values of every graph input, batch first, in each input node's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct HostBatch {
    /// `(graph input, values)` for every input of the graph, in [`trainbench_graph::graph::Graph::inputs`] order.
    pub inputs: Vec<(NodeId, HostTensor)>,
}

/// Why a dataset could not deliver a batch: the file and what is wrong with it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {reason}")]
pub struct DataError {
    /// The file (or folder) at fault, as the user would find it.
    pub file: String,
    /// What is wrong, and what to do about it where that is known.
    pub reason: String,
}

/// Where a run's training batches come from when they are read from a dataset.
pub trait BatchSource: Send {
    /// The next batch of this rank's shard, blocking until the pipeline has it: the time spent here is the
    /// run's input stall.
    fn next_batch(&mut self) -> Result<HostBatch, DataError>;
    /// Batches in one epoch of this rank's shard, when known; runs with a target that counts epochs need it.
    fn epoch_batches(&self) -> Option<u64> {
        None
    }

    /// Samples of the whole dataset one epoch visits (all ranks together, the last partial batch dropped);
    /// `None` when the source has no epochs.
    fn samples_per_epoch(&self) -> Option<usize> {
        None
    }
}

impl HostBatch {
    /// Samples in this batch: the leading dimension of its inputs, given `graph`'s per-sample shapes (0 for a
    /// batch without inputs).
    pub fn samples(&self, graph: &trainbench_graph::graph::Graph) -> usize {
        self.inputs
            .first()
            .map(|(id, t)| {
                let per = graph.nodes[*id].shape.numel().max(1) as usize;
                let len = match t {
                    HostTensor::Dense(v) => v.len(),
                    HostTensor::Ids(v) => v.len(),
                };
                len / per
            })
            .unwrap_or(0)
    }

    /// The values of graph input `id`, if the batch has them.
    pub fn input(&self, id: NodeId) -> Option<&HostTensor> {
        self.inputs.iter().find(|(i, _)| *i == id).map(|(_, t)| t)
    }
}

/// The evaluation split of a run with a target, held on the host: every batch is evaluated at each evaluation
/// (the last one may be smaller than the others; nothing is dropped).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalSet {
    /// The batches, each of any number of samples.
    pub batches: Vec<HostBatch>,
    /// Where it was read from, for messages.
    pub origin: String,
}

/// The local dataset formats trainbench reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A folder with `inputs.npy` and `labels.npy` ([`npy`]).
    Npy,
    /// A folder with `inputs.f32` and `labels.i64`, headerless ([`raw`]).
    RawF32,
    /// CIFAR-10's binary batches, `data_batch_*.bin` ([`cifar`]).
    Cifar10,
    /// One sub-folder of JPEG/PNG images per class ([`image_folder`]).
    ImageFolder,
}

/// Where one sample's values go: the model input's slot of the batch.
#[derive(Debug)]
pub enum InputOut<'a> {
    /// Real values (a `Dense` input).
    Dense(&'a mut [f32]),
    /// Integer ids (a `Tokens` input).
    Ids(&'a mut [i64]),
}

/// One sample's slots in a batch being assembled.
#[derive(Debug)]
pub struct SampleOut<'a> {
    /// The model input's values, in the input's per-sample shape.
    pub input: InputOut<'a>,
    /// The labels, in the label input's per-sample shape (one value for a classifier).
    pub labels: &'a mut [i64],
}

/// What a dataset holds, for results and messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetInfo {
    /// Samples in the dataset.
    pub samples: usize,
    /// The files and their element types and shapes, in words.
    pub description: String,
}

/// A dataset opened for a model: samples by index, read (and augmented) one at a time, from any thread.
pub trait Dataset: Send + Sync {
    /// Number of samples.
    fn len(&self) -> usize;
    /// Whether the dataset holds no sample.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Read sample `index` into `out`; `rng` drives its random augmentation (seeded per epoch and sample, so
    /// the result does not depend on which thread reads it).
    fn read(&self, index: usize, rng: &mut SeededRng, out: SampleOut<'_>) -> Result<(), DataError>;
    /// Check the label range where that is cheap (a scan of small label files); `Ok` when not checked here.
    fn scan_labels(&self) -> Result<(), DataError> {
        Ok(())
    }
    /// Sample count and a description of the files.
    fn info(&self) -> DatasetInfo;
}

/// Open the dataset at `root` in `format` for a model whose batches have `layout`, checking what can be
/// checked without reading every sample (files, headers, shapes, element types; small label files' range).
pub fn open(format: Format, root: &Path, layout: &Layout) -> Result<Box<dyn Dataset>, DataError> {
    if !root.is_dir() {
        return Err(DataError {
            file: root.display().to_string(),
            reason: "is not a folder; a local dataset's `path` names the folder holding its files".into(),
        });
    }
    let dataset: Box<dyn Dataset> = match format {
        Format::Npy => Box::new(npy::NpyDataset::open(root, layout)?),
        Format::RawF32 => Box::new(raw::open(root, layout)?),
        Format::Cifar10 => Box::new(cifar::CifarDataset::open(root, layout)?),
        Format::ImageFolder => Box::new(image_folder::ImageFolder::open(root, layout)?),
    };
    if dataset.is_empty() {
        return Err(DataError { file: root.display().to_string(), reason: "the dataset holds no sample".into() });
    }
    dataset.scan_labels()?;
    Ok(dataset)
}

/// Refuse labels outside `0..classes`, naming the file and the sample.
pub(crate) fn check_label(labels: &[i64], classes: usize, file: &Path, index: usize) -> Result<(), DataError> {
    match labels.iter().find(|&&l| l < 0 || l as u64 >= classes as u64) {
        None => Ok(()),
        Some(bad) => Err(DataError {
            file: file.display().to_string(),
            reason: format!(
                "sample {index} has label {bad}, outside the model's {classes} classes (0..{classes}); set the model's `classes` to cover the labels"
            ),
        }),
    }
}
