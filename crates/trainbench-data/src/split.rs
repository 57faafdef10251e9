//! The evaluation split of a run with a target: a held-out part of a dataset ([`Subset`], [`hold_out`]: the last
//! samples, never trained on) or a dataset of its own, read whole in order into an [`EvalSet`] ([`read_eval`]).

use std::sync::Arc;

use crate::batch::{DataError, EvalSet, HostBatch};
use crate::dataset::{Dataset, DatasetInfo, InputOut, SampleOut};
use crate::layout::{Layout, ValueKind};
use crate::loader::sample_rng;
use trainbench_graph::init::{HostTensor, SeededRng};

/// Samples `start..start + len` of a dataset, as a dataset of their own.
pub struct Subset {
    inner: Arc<dyn Dataset>,
    start: usize,
    len: usize,
    what: &'static str,
}

impl Dataset for Subset {
    fn len(&self) -> usize {
        self.len
    }
    fn read(&self, index: usize, rng: &mut SeededRng, out: SampleOut<'_>) -> Result<(), DataError> {
        self.inner.read(self.start + index, rng, out)
    }
    fn scan_labels(&self) -> Result<(), DataError> {
        self.inner.scan_labels()
    }
    fn info(&self) -> DatasetInfo {
        let inner = self.inner.info();
        DatasetInfo {
            samples: self.len,
            description: format!(
                "{} ({}: samples {}..{} of {})",
                inner.description,
                self.what,
                self.start,
                self.start + self.len,
                inner.samples
            ),
        }
    }
}

/// Holding out a fraction of a dataset would leave one of the parts empty.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("holding out {fraction} of {samples} samples leaves nothing to train on")]
pub struct NothingToTrain {
    /// The fraction asked for.
    pub fraction: f64,
    /// Samples in the dataset.
    pub samples: usize,
}

/// Split `dataset` into its training part and its held-out last `fraction` of samples (at least one), or
/// refuse when either part would be empty.
pub fn hold_out(dataset: Arc<dyn Dataset>, fraction: f64) -> Result<(Subset, Subset), NothingToTrain> {
    let n = dataset.len();
    let held = ((n as f64 * fraction).ceil() as usize).max(1);
    if !(fraction > 0.0 && fraction < 1.0) || held >= n {
        return Err(NothingToTrain { fraction, samples: n });
    }
    let train = Subset { inner: dataset.clone(), start: 0, len: n - held, what: "training part" };
    let eval = Subset { inner: dataset, start: n - held, len: held, what: "held out" };
    Ok((train, eval))
}

/// Read every sample of `dataset` in order into batches of at most `batch` samples (the last one smaller),
/// each sample's augmentation seeded by `(seed, sample)` as in epoch 0, so every evaluation sees the same set.
pub fn read_eval(
    dataset: &dyn Dataset,
    layout: &Layout,
    batch: usize,
    seed: u64,
    origin: &str,
) -> Result<EvalSet, DataError> {
    let n = dataset.len();
    let (in_n, lab_n) = (layout.input_numel(), layout.label_numel());
    let mut batches = Vec::new();
    let mut start = 0;
    while start < n {
        let size = batch.max(1).min(n - start);
        let mut labels = vec![0i64; size * lab_n];
        let mut input = match layout.input_kind {
            ValueKind::Dense => HostTensor::Dense(vec![0.0; size * in_n]),
            ValueKind::Ids { .. } => HostTensor::Ids(vec![0; size * in_n]),
        };
        for s in 0..size {
            let slot = match &mut input {
                HostTensor::Dense(v) => InputOut::Dense(&mut v[s * in_n..(s + 1) * in_n]),
                HostTensor::Ids(v) => InputOut::Ids(&mut v[s * in_n..(s + 1) * in_n]),
            };
            let mut rng = sample_rng(seed, 0, start + s);
            dataset.read(
                start + s,
                &mut rng,
                SampleOut { input: slot, labels: &mut labels[s * lab_n..(s + 1) * lab_n] },
            )?;
        }
        let mut inputs = vec![(layout.input, input), (layout.labels, HostTensor::Ids(labels))];
        inputs.sort_by_key(|(id, _)| *id);
        batches.push(HostBatch { inputs });
        start += size;
    }
    Ok(EvalSet { batches, origin: origin.to_string() })
}
