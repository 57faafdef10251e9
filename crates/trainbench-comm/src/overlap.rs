//! Exchanging gradients while the backward pass goes on: the trained tensors in [`crate::units::Unit`] buckets,
//! in the order a backward pass completes them (the last tensors first); the backend hands each bucket to a
//! [`BucketFeed`] as soon as its gradients are accumulated, and a communication thread exchanges the buckets in
//! bucket order (the same order on every worker, whatever order they arrive in) while the backward pass computes
//! the rest. All-reduce sums each bucket; ZeRO-1/2 reduce-scatter it into the worker's shard. What stays after the
//! backward pass (averaging, the stop flags, ZeRO's step and all-gather) is [`Overlapped::finish`]. The
//! [`Overlapped`] trait itself sits below, in `exchange.rs`, beside the [`crate::exchange::GradientExchange`] it
//! extends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};

use crate::communicator::CommError;
use crate::exchange::Overlapped;

/// Whether this process's computing thread is waiting for its communication thread (one rank per process, so
/// one flag per process).
static COMPUTE_WAITS: AtomicBool = AtomicBool::new(false);

/// Whether the computing thread is waiting for the communication thread, with nothing to compute meanwhile: an
/// engine that waits politely beside the computation (MPI's) may then spin.
pub fn compute_waits() -> bool {
    COMPUTE_WAITS.load(Ordering::Relaxed)
}

/// Marks the computing thread as waiting for the communication thread while it lives.
pub(crate) struct ComputeWaits;

impl ComputeWaits {
    pub(crate) fn start() -> Self {
        COMPUTE_WAITS.store(true, Ordering::Relaxed);
        ComputeWaits
    }
}

impl Drop for ComputeWaits {
    fn drop(&mut self) {
        COMPUTE_WAITS.store(false, Ordering::Relaxed);
    }
}

/// Why an overlapped exchange failed: the engine, or the backward pass it ran beside.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverlapError {
    /// A collective failed.
    #[error(transparent)]
    Comm(#[from] CommError),
    /// The backward pass (or handing a bucket over) failed.
    #[error("{0}")]
    Backward(String),
}

/// Where a backward pass hands over complete buckets.
pub struct BucketFeed {
    tx: Sender<(usize, Vec<f32>)>,
    sent: Vec<bool>,
}

impl BucketFeed {
    /// Hand over bucket `bucket`'s gradients (its [`crate::units::Unit::len`] values, this worker's mean over its
    /// batch).
    pub fn send(&mut self, bucket: usize, values: Vec<f32>) -> Result<(), OverlapError> {
        if self.sent.get(bucket).copied().unwrap_or(true) {
            return Err(OverlapError::Backward(format!("bucket {bucket} handed over twice, or does not exist")));
        }
        self.sent[bucket] = true;
        self.tx.send((bucket, values)).map_err(|_| OverlapError::Backward("the communication thread has gone".into()))
    }

    /// Buckets not handed over yet.
    pub fn unsent(&self) -> Vec<usize> {
        (0..self.sent.len()).filter(|&b| !self.sent[b]).collect()
    }
}

/// Run `backward` on this thread while a communication thread exchanges, in bucket order, each bucket it hands
/// to the feed; buckets it never handed over are exchanged as zeros afterwards (every worker issues the same
/// collectives). The seconds inside the collectives are counted by the exchange ([`crate::ExchangeStats::busy_s`]).
pub fn exchange_during(
    x: &mut dyn Overlapped,
    backward: &mut dyn FnMut(&mut BucketFeed) -> Result<(), OverlapError>,
) -> Result<(), OverlapError> {
    let lens: Vec<usize> = x.buckets().iter().map(|u| u.len).collect();
    let (tx, rx) = channel::<(usize, Vec<f32>)>();
    let mut feed = BucketFeed { tx, sent: vec![false; lens.len()] };
    let mut x = Sendable(x);
    let buckets = lens.len();
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            let done = communicate(&mut x, rx, buckets);
            (x, done)
        });
        let ran = backward(&mut feed);
        // Whatever happened, every bucket is handed over so every worker's collectives match.
        for b in feed.unsent() {
            let _ = feed.send(b, vec![0.0; lens[b]]);
        }
        drop(feed);
        let _waits = ComputeWaits::start();
        let (x, done) =
            worker.join().map_err(|_| OverlapError::Backward("the communication thread panicked".into()))?;
        ran?;
        done?;
        x.0.count_overlapped_step();
        Ok(())
    })
}

/// An exchange, moved to a communication thread for a while (the backend's thread does not touch it meanwhile:
/// it only hands over buffers): the backward pass here, a ZeRO-3 pass in [`crate::prefetch`].
pub(crate) struct Sendable<'a, T: ?Sized>(pub(crate) &'a mut T);

// SAFETY: the exchange is used by exactly one thread at a time: the communication thread from its spawn to its
// join, which `exchange_during` and `with_unit_queue` wait for before returning the borrow. Linked are
// initialised for calls from any one thread at a time (MPI_THREAD_SERIALIZED; NCCL's process group and the
// in-process engine are thread-safe).
unsafe impl<T: ?Sized> Send for Sendable<'_, T> {}

fn communicate(
    x: &mut Sendable<'_, dyn Overlapped + '_>,
    rx: Receiver<(usize, Vec<f32>)>,
    buckets: usize,
) -> Result<(), OverlapError> {
    let mut pending: Vec<Option<Vec<f32>>> = (0..buckets).map(|_| None).collect();
    let mut next = 0;
    while next < buckets {
        let Ok((b, values)) = rx.recv() else {
            return Err(OverlapError::Backward(format!(
                "the backward pass ended before bucket {next} was handed over"
            )));
        };
        pending[b] = Some(values);
        while let Some(values) = pending.get_mut(next).and_then(Option::take) {
            x.0.exchange_bucket(next, &values)?;
            next += 1;
        }
    }
    Ok(())
}
