//! All-reduce data parallelism: [`AllReduceExchange`] sums every worker's gradients in buckets (after the
//! backward pass, or during it through [`Overlapped`]), then averages them.

use trainbench_graph::graph::Graph;

use crate::communicator::{CommError, Communicator, EngineInfo};
use crate::exchange::{ExchangeStats, GradientExchange, Overlapped, StepExchange, StopWish, agree_on_stop};
use crate::layout::Layout;
use crate::strategy::DataParallel;
use crate::units::{Unit, units_by_size};

/// All-reduce data parallelism over a group whose every rank is a worker.
pub struct AllReduceExchange<'c> {
    comm: &'c mut dyn Communicator,
    layout: Layout,
    /// The buckets, whole tensors, the last first: exchanged during the backward pass, or after it in order.
    buckets: Vec<Unit>,
    scratch: Vec<f32>,
    stats: ExchangeStats,
}

impl<'c> AllReduceExchange<'c> {
    /// An exchange over `comm` (every rank a worker) for `graph`'s trained tensors, in buckets of
    /// `bucket_bytes`.
    pub fn new(comm: &'c mut dyn Communicator, graph: &Graph, bucket_bytes: u64) -> Self {
        Self::with_layout(comm, Layout::of(graph), bucket_bytes)
    }

    /// An exchange over `comm` for the tensors of `layout` only (an expert-parallel run's non-expert tensors:
    /// [`Layout::without_experts`]).
    pub fn with_layout(comm: &'c mut dyn Communicator, layout: Layout, bucket_bytes: u64) -> Self {
        let mut buckets = units_by_size(&layout, bucket_bytes, 1);
        buckets.reverse();
        AllReduceExchange { comm, layout, buckets, scratch: Vec::new(), stats: ExchangeStats::default() }
    }
}

impl GradientExchange for AllReduceExchange<'_> {
    fn worker(&self) -> usize {
        self.comm.rank()
    }
    fn workers(&self) -> usize {
        self.comm.size()
    }
    fn strategy(&self) -> DataParallel {
        DataParallel::AllReduce
    }
    fn engine(&self) -> EngineInfo {
        self.comm.engine()
    }
    fn layout(&self) -> &Layout {
        &self.layout
    }

    fn exchange(
        &mut self,
        grads: &mut Vec<f32>,
        _weights: &mut [f32],
        wish: StopWish,
    ) -> Result<StepExchange, CommError> {
        // The same buckets, in the same order, as during a backward pass.
        for b in 0..self.buckets.len() {
            let range = self.range_of(b);
            let values = grads.get(range.clone()).ok_or_else(|| CommError {
                engine: self.comm.engine().name,
                message: format!("{} gradients for a layout of {}", grads.len(), self.layout.total),
            })?;
            self.exchange_bucket(b, values)?;
        }
        self.average_and_agree(grads, wish)
    }

    fn stats(&self) -> ExchangeStats {
        self.stats
    }

    fn overlapped(&mut self) -> Option<&mut dyn Overlapped> {
        Some(self)
    }
}

impl AllReduceExchange<'_> {
    /// Where bucket `b` lies in the flat buffer: consecutive whole tensors are one contiguous range.
    fn range_of(&self, b: usize) -> std::ops::Range<usize> {
        let unit = &self.buckets[b];
        let start = unit.tensors.first().map_or(0, |&i| self.layout.offsets[i]);
        start..start + unit.len
    }

    /// The sums in `scratch` become the mean in `grads`; the workers agree on stopping.
    fn average_and_agree(&mut self, grads: &mut Vec<f32>, wish: StopWish) -> Result<StepExchange, CommError> {
        std::mem::swap(grads, &mut self.scratch);
        let inv = 1.0 / self.comm.size() as f32;
        grads.iter_mut().for_each(|g| *g *= inv);
        self.agree(wish)
    }

    /// The workers agree on stopping; the step is counted.
    fn agree(&mut self, wish: StopWish) -> Result<StepExchange, CommError> {
        agree_on_stop(self.comm, wish, &mut self.stats, false)
    }
}

impl Overlapped for AllReduceExchange<'_> {
    fn buckets(&self) -> &[Unit] {
        &self.buckets
    }

    fn exchange_bucket(&mut self, bucket: usize, values: &[f32]) -> Result<(), CommError> {
        let t = std::time::Instant::now();
        self.scratch.resize(self.layout.total, 0.0);
        // Summed into place in the flat buffer.
        let range = self.range_of(bucket);
        if values.len() != range.len() {
            return Err(CommError {
                engine: self.comm.engine().name,
                message: format!("bucket {bucket} of {} values handed {}", range.len(), values.len()),
            });
        }
        self.comm.all_reduce_sum(values, &mut self.scratch[range])?;
        let moved = ExchangeStats::ring_bytes_per_step(4 * values.len() as u64, self.comm.size());
        self.stats.all_reduce_bytes += moved;
        self.stats.count_collective(moved, t);
        Ok(())
    }

    fn count_overlapped_step(&mut self) {
        self.stats.overlapped_steps += 1;
    }

    /// The mean is written into `grads` (the sums stay in the exchange's buffer for the next step).
    fn finish(
        &mut self,
        grads: &mut Vec<f32>,
        _weights: &mut [f32],
        wish: StopWish,
    ) -> Result<StepExchange, CommError> {
        let inv = 1.0 / self.comm.size() as f32;
        grads.clear();
        grads.extend(self.scratch.iter().map(|g| g * inv));
        self.agree(wish)
    }
}
