//! ZeRO's sharding: the trained tensors cut into [`Unit`]s (flat buffers, each padded to a multiple of the
//! workers), every worker owning one block of each unit. [`ShardedExchange`] reduce-scatters gradients into
//! the owned blocks, updates them with the owned optimizer state ([`HostOptimizer`], PyTorch's rules) and
//! all-gathers the weights back: stages 1 and 2 after the backward pass, stage 3 unit by unit as the backend
//! needs each unit's weights ([`Sharded`]).

use trainbench_graph::graph::Graph;
use trainbench_graph::training::OptimizerSpec;

use crate::communicator::{CommError, Communicator, EngineInfo};
use crate::exchange::{
    ExchangeStats, GradientExchange, Overlapped, ShardHeld, Sharded, StepExchange, StopWish, agree_on_stop,
};
use crate::layout::Layout;
use crate::optim::HostOptimizer;
use crate::strategy::DataParallel;
pub use crate::units::{TiedAcrossBlocks, Unit, units_by_block, units_by_size};

/// ZeRO data parallelism (stages 1-3) over a group whose every rank is a worker.
pub struct ShardedExchange<'c> {
    comm: &'c mut dyn Communicator,
    strategy: DataParallel,
    layout: Layout,
    units: Vec<Unit>,
    /// The units the last first: the buckets of an overlapped exchange (stages 1 and 2).
    reversed: Vec<Unit>,
    /// Offset of each unit's owned block in `master` and `grads`.
    at: Vec<usize>,
    master: Vec<f32>,
    grads: Vec<f32>,
    optimizer: HostOptimizer,
    initialised: bool,
    /// Scratch: one padded unit.
    padded: Vec<f32>,
    packed: Vec<f32>,
    stats: ExchangeStats,
    /// The last step's gradient shard, as the sum of its squares per tensor ([`Layout`] index).
    shard_squares: Vec<f64>,
}

impl<'c> ShardedExchange<'c> {
    /// An exchange over `comm` for `graph`'s trained tensors: `strategy` is [`DataParallel::Zero1`], `Zero2`
    /// or `Zero3`; stages 1 and 2 cut units of at most `bucket_bytes`, stage 3 one per block.
    pub fn new(
        comm: &'c mut dyn Communicator,
        graph: &Graph,
        strategy: DataParallel,
        optimizer: &OptimizerSpec,
        bucket_bytes: u64,
    ) -> Result<Self, CommError> {
        Self::with_layout(comm, (graph, Layout::of(graph)), strategy, optimizer, bucket_bytes)
    }

    /// A ZeRO stage over the tensors of `layout` only, a subset of `graph`'s (expert parallelism leaves the
    /// experts' out, their gradients summed over their own replicas): stages 1 and 2 in units of at most
    /// `bucket_bytes`, stage 3 one unit per block of `graph` holding that subset's tensors.
    pub fn with_layout(
        comm: &'c mut dyn Communicator,
        (graph, layout): (&Graph, Layout),
        strategy: DataParallel,
        optimizer: &OptimizerSpec,
        bucket_bytes: u64,
    ) -> Result<Self, CommError> {
        let units = match strategy {
            DataParallel::Zero3 => {
                let refuse = |message: String| CommError { engine: comm.engine().name, message };
                Some(units_by_block(graph, &layout, comm.size()).map_err(|e| refuse(e.to_string()))?)
            }
            _ => None,
        };
        Self::cut(comm, layout, units, strategy, optimizer, bucket_bytes)
    }

    /// The exchange over `layout` cut into `units` (stage 3's), or into units of at most `bucket_bytes`.
    fn cut(
        comm: &'c mut dyn Communicator,
        layout: Layout,
        units: Option<Vec<Unit>>,
        strategy: DataParallel,
        optimizer: &OptimizerSpec,
        bucket_bytes: u64,
    ) -> Result<Self, CommError> {
        let engine = comm.engine().name;
        let refuse = |message: String| CommError { engine: engine.clone(), message };
        let workers = comm.size();
        let units = match (strategy, units) {
            (DataParallel::Zero3, Some(units)) => units,
            (DataParallel::Zero1 | DataParallel::Zero2, None) => units_by_size(&layout, bucket_bytes, workers),
            (DataParallel::Zero3, None) => return Err(refuse("ZeRO-3 cuts its units by the graph's blocks".into())),
            (other, _) => return Err(refuse(format!("`{}` is not a ZeRO stage", other.name()))),
        };
        let mut at = Vec::with_capacity(units.len());
        let mut owned = 0usize;
        for u in &units {
            at.push(owned);
            owned += u.block;
        }
        Ok(ShardedExchange {
            comm,
            strategy,
            layout,
            reversed: units.iter().rev().cloned().collect(),
            units,
            at,
            master: vec![0.0; owned],
            grads: vec![0.0; owned],
            optimizer: HostOptimizer::new(optimizer),
            initialised: false,
            padded: Vec::new(),
            packed: Vec::new(),
            stats: ExchangeStats::default(),
            shard_squares: Vec::new(),
        })
    }

    /// Bytes a ring collective over `elements` padded values sends per worker: (W-1)/W of them.
    fn ring_share(&self, elements: usize) -> u64 {
        let w = self.comm.size() as u64;
        (w - 1) * 4 * elements as u64 / w
    }
}

impl Sharded for ShardedExchange<'_> {
    fn stage(&self) -> u8 {
        self.strategy.zero_stage().unwrap_or(0)
    }

    fn units(&self) -> &[Unit] {
        &self.units
    }

    fn initialised(&self) -> bool {
        self.initialised
    }

    fn init(&mut self, weights: &[f32]) {
        let (rank, layout) = (self.comm.rank(), &self.layout);
        for (u, unit) in self.units.iter().enumerate() {
            self.packed.resize(unit.padded(self.comm.size()), 0.0);
            self.packed.fill(0.0);
            unit.pack(layout, weights, &mut self.packed[..unit.len]);
            let mine = &self.packed[rank * unit.block..(rank + 1) * unit.block];
            self.master[self.at[u]..self.at[u] + unit.block].copy_from_slice(mine);
        }
        self.initialised = true;
    }

    fn reduce(&mut self, unit: usize, grads: &[f32]) -> Result<(), CommError> {
        let t = std::time::Instant::now();
        let u = &self.units[unit];
        let workers = self.comm.size();
        self.padded.resize(u.padded(workers), 0.0);
        self.padded[..u.len].copy_from_slice(grads);
        self.padded[u.len..].fill(0.0);
        self.packed.resize(u.block, 0.0);
        self.comm.reduce_scatter_sum(&self.padded, &mut self.packed)?;
        let at = self.at[unit];
        self.grads[at..at + u.block].iter_mut().zip(&self.packed).for_each(|(g, r)| *g += r);
        let moved = self.ring_share(u.padded(workers));
        self.stats.reduce_scatter_bytes += moved;
        self.stats.count_collective(moved, t);
        Ok(())
    }

    fn step(&mut self, wish: StopWish) -> Result<StepExchange, CommError> {
        let inv = 1.0 / self.comm.size() as f32;
        self.grads.iter_mut().for_each(|g| *g *= inv);
        self.shard_squares = self.squares_by_tensor();
        self.optimizer.step(&mut self.master, &self.grads);
        self.grads.fill(0.0);
        agree_on_stop(self.comm, wish, &mut self.stats, true)
    }

    fn gather(&mut self, unit: usize, out: &mut [f32]) -> Result<(), CommError> {
        let t = std::time::Instant::now();
        let u = &self.units[unit];
        let workers = self.comm.size();
        self.padded.resize(u.padded(workers), 0.0);
        let at = self.at[unit];
        self.comm.all_gather(&self.master[at..at + u.block], &mut self.padded)?;
        out.copy_from_slice(&self.padded[..u.len]);
        let moved = self.ring_share(u.padded(workers));
        self.stats.all_gather_bytes += moved;
        self.stats.count_collective(moved, t);
        Ok(())
    }

    fn counted(&self) -> ExchangeStats {
        self.stats
    }

    fn restore_counted(&mut self, stats: ExchangeStats) {
        self.stats = stats;
    }

    fn held(&self) -> ShardHeld {
        ShardHeld {
            weights_shard: 4 * self.master.len() as u64,
            gradient_shard: 4 * self.grads.len() as u64,
            optimizer_state: self.optimizer.state_bytes(),
        }
    }

    fn gradient_squares(&self, weight: &dyn Fn(usize) -> f64) -> f64 {
        self.shard_squares.iter().enumerate().map(|(i, s)| weight(i) * s).sum()
    }

    fn engine_name(&self) -> String {
        self.comm.engine().name
    }

    fn count_prefetched_step(&mut self) {
        self.stats.overlapped_steps += 1;
    }
}

impl GradientExchange for ShardedExchange<'_> {
    fn worker(&self) -> usize {
        self.comm.rank()
    }
    fn workers(&self) -> usize {
        self.comm.size()
    }
    fn strategy(&self) -> DataParallel {
        self.strategy
    }
    fn engine(&self) -> EngineInfo {
        self.comm.engine()
    }
    fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The whole step at once (what stages 1 and 2 do after backward): on the first call `weights` must hold
    /// the current weights; every unit's gradients are reduce-scattered, last unit first, the owned shard
    /// stepped, and every unit's weights gathered into `weights`.
    fn exchange(
        &mut self,
        grads: &mut Vec<f32>,
        weights: &mut [f32],
        wish: StopWish,
    ) -> Result<StepExchange, CommError> {
        if !self.initialised {
            self.init(weights);
        }
        let mut packed = Vec::new();
        for u in (0..self.units.len()).rev() {
            packed.resize(self.units[u].len, 0.0);
            self.units[u].pack(&self.layout, grads, &mut packed);
            self.reduce(u, &packed)?;
        }
        self.step_and_gather(weights, wish)
    }

    fn stats(&self) -> ExchangeStats {
        self.stats
    }

    fn sharded(&mut self) -> Option<&mut dyn Sharded> {
        Some(self)
    }

    /// Stages 1 and 2 reduce-scatter during the backward pass; stage 3 exchanges block by block instead.
    fn overlapped(&mut self) -> Option<&mut dyn Overlapped> {
        if self.strategy == DataParallel::Zero3 { None } else { Some(self) }
    }
}

impl ShardedExchange<'_> {
    /// The gradient shard's squares summed per tensor ([`Layout`] index): each unit's owned block is the
    /// slice `rank x block ..` of the unit's tensors laid end to end (its padding belongs to none).
    fn squares_by_tensor(&self) -> Vec<f64> {
        let mut squares = vec![0.0; self.layout.decls.len()];
        let rank = self.comm.rank();
        for (u, unit) in self.units.iter().enumerate() {
            let owned = rank * unit.block..(rank + 1) * unit.block;
            let mut start = 0;
            for &t in &unit.tensors {
                let end = start + self.layout.len_of(t);
                let (from, to) = (start.max(owned.start), end.min(owned.end));
                if from < to {
                    let at = self.at[u] + from - owned.start;
                    let values = &self.grads[at..at + to - from];
                    squares[t] += values.iter().map(|&g| f64::from(g) * f64::from(g)).sum::<f64>();
                }
                start = end;
            }
        }
        squares
    }

    /// Step the shard, then gather every unit's weights into `weights` (flat, layout order).
    fn step_and_gather(&mut self, weights: &mut [f32], wish: StopWish) -> Result<StepExchange, CommError> {
        let step = self.step(wish)?;
        let mut packed = Vec::new();
        for u in 0..self.units.len() {
            packed.resize(self.units[u].len, 0.0);
            self.gather(u, &mut packed)?;
            self.units[u].unpack(&self.layout, &packed, weights);
        }
        Ok(step)
    }
}

impl Overlapped for ShardedExchange<'_> {
    fn buckets(&self) -> &[Unit] {
        &self.reversed
    }

    fn exchange_bucket(&mut self, bucket: usize, values: &[f32]) -> Result<(), CommError> {
        let unit = self.units.len() - 1 - bucket;
        self.reduce(unit, values)
    }

    fn count_overlapped_step(&mut self) {
        self.stats.overlapped_steps += 1;
    }

    fn finish(
        &mut self,
        _grads: &mut Vec<f32>,
        weights: &mut [f32],
        wish: StopWish,
    ) -> Result<StepExchange, CommError> {
        self.step_and_gather(weights, wish)
    }
}
