//! What a dataset reader implements: the [`Dataset`] trait, the slots of one sample ([`SampleOut`],
//! [`InputOut`]), what it holds ([`DatasetInfo`]), the local [`Format`]s, and the label range check the readers share.

use std::path::Path;

use trainbench_graph::init::SeededRng;

use crate::batch::DataError;

/// The local dataset formats trainbench reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A folder with `inputs.npy` and `labels.npy` ([`crate::npy`]).
    Npy,
    /// A folder with `inputs.f32` and `labels.i64`, headerless ([`crate::raw`]).
    RawF32,
    /// CIFAR-10's binary batches, `data_batch_*.bin` ([`crate::cifar`]).
    Cifar10,
    /// One sub-folder of JPEG/PNG images per class ([`crate::image_folder`]).
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
