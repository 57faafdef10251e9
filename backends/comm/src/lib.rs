//! Data-parallel training across ranks: the engine interface ([`Communicator`]: MPI for CPU ranks, NCCL for
//! CUDA ranks), the strategies built on it (ring all-reduce of gradients, sharded parameter servers) and the one
//! call a backend makes after its backward pass ([`GradientExchange::exchange`]).
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
pub mod server;
#[cfg(test)]
mod tests;
pub mod topology;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use exchange::{
    AllReduceExchange, ExchangeStats, GradientExchange, Layout, PsWorkerExchange, StepExchange, StopWish,
};
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
}

impl DataParallel {
    /// Name as written in specs and results.
    pub fn name(self) -> &'static str {
        match self {
            DataParallel::Single => "single",
            DataParallel::AllReduce => "all-reduce",
            DataParallel::ParameterServer { .. } => "parameter-server",
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
