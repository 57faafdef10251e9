//! ZeRO's sharding: the trained tensors cut into [`Unit`]s (flat buffers, each padded to a multiple of the
//! workers), every worker owning one block of each unit. [`ShardedExchange`] reduce-scatters gradients into
//! the owned blocks, updates them with the owned optimizer state ([`HostOptimizer`], PyTorch's rules) and
//! all-gathers the weights back: stages 1 and 2 after the backward pass, stage 3 unit by unit as the backend
//! needs each unit's weights ([`Sharded`]).

use trainbench_graph::graph::Graph;
use trainbench_graph::params::is_tied;
use trainbench_graph::training::OptimizerSpec;

use super::exchange::{ExchangeStats, GradientExchange, Layout, StepExchange, StopWish, agree_on_stop};
use super::optim::HostOptimizer;
use super::overlap::Overlapped;
use super::{CommError, Communicator, DataParallel, EngineInfo};

/// One flat buffer of whole trained tensors, sharded over the workers: worker `r` owns elements
/// `r * block .. (r + 1) * block` of the buffer padded (with zeros) to `block * workers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// `root` (the tensors outside every block), a block's name scope (`layers.3`), or `bucket<i>`.
    pub name: String,
    /// The tensors of the unit ([`Layout`] indices), in order.
    pub tensors: Vec<usize>,
    /// Elements of those tensors.
    pub len: usize,
    /// Elements each worker owns.
    pub block: usize,
    /// For a block's unit: its index in [`Graph::blocks`].
    pub graph_block: Option<usize>,
}

impl Unit {
    fn new(name: String, tensors: Vec<usize>, layout: &Layout, workers: usize, graph_block: Option<usize>) -> Self {
        let len: usize = tensors.iter().map(|&i| layout.len_of(i)).sum();
        Unit { name, tensors, len, block: len.div_ceil(workers.max(1)), graph_block }
    }

    /// Elements of the padded buffer (`block` x workers).
    pub fn padded(&self, workers: usize) -> usize {
        self.block * workers
    }

    /// This unit's elements of a flat buffer in [`Layout`] order, packed into `out` (`len` long).
    pub fn pack(&self, layout: &Layout, flat: &[f32], out: &mut [f32]) {
        let mut at = 0;
        for &i in &self.tensors {
            let (o, n) = (layout.offsets[i], layout.len_of(i));
            out[at..at + n].copy_from_slice(&flat[o..o + n]);
            at += n;
        }
    }

    /// The inverse of [`Unit::pack`]: `packed` (`len` long) into this unit's places of `flat`.
    pub fn unpack(&self, layout: &Layout, packed: &[f32], flat: &mut [f32]) {
        let mut at = 0;
        for &i in &self.tensors {
            let (o, n) = (layout.offsets[i], layout.len_of(i));
            flat[o..o + n].copy_from_slice(&packed[at..at + n]);
            at += n;
        }
    }
}

/// ZeRO-1/2's units: consecutive tensors in layout order, each unit at most `bucket_bytes` of `f32` (a larger
/// tensor is a unit of its own).
pub fn units_by_size(layout: &Layout, bucket_bytes: u64, workers: usize) -> Vec<Unit> {
    let cap = (bucket_bytes / 4).max(1) as usize;
    let mut units = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut size = 0usize;
    for i in 0..layout.decls.len() {
        let n = layout.len_of(i);
        if !current.is_empty() && size + n > cap {
            let name = format!("bucket{}", units.len());
            units.push(Unit::new(name, std::mem::take(&mut current), layout, workers, None));
            size = 0;
        }
        current.push(i);
        size += n;
    }
    if !current.is_empty() {
        units.push(Unit::new(format!("bucket{}", units.len()), current, layout, workers, None));
    }
    units
}

/// ZeRO-3's units, as FSDP wraps a model: one per recomputable block ([`Graph::blocks`]) with the tensors of
/// its nodes, then `root` with every other tensor (first in the list). A model without blocks is one unit.
/// Refused: a tied weight that would join two units (its tensor would be freed while the other one reads it).
pub fn units_by_block(graph: &Graph, layout: &Layout, workers: usize) -> Result<Vec<Unit>, String> {
    let mut owner: Vec<Option<usize>> = vec![None; graph.nodes.len()];
    for (b, block) in graph.blocks.iter().enumerate() {
        for slot in &mut owner[block.first..=block.last] {
            *slot = Some(b);
        }
    }
    for (id, node) in graph.nodes.iter().enumerate() {
        if let Some(to) = node.tied_to {
            let tied = trainbench_graph::params::tensors(node).iter().any(|d| is_tied(node, d));
            if tied && owner[id] != owner[to] {
                return Err(format!(
                    "`{}` is tied to `{}` across a block boundary; ZeRO-3 shards each block's weights on its own",
                    node.name, graph.nodes[to].name
                ));
            }
        }
    }
    let mut root = Vec::new();
    let mut blocks: Vec<Vec<usize>> = vec![Vec::new(); graph.blocks.len()];
    for (i, &node) in layout.nodes.iter().enumerate() {
        match owner[node] {
            Some(b) => blocks[b].push(i),
            None => root.push(i),
        }
    }
    let mut units = vec![Unit::new("root".into(), root, layout, workers, None)];
    for (b, tensors) in blocks.into_iter().enumerate() {
        if !tensors.is_empty() {
            units.push(Unit::new(graph.blocks[b].name.clone(), tensors, layout, workers, Some(b)));
        }
    }
    Ok(units)
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
    /// The units, in the order [`units_by_size`] or [`units_by_block`] gives.
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
    /// The engine's name (for errors).
    fn engine_name(&self) -> String;
    /// Count a stage-3 step whose collectives ran beside the computation ([`crate::prefetch`]) as overlapped
    /// ([`ExchangeStats::overlapped_steps`]).
    fn count_prefetched_step(&mut self);
}

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
        let engine = comm.engine().name;
        let refuse = |message: String| CommError { engine: engine.clone(), message };
        let workers = comm.size();
        let layout = Layout::of(graph);
        let units = match strategy {
            DataParallel::Zero1 | DataParallel::Zero2 => units_by_size(&layout, bucket_bytes, workers),
            DataParallel::Zero3 => units_by_block(graph, &layout, workers).map_err(refuse)?,
            other => return Err(refuse(format!("`{}` is not a ZeRO stage", other.name()))),
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
