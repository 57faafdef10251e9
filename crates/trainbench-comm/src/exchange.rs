//! What a worker does with its gradients after backward: [`AllReduceExchange`] (sum over the workers in buckets,
//! then average) or [`PsWorkerExchange`] (push each tensor's gradient to the server that owns it, pull the
//! updated weights back). Both agree on stopping: any worker's wish to stop ends the run for all after the step.

use super::overlap::Overlapped;
use super::sharded::{Sharded, Unit, units_by_size};
use super::{CommError, Communicator, DataParallel, EngineInfo};
use trainbench_graph::graph::{Graph, NodeId};
use trainbench_graph::params::{ParamDecl, graph_tensors};

/// Message tags of the parameter-server protocol.
pub(crate) const TAG_PUSH: u16 = 11;
/// Tag of the servers' replies (updated weights and the agreed stop flag).
pub(crate) const TAG_PULL: u16 = 12;

/// Bytes per all-reduce bucket and per ZeRO-1/2 unit unless `topology.bucket_mb` says otherwise (PyTorch
/// DDP's default cap).
pub const BUCKET_BYTES: u64 = 25 * 1024 * 1024;

/// The trained tensors of a graph in the order every backend holds them ([`graph_tensors`], buffers and tied
/// weights excluded), and how parameter servers share them.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// Each trained tensor's declaration, in order.
    pub decls: Vec<ParamDecl>,
    /// The node that owns each tensor.
    pub nodes: Vec<NodeId>,
    /// Offset of each tensor in the flat buffer.
    pub offsets: Vec<usize>,
    /// Elements in all.
    pub total: usize,
}

impl Layout {
    /// The layout of `graph`'s trained tensors.
    pub fn of(graph: &Graph) -> Self {
        let (nodes, decls): (Vec<NodeId>, Vec<ParamDecl>) =
            graph_tensors(graph).into_iter().filter(|(_, d)| d.trainable()).unzip();
        let mut offsets = Vec::with_capacity(decls.len());
        let mut total = 0usize;
        for d in &decls {
            offsets.push(total);
            total += d.numel() as usize;
        }
        Layout { decls, nodes, offsets, total }
    }

    /// Elements of tensor `i`.
    pub fn len_of(&self, i: usize) -> usize {
        self.decls[i].numel() as usize
    }

    /// The server (0-based among `servers`) that owns each tensor: largest tensors first, each to the server
    /// holding the fewest elements so far (ties to the lowest index), so shards stay balanced.
    pub fn shard_owners(&self, servers: usize) -> Vec<usize> {
        let servers = servers.max(1);
        let mut order: Vec<usize> = (0..self.decls.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(self.len_of(i)), i));
        let mut load = vec![0usize; servers];
        let mut owner = vec![0usize; self.decls.len()];
        for i in order {
            let s = (0..servers).min_by_key(|&s| (load[s], s)).unwrap_or(0);
            owner[i] = s;
            load[s] += self.len_of(i);
        }
        owner
    }

    /// Tensors owned by server `s`, in layout order.
    pub fn shard(&self, owners: &[usize], s: usize) -> Vec<usize> {
        (0..self.decls.len()).filter(|&i| owners[i] == s).collect()
    }
}

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
    fn flags(self) -> [f32; 2] {
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
        let layout = Layout::of(graph);
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

/// A worker of a parameter-server run: ranks `0..workers` are workers, `workers..workers + servers` servers.
pub struct PsWorkerExchange<'c> {
    comm: &'c mut dyn Communicator,
    layout: Layout,
    workers: usize,
    servers: usize,
    /// For each server, the tensors it owns.
    shards: Vec<Vec<usize>>,
    buf: Vec<f32>,
    stats: ExchangeStats,
}

impl<'c> PsWorkerExchange<'c> {
    /// A worker's side of the protocol; `comm` holds `workers + servers` ranks.
    pub fn new(comm: &'c mut dyn Communicator, graph: &Graph, servers: usize) -> Result<Self, CommError> {
        let servers = servers.max(1);
        let workers = comm.size().saturating_sub(servers);
        if workers == 0 || comm.rank() >= workers {
            return Err(CommError {
                engine: comm.engine().name,
                message: format!(
                    "rank {} of {} is not a worker of a run with {servers} parameter server(s)",
                    comm.rank(),
                    comm.size()
                ),
            });
        }
        let layout = Layout::of(graph);
        let owners = layout.shard_owners(servers);
        let shards = (0..servers).map(|s| layout.shard(&owners, s)).collect();
        Ok(PsWorkerExchange {
            comm,
            layout,
            workers,
            servers,
            shards,
            buf: Vec::new(),
            stats: ExchangeStats::default(),
        })
    }
}

impl GradientExchange for PsWorkerExchange<'_> {
    fn worker(&self) -> usize {
        self.comm.rank()
    }
    fn workers(&self) -> usize {
        self.workers
    }
    fn strategy(&self) -> DataParallel {
        DataParallel::ParameterServer { servers: self.servers }
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
        weights: &mut [f32],
        wish: StopWish,
    ) -> Result<StepExchange, CommError> {
        let layout = &self.layout;
        // Push: one message per server, its tensors' gradients packed in layout order, then the wish's two flags.
        for (s, shard) in self.shards.iter().enumerate() {
            self.buf.clear();
            for &i in shard {
                let o = layout.offsets[i];
                self.buf.extend_from_slice(&grads[o..o + layout.len_of(i)]);
            }
            self.buf.extend_from_slice(&wish.flags());
            self.comm.send(self.workers + s, TAG_PUSH, &self.buf)?;
            self.stats.bytes_sent += 4 * (self.buf.len() as u64 - 2);
            self.stats.messages += 1;
        }
        // Pull: the shard's updated weights, then the two flags every server agreed on.
        let (mut agreed, mut interrupted) = (false, false);
        for (s, shard) in self.shards.iter().enumerate() {
            let n: usize = shard.iter().map(|&i| layout.len_of(i)).sum();
            self.buf.resize(n + 2, 0.0);
            self.comm.recv(self.workers + s, TAG_PULL, &mut self.buf)?;
            let mut at = 0;
            for &i in shard {
                let (o, len) = (layout.offsets[i], layout.len_of(i));
                weights[o..o + len].copy_from_slice(&self.buf[at..at + len]);
                at += len;
            }
            agreed |= self.buf[n] > 0.0;
            interrupted |= self.buf[n + 1] > 0.0;
            self.stats.bytes_received += 4 * n as u64;
            self.stats.messages += 1;
        }
        self.stats.steps += 1;
        Ok(StepExchange { stop: agreed || interrupted, interrupted, weights_updated: true })
    }

    fn stats(&self) -> ExchangeStats {
        self.stats
    }
}
