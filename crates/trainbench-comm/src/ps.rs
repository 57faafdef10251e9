//! A worker's side of the parameter-server protocol: [`PsWorkerExchange`] pushes each tensor's gradient to the
//! server that owns it and pulls the updated weights back (the server's side is `server.rs`).

use trainbench_graph::graph::Graph;

use crate::communicator::{CommError, Communicator, EngineInfo};
use crate::exchange::{ExchangeStats, GradientExchange, StepExchange, StopWish};
use crate::layout::Layout;
use crate::strategy::DataParallel;

/// Message tags of the parameter-server protocol.
pub(crate) const TAG_PUSH: u16 = 11;
/// Tag of the servers' replies (updated weights and the agreed stop flag).
pub(crate) const TAG_PULL: u16 = 12;

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
