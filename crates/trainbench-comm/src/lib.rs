//! Data-parallel training across ranks: the engine interface ([`Communicator`]: MPI for CPU ranks, NCCL for
//! CUDA ranks), the strategies built on it (ring all-reduce of gradients, sharded parameter servers, ZeRO's
//! sharded optimizer state, gradients and weights) and the one call a backend makes after its backward pass
//! ([`GradientExchange::exchange`]; the ZeRO stages through [`GradientExchange::sharded`]).
//!
//! A backend never knows which engine it talks to, nor which strategy: it flattens its gradients (and, for
//! parameter servers, its weights) into host buffers in [`Layout`] order, calls the exchange, and copies back
//! what it says changed. Another engine implements [`Communicator`] and nothing else here (the runner picks it:
//! docs/distributed.md, "How it is built").
//!
//! Ranks: workers are `0..workers` (rank 0 writes the result); parameter servers, when the strategy has them,
//! are `workers..workers + servers` and run [`server::serve`] instead of a backend.

pub mod exchange;
pub mod local;
pub mod optim;
pub mod overlap;
pub mod prefetch;
pub mod server;
pub mod sharded;
#[cfg(test)]
mod sharded_tests;
#[cfg(test)]
mod tests;
pub mod topology;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use exchange::{
    AllReduceExchange, ExchangeStats, GradientExchange, Layout, PsWorkerExchange, StepExchange, StopWish,
};
pub use overlap::{BucketFeed, OverlapError, Overlapped, compute_waits, exchange_during};
pub use prefetch::{UnitQueue, with_unit_queue};
pub use sharded::{ShardHeld, Sharded, ShardedExchange, Unit};
pub use topology::{Interconnect, Topology};

/// How a run's workers combine their gradients (PAI's job classes: 1w1g, 1wng / AllReduce, PS/worker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DataParallel {
    /// One worker, one device: nothing is exchanged.
    #[default]
    Single,
    /// Synchronous data parallelism: gradients summed by a ring all-reduce in buckets after backward, averaged,
    /// and every worker applies the same optimizer step.
    AllReduce,
    /// Workers push gradients to dedicated server ranks, which hold the weights (sharded by tensor) and the
    /// optimizer state, and pull the updated weights back every step.
    ParameterServer {
        /// Server ranks (at least 1).
        servers: usize,
    },
    /// ZeRO stage 1: gradients reduce-scattered, each worker updates its shard of the weights with its shard
    /// of the optimizer state, and the weights are all-gathered after the step.
    #[serde(rename = "zero-1")]
    Zero1,
    /// ZeRO stage 2: as stage 1, and a worker keeps only its shard of the gradients after the reduce-scatter.
    #[serde(rename = "zero-2")]
    Zero2,
    /// ZeRO stage 3 (FSDP): the weights sharded too, each unit (a recomputable block, or the rest of the
    /// model) all-gathered before its forward and again before its backward, and freed after.
    #[serde(rename = "zero-3")]
    Zero3,
}

impl DataParallel {
    /// Name as written in specs and results.
    pub fn name(self) -> &'static str {
        match self {
            DataParallel::Single => "single",
            DataParallel::AllReduce => "all-reduce",
            DataParallel::ParameterServer { .. } => "parameter-server",
            DataParallel::Zero1 => "zero-1",
            DataParallel::Zero2 => "zero-2",
            DataParallel::Zero3 => "zero-3",
        }
    }

    /// Whether its exchange can run beside the computation: all-reduce and ZeRO-1/2 bucket by bucket during the
    /// backward pass; ZeRO-3 block by block, the next block's weights gathered while the current one computes.
    pub fn can_overlap(self) -> bool {
        matches!(self, DataParallel::AllReduce | DataParallel::Zero1 | DataParallel::Zero2 | DataParallel::Zero3)
    }

    /// The ZeRO stage (1, 2 or 3) of a sharded strategy; `None` for the others.
    pub fn zero_stage(self) -> Option<u8> {
        match self {
            DataParallel::Zero1 => Some(1),
            DataParallel::Zero2 => Some(2),
            DataParallel::Zero3 => Some(3),
            _ => None,
        }
    }

    /// Whether nothing is exchanged.
    pub fn is_single(&self) -> bool {
        *self == DataParallel::Single
    }

    /// Parameter-server ranks beside the `workers` (0 for the other strategies).
    pub fn servers(self) -> usize {
        match self {
            DataParallel::ParameterServer { servers } => servers,
            _ => 0,
        }
    }

    /// Processes a run with `workers` workers needs: the workers and the servers.
    pub fn processes(self, workers: usize) -> usize {
        workers + self.servers()
    }
}

/// The engine's identity, recorded in results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EngineInfo {
    /// `mpi`, `nccl`, or `threads` (the in-process test engine).
    pub name: String,
    /// The library's own version string (`Open MPI v4.1.4, ...`).
    pub version: String,
}

/// Refuse a reduce-scatter or all-gather whose buffers do not have the shapes the collective needs: `whole`
/// elements must be `ranks` blocks of `block` each.
pub fn check_blocks(engine: &str, what: &str, whole: usize, block: usize, ranks: usize) -> Result<(), CommError> {
    if block.checked_mul(ranks) == Some(whole) {
        return Ok(());
    }
    Err(CommError {
        engine: engine.to_string(),
        message: format!("{what} of {whole} values over {ranks} ranks in blocks of {block}"),
    })
}

/// Why a collective or a message failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{engine}: {message}")]
pub struct CommError {
    /// The engine that failed.
    pub engine: String,
    /// What happened.
    pub message: String,
}

/// A group of ranks and the few operations data-parallel training needs from an engine. Every rank of the
/// group calls collectives in the same order; messages are matched by peer and tag.
pub trait Communicator {
    /// This process's rank in `0..size()`.
    fn rank(&self) -> usize;
    /// Ranks in the group.
    fn size(&self) -> usize;
    /// The engine and its version.
    fn engine(&self) -> EngineInfo;
    /// Element-wise sum of `send` over every rank, into `recv` (the same length) on every rank.
    fn all_reduce_sum(&mut self, send: &[f32], recv: &mut [f32]) -> Result<(), CommError>;
    /// Element-wise sum of `send` over every rank, scattered: `send` holds `size()` equal blocks, and rank `r`
    /// receives the sum of every rank's block `r` into `recv` (one block long).
    fn reduce_scatter_sum(&mut self, send: &[f32], recv: &mut [f32]) -> Result<(), CommError>;
    /// Every rank's `send` (all of the same length), concatenated in rank order into `recv` on every rank.
    fn all_gather(&mut self, send: &[f32], recv: &mut [f32]) -> Result<(), CommError>;
    /// Send `data` to rank `to` with `tag`.
    fn send(&mut self, to: usize, tag: u16, data: &[f32]) -> Result<(), CommError>;
    /// Receive exactly `data.len()` values from rank `from` with `tag`.
    fn recv(&mut self, from: usize, tag: u16, data: &mut [f32]) -> Result<(), CommError>;
    /// Every rank's `bytes`, in rank order, on `root` (`None` elsewhere).
    fn gather_bytes(&mut self, root: usize, bytes: &[u8]) -> Result<Option<Vec<Vec<u8>>>, CommError>;
    /// `root`'s `bytes` on every rank.
    fn broadcast_bytes(&mut self, root: usize, bytes: &mut Vec<u8>) -> Result<(), CommError>;
    /// Wait until every rank is here.
    fn barrier(&mut self) -> Result<(), CommError>;
    /// End every rank of the group with `code` (one rank failed mid-run; the others would wait for it
    /// forever). The default ends this process only.
    fn abort(&mut self, code: i32) -> ! {
        std::process::exit(code)
    }
}
