//! What a worker does with its gradients after backward, as the backends see it: the [`GradientExchange`] a
//! backend calls after its backward pass, the ZeRO calls unit by unit ([`Sharded`]) and the bucket calls during
//! the backward pass ([`Overlapped`]), what a step's exchange decided ([`StepExchange`]) and its traffic
//! ([`ExchangeStats`]). The strategies implementing them sit above: `all_reduce.rs`, `ps.rs`, `sharded.rs`. All
//! agree on stopping: any worker's wish to stop ends the run for all after the step.

use crate::communicator::{CommError, Communicator, EngineInfo};
use crate::layout::Layout;
use crate::strategy::DataParallel;
use crate::units::Unit;

/// Bytes per all-reduce bucket and per ZeRO-1/2 unit unless `topology.bucket_mb` says otherwise (PyTorch
/// DDP's default cap).
pub const BUCKET_BYTES: u64 = 25 * 1024 * 1024;

/// A worker's wish after a step, agreed over all workers in the step's exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StopWish {
    /// Train on.
    #[default]
    Continue,
    /// This worker's budget (iterations or seconds) ends with this step: a normal end.
    Finished,
    /// This worker was stopped (Ctrl-C, `run.timeout_s`): the run ends early, and is marked interrupted.
    Interrupted,
}

impl StopWish {
    /// The wish as the two flags the exchange sums or ORs: `[finished, interrupted]`.
    pub(crate) fn flags(self) -> [f32; 2] {
        [f32::from(u8::from(self == StopWish::Finished)), f32::from(u8::from(self == StopWish::Interrupted))]
    }
}

/// What the exchange of one step decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepExchange {
    /// Some worker asked to stop: this was the last step, for every rank.
    pub stop: bool,
    /// Some worker was stopped early ([`StopWish::Interrupted`]): every rank marks its run interrupted, while a
    /// stop that only ends budgets is a normal end (workers' clocks differ, so a seconds budget ends on the
    /// first worker that reaches it).
    pub interrupted: bool,
    /// The exchange replaced the weights (parameter servers): the backend copies them in and skips its own
    /// optimizer step. Otherwise the gradients were replaced by their mean and the backend steps as usual.
    pub weights_updated: bool,
}

/// Traffic of one worker, summed over the steps exchanged so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ExchangeStats {
    /// Steps exchanged.
    pub steps: u64,
    /// Gradient/weight bytes this worker sent (the algorithm's, not the engine's internal traffic for
    /// all-reduce: see [`ExchangeStats::ring_bytes_per_step`]).
    pub bytes_sent: u64,
    /// Bytes it received.
    pub bytes_received: u64,
    /// Collective calls or messages it issued.
    pub messages: u64,
    /// Of `bytes_sent`: what its all-reduces sent (a ring's 2 (W-1)/W of the buffer).
    pub all_reduce_bytes: u64,
    /// Of `bytes_sent`: what its reduce-scatters sent ((W-1)/W of the padded buffer).
    pub reduce_scatter_bytes: u64,
    /// Of `bytes_sent`: what its all-gathers sent ((W-1)/W of the padded buffer).
    pub all_gather_bytes: u64,
    /// Seconds spent inside its gradient and weight collectives, hidden behind the backward pass or not (the
    /// step's `comm` phase is only what the step waited for).
    pub busy_s: f64,
    /// Steps whose buckets were exchanged during the backward pass.
    pub overlapped_steps: u64,
}

impl ExchangeStats {
    /// Count one collective that sent (and received) `moved` bytes and started at `since`; the caller adds
    /// `moved` to its kind's total.
    pub(crate) fn count_collective(&mut self, moved: u64, since: std::time::Instant) {
        self.bytes_sent += moved;
        self.bytes_received += moved;
        self.messages += 1;
        self.busy_s += since.elapsed().as_secs_f64();
    }

    /// What a ring all-reduce of `gradient_bytes` sends (and receives) per worker and step: 2 (W-1)/W x S.
    pub fn ring_bytes_per_step(gradient_bytes: u64, workers: usize) -> u64 {
        if workers <= 1 {
            return 0;
        }
        let w = workers as u64;
        2 * (w - 1) * gradient_bytes / w
    }
}

/// The end of a step every worker takes part in: the workers' wishes summed in one all-reduce, the step
/// counted; `weights_updated` says whether the exchange replaced the weights (ZeRO) or the gradients.
pub(crate) fn agree_on_stop(
    comm: &mut dyn Communicator,
    wish: StopWish,
    stats: &mut ExchangeStats,
    weights_updated: bool,
) -> Result<StepExchange, CommError> {
    let mut flag = [0.0f32; 2];
    comm.all_reduce_sum(&wish.flags(), &mut flag)?;
    stats.messages += 1;
    stats.steps += 1;
    let interrupted = flag[1] > 0.0;
    Ok(StepExchange { stop: flag[0] > 0.0 || interrupted, interrupted, weights_updated })
}

/// The one call a backend makes after backward in a data-parallel run.
pub trait GradientExchange {
    /// This worker's index in `0..workers()`: which slice of the global batch it trains on.
    fn worker(&self) -> usize;
    /// Workers in the run.
    fn workers(&self) -> usize;
    /// The strategy.
    fn strategy(&self) -> DataParallel;
    /// The engine.
    fn engine(&self) -> EngineInfo;
    /// The trained tensors, in the order `grads` and `weights` hold them.
    fn layout(&self) -> &Layout;
    /// Exchange one step's gradients: `grads` (flat, [`Layout`] order, this worker's batch mean) become the mean
    /// over the workers, or, with parameter servers, `weights` become the servers' updated weights. `wish` is
    /// this worker's wish after this step.
    fn exchange(
        &mut self,
        grads: &mut Vec<f32>,
        weights: &mut [f32],
        wish: StopWish,
    ) -> Result<StepExchange, CommError>;
    /// Traffic so far.
    fn stats(&self) -> ExchangeStats;
    /// The unit-by-unit calls of a ZeRO stage, which a backend makes instead of [`GradientExchange::exchange`]
    /// where it can (stage 3 needs them); `None` for the other strategies.
    fn sharded(&mut self) -> Option<&mut dyn Sharded> {
        None
    }
    /// The bucket-by-bucket calls of an exchange that can run during the backward pass
    /// ([`crate::overlap::exchange_during`]); `None` where it cannot.
    fn overlapped(&mut self) -> Option<&mut dyn Overlapped> {
        None
    }
}

/// What a worker of a sharded run holds of the model's state, in bytes of the buffers it keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardHeld {
    /// Its `f32` shard of the weights (the master copy the optimizer updates).
    pub weights_shard: u64,
    /// Its shard of the mean gradients.
    pub gradient_shard: u64,
    /// Its optimizer state (momentum, moments) over the shard.
    pub optimizer_state: u64,
}

/// The ZeRO side of an exchange: what a backend calls unit by unit.
pub trait Sharded {
    /// 1, 2 or 3.
    fn stage(&self) -> u8;
    /// The units, in the order [`crate::units::units_by_size`] or [`crate::units::units_by_block`] gives.
    fn units(&self) -> &[Unit];
    /// Whether [`Sharded::init`] was called.
    fn initialised(&self) -> bool;
    /// Keep this worker's shard of `weights` (every trained tensor, flat, [`Layout`] order, the same on every
    /// worker): the master copy from here on.
    fn init(&mut self, weights: &[f32]);
    /// Reduce-scatter unit `unit`'s gradients (`Unit::len` values, this worker's mean over its batch): the
    /// sum over the workers of the owned block is added to this worker's gradient shard.
    fn reduce(&mut self, unit: usize, grads: &[f32]) -> Result<(), CommError>;
    /// End the step: the gradient shard becomes the mean over the workers, the optimizer updates the owned
    /// weights, and the workers agree on stopping. Unreduced units count as zero gradients.
    fn step(&mut self, wish: StopWish) -> Result<StepExchange, CommError>;
    /// All-gather unit `unit`'s weights (`Unit::len` values) into `out`.
    fn gather(&mut self, unit: usize, out: &mut [f32]) -> Result<(), CommError>;
    /// As [`Sharded::gather`], after the last step (to report the whole model's weights): not counted in the
    /// traffic of the steps.
    fn gather_final(&mut self, unit: usize, out: &mut [f32]) -> Result<(), CommError> {
        let before = self.counted();
        self.gather(unit, out)?;
        self.restore_counted(before);
        Ok(())
    }
    /// The traffic counted so far (for [`Sharded::gather_final`]).
    fn counted(&self) -> ExchangeStats;
    /// Put the traffic counted back to `stats`.
    fn restore_counted(&mut self, stats: ExchangeStats);
    /// The buffers this worker holds.
    fn held(&self) -> ShardHeld;
    /// The gradient shard the last [`Sharded::step`] stepped with (the mean over the workers) as the sum of
    /// its squares, each tensor's values ([`Layout`] index) weighted by `weight`.
    fn gradient_squares(&self, weight: &dyn Fn(usize) -> f64) -> f64;
    /// The engine's name (for errors).
    fn engine_name(&self) -> String;
    /// Count a stage-3 step whose collectives ran beside the computation ([`crate::prefetch`]) as overlapped
    /// ([`ExchangeStats::overlapped_steps`]).
    fn count_prefetched_step(&mut self);
}

/// An exchange whose bucket collectives can run during the backward pass.
pub trait Overlapped: GradientExchange {
    /// The buckets in the order the backward pass completes them (the last tensors first).
    fn buckets(&self) -> &[Unit];
    /// Exchange bucket `bucket`'s gradients `values` (on the communication thread).
    fn exchange_bucket(&mut self, bucket: usize, values: &[f32]) -> Result<(), CommError>;
    /// Count a step whose buckets went during the backward pass ([`crate::ExchangeStats::overlapped_steps`]).
    fn count_overlapped_step(&mut self);
    /// After the backward pass and every bucket: all-reduce averages into `grads` (flat, layout order); ZeRO
    /// steps its shard and gathers the weights into `weights`; both agree on stopping.
    fn finish(&mut self, grads: &mut Vec<f32>, weights: &mut [f32], wish: StopWish) -> Result<StepExchange, CommError>;
}
