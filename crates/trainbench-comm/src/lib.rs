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

pub mod all_reduce;
pub mod communicator;
pub mod exchange;
pub mod expert;
pub mod layout;
pub mod local;
pub mod mesh;
pub mod optim;
pub mod overlap;
pub mod prefetch;
pub mod ps;
pub mod schedule;
pub mod server;
pub mod sharded;
#[cfg(test)]
mod sharded_tests;
pub mod strategy;
#[cfg(test)]
#[path = "lib_tests.rs"]
mod tests;
pub mod topology;
pub mod units;

pub use all_reduce::AllReduceExchange;
pub use communicator::{CommError, Communicator, EngineInfo, check_blocks, check_counts, split_members};
pub use exchange::{ExchangeStats, GradientExchange, Overlapped, ShardHeld, Sharded, StepExchange, StopWish};
pub use expert::ExpertGroups;
pub use layout::Layout;
pub use mesh::{Mesh, MeshCoords, MeshDim, MeshError, PipelineSchedule};
pub use overlap::{BucketFeed, OverlapError, compute_waits, exchange_during};
pub use prefetch::{UnitQueue, with_unit_queue};
pub use ps::PsWorkerExchange;
pub use sharded::ShardedExchange;
pub use strategy::DataParallel;
pub use topology::{Interconnect, Topology};
pub use units::Unit;
