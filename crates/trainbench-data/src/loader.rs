//! The input pipeline: a [`Dataset`] turned into this rank's training batches, epoch after epoch.
//!
//! Epochs: every epoch visits the samples in an order shuffled from `(seed, epoch)`; the last partial global
//! batch of an epoch is dropped (its samples are counted in [`LoaderStats::dropped_per_epoch`]), so every
//! batch is full. Sharding: the global batch `k` of an epoch is positions `k*B .. (k+1)*B` of its order, and rank
//! `r` of `W` takes the contiguous slice `r*B/W .. (r+1)*B/W` of it: the `W` ranks together see exactly the
//! batch a single rank would see, which is what averaging gradients across ranks needs.
//!
//! Threads: with `workers = 0` each batch is read on the caller's thread when it is asked for. With `workers =
//! N`, N threads assemble whole batches ahead of the training loop, at most `prefetch` batches ahead (claimed,
//! being read or ready), and hand them over in order. Every sample's augmentation draws from a generator seeded
//! by `(seed, epoch, sample index)`, so the batches do not depend on the number of workers or on timing.
//!
//! A sample that cannot be read fails the batch with the file named ([`OnError::Fail`]), or is counted in
//! [`LoaderStats::skipped`] and replaced by the next readable sample of the epoch's order ([`OnError::Skip`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::batch::{BatchSource, DataError, HostBatch};
use crate::dataset::{Dataset, InputOut, SampleOut};
use crate::layout::{Layout, ValueKind};
use trainbench_graph::init::{HostTensor, SeededRng};

/// What to do with a sample that cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Fail the batch (and so the run), naming the file.
    #[default]
    Fail,
    /// Count the sample as skipped and take the next readable one of the epoch's order in its place.
    Skip,
}

/// How a [`Loader`] batches, shards and prefetches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoaderConfig {
    /// Global batch size (all ranks together).
    pub batch_size: usize,
    /// Data-parallel ranks sharing each global batch.
    pub world_size: usize,
    /// This rank, `0..world_size`.
    pub rank: usize,
    /// Seed of the epoch orders and the per-sample augmentation.
    pub seed: u64,
    /// Threads assembling batches ahead of the training loop; 0 reads on the caller's thread.
    pub workers: usize,
    /// Most batches held ahead of the training loop (claimed, being read or ready) when `workers > 0`.
    pub prefetch: usize,
    /// What to do with a sample that cannot be read.
    pub on_error: OnError,
}

/// Epoch arithmetic of a dataset under a global batch size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochShape {
    /// Samples in the dataset.
    pub samples: usize,
    /// Full global batches per epoch.
    pub batches_per_epoch: usize,
    /// Samples visited per epoch (`batches_per_epoch * batch_size`).
    pub samples_per_epoch: usize,
    /// Samples of the last partial batch, dropped every epoch.
    pub dropped_per_epoch: usize,
}

/// Why a loader cannot be made for a dataset and a batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoaderError {
    /// The dataset holds less than one global batch.
    #[error(
        "the dataset holds {samples} samples, fewer than one global batch of {batch_size}; use a smaller batch size or more samples"
    )]
    TooFewSamples {
        /// Samples in the dataset.
        samples: usize,
        /// The global batch size.
        batch_size: usize,
    },
    /// The global batch does not split evenly over the ranks, or the rank is outside the world.
    #[error("a global batch of {batch_size} does not split over rank {rank} of {world_size} ranks")]
    BatchDoesNotSplit {
        /// The global batch size.
        batch_size: usize,
        /// This rank.
        rank: usize,
        /// Ranks in the world.
        world_size: usize,
    },
}

impl EpochShape {
    /// The epochs of `samples` samples in global batches of `batch_size`; refused when not one full batch fits.
    pub fn new(samples: usize, batch_size: usize) -> Result<Self, LoaderError> {
        if batch_size == 0 || samples < batch_size {
            return Err(LoaderError::TooFewSamples { samples, batch_size });
        }
        let batches = samples / batch_size;
        Ok(EpochShape {
            samples,
            batches_per_epoch: batches,
            samples_per_epoch: batches * batch_size,
            dropped_per_epoch: samples - batches * batch_size,
        })
    }
}

/// What the loader did so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoaderStats {
    /// Batches handed to the training loop.
    pub batches: u64,
    /// Samples that could not be read and were skipped in the batches handed over (only with
    /// [`OnError::Skip`]; reads ahead that were not handed over are not counted).
    pub skipped: u64,
}

/// The order of epoch `epoch`: a permutation of `0..n` from `(seed, epoch)` (Fisher-Yates).
pub fn epoch_order(n: usize, seed: u64, epoch: u64) -> Vec<u32> {
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut rng = SeededRng::new(seed ^ epoch.wrapping_mul(0xd6e8_feb8_6659_fd93), "epoch-order");
    for i in (1..n).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// The generator of one sample's augmentation in one epoch.
pub fn sample_rng(seed: u64, epoch: u64, index: usize) -> SeededRng {
    let mixed = seed ^ epoch.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (index as u64).wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    SeededRng::new(mixed, "sample")
}

/// The parts every thread of a loader shares.
struct Shared {
    dataset: Arc<dyn Dataset>,
    layout: Layout,
    config: LoaderConfig,
    shape: EpochShape,
    /// The order of the epoch most recently asked for, kept so it is shuffled once.
    order: Mutex<Option<(u64, Arc<Vec<u32>>)>>,
}

impl Shared {
    fn order(&self, epoch: u64) -> Arc<Vec<u32>> {
        let mut slot = lock(&self.order);
        match slot.as_ref() {
            Some((e, o)) if *e == epoch => o.clone(),
            _ => {
                let o = Arc::new(epoch_order(self.shape.samples, self.config.seed, epoch));
                *slot = Some((epoch, o.clone()));
                o
            }
        }
    }

    /// This rank's part of the global batch number `seq` (counted from the first epoch on), and how many
    /// unreadable samples were skipped in it.
    fn batch(&self, seq: u64) -> Result<(HostBatch, u64), DataError> {
        let per_epoch = self.shape.batches_per_epoch as u64;
        let (epoch, k) = (seq / per_epoch, (seq % per_epoch) as usize);
        let order = self.order(epoch);
        let local = self.config.batch_size / self.config.world_size;
        let start = k * self.config.batch_size + self.config.rank * local;
        let (in_n, lab_n) = (self.layout.input_numel(), self.layout.label_numel());
        let mut labels = vec![0i64; local * lab_n];
        let mut input = match self.layout.input_kind {
            ValueKind::Dense => HostTensor::Dense(vec![0.0; local * in_n]),
            ValueKind::Ids { .. } => HostTensor::Ids(vec![0; local * in_n]),
        };
        let mut skipped = 0u64;
        for s in 0..local {
            let lab = &mut labels[s * lab_n..(s + 1) * lab_n];
            let pos = start + s;
            let mut tries = 0usize;
            loop {
                let index = order[(pos + tries) % order.len()] as usize;
                let mut rng = sample_rng(self.config.seed, epoch, index);
                match self.dataset.read(
                    index,
                    &mut rng,
                    SampleOut { input: slot(&mut input, s, in_n), labels: &mut *lab },
                ) {
                    Ok(()) => {
                        skipped += tries as u64;
                        break;
                    }
                    Err(e) if self.config.on_error == OnError::Fail => return Err(e),
                    Err(e) => {
                        tries += 1;
                        if tries >= order.len().min(MAX_SKIPS_IN_A_ROW) {
                            return Err(DataError {
                                file: e.file,
                                reason: format!(
                                    "{} (and the {tries} samples tried in its place could not be read either)",
                                    e.reason
                                ),
                            });
                        }
                    }
                }
            }
        }
        let mut inputs = vec![(self.layout.input, input), (self.layout.labels, HostTensor::Ids(labels))];
        inputs.sort_by_key(|(id, _)| *id);
        Ok((HostBatch { inputs }, skipped))
    }
}

/// Sample `s`'s slot of a batch's input tensor of `n` values per sample.
fn slot(input: &mut HostTensor, s: usize, n: usize) -> InputOut<'_> {
    match input {
        HostTensor::Dense(v) => InputOut::Dense(&mut v[s * n..(s + 1) * n]),
        HostTensor::Ids(v) => InputOut::Ids(&mut v[s * n..(s + 1) * n]),
    }
}

/// Most unreadable samples in a row tried in place of one before the batch fails in skip mode.
const MAX_SKIPS_IN_A_ROW: usize = 1000;

/// Hand-over between the worker threads and the training loop.
#[derive(Default)]
struct Queue {
    /// The next global batch number a worker may claim.
    next_claim: u64,
    /// The next batch number the training loop takes.
    next_take: u64,
    /// Batches read (and the samples skipped in them), waiting for their turn.
    ready: BTreeMap<u64, Result<(HostBatch, u64), DataError>>,
    /// The loader is being dropped.
    stop: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Batches of a dataset for one rank, read on the caller's thread or by worker threads (see the module docs).
pub struct Loader {
    shared: Arc<Shared>,
    queue: Arc<(Mutex<Queue>, Condvar)>,
    workers: Vec<JoinHandle<()>>,
    /// Batch number of the next batch, when read on the caller's thread.
    next: u64,
    delivered: u64,
    /// Samples skipped in the batches delivered.
    skipped: u64,
}

impl Loader {
    /// A loader of `dataset` for a model with `layout`; refused when the batch does not split over the ranks or
    /// the dataset holds less than one global batch.
    pub fn new(dataset: Arc<dyn Dataset>, layout: Layout, config: LoaderConfig) -> Result<Self, LoaderError> {
        if config.world_size == 0 || config.batch_size % config.world_size != 0 || config.rank >= config.world_size {
            return Err(LoaderError::BatchDoesNotSplit {
                batch_size: config.batch_size,
                rank: config.rank,
                world_size: config.world_size,
            });
        }
        let shape = EpochShape::new(dataset.len(), config.batch_size)?;
        let workers = config.workers;
        let prefetch = config.prefetch.max(1) as u64;
        let shared = Arc::new(Shared { dataset, layout, config, shape, order: Mutex::new(None) });
        let queue = Arc::new((Mutex::new(Queue::default()), Condvar::new()));
        let handles = (0..workers)
            .map(|_| {
                let (shared, queue) = (shared.clone(), queue.clone());
                std::thread::spawn(move || work(&shared, &queue, prefetch))
            })
            .collect();
        Ok(Loader { shared, queue, workers: handles, next: 0, delivered: 0, skipped: 0 })
    }

    /// The epoch arithmetic: samples, batches per epoch, dropped samples.
    pub fn epoch_shape(&self) -> EpochShape {
        self.shared.shape
    }

    /// What the dataset holds.
    pub fn dataset_info(&self) -> crate::dataset::DatasetInfo {
        self.shared.dataset.info()
    }

    /// Batches delivered so far and the samples skipped in them.
    pub fn stats(&self) -> LoaderStats {
        LoaderStats { batches: self.delivered, skipped: self.skipped }
    }
}

/// A worker thread: claim the next batch number while fewer than `prefetch` are ahead of the training loop,
/// read it, and queue it.
fn work(shared: &Shared, queue: &(Mutex<Queue>, Condvar), prefetch: u64) {
    let (m, cv) = queue;
    loop {
        let seq = {
            let mut q = lock(m);
            while !q.stop && q.next_claim >= q.next_take + prefetch {
                q = cv.wait(q).unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            if q.stop {
                return;
            }
            q.next_claim += 1;
            q.next_claim - 1
        };
        let batch = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| shared.batch(seq))).unwrap_or_else(|_| {
            Err(DataError { file: "(dataset reader)".into(), reason: format!("reading batch {seq} panicked") })
        });
        let mut q = lock(m);
        q.ready.insert(seq, batch);
        cv.notify_all();
    }
}

impl BatchSource for Loader {
    fn next_batch(&mut self) -> Result<HostBatch, DataError> {
        let batch = if self.workers.is_empty() {
            self.next += 1;
            self.shared.batch(self.next - 1)
        } else {
            let (m, cv) = &*self.queue;
            let mut q = lock(m);
            loop {
                let want = q.next_take;
                if let Some(b) = q.ready.remove(&want) {
                    q.next_take += 1;
                    cv.notify_all();
                    break b;
                }
                q = cv.wait(q).unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        };
        let (batch, skipped) = batch?;
        self.delivered += 1;
        self.skipped += skipped;
        Ok(batch)
    }

    fn epoch_batches(&self) -> Option<u64> {
        Some(self.shared.shape.batches_per_epoch as u64)
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        let (m, cv) = &*self.queue;
        lock(m).stop = true;
        cv.notify_all();
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }
}
