//! Data-parallel runs: what the launcher told this process, read once ([`launcher`]), the engines that connect
//! a group of ranks ([`engine`]), starting ranks on this machine ([`launch`]; [`single_copy`]: whether local MPI ranks may copy large messages
//! straight from each other's memory), the rank group ([`group`]), a mesh rank's groups ([`mesh`]) and
//! the rank loop every rank runs ([`rank_loop`]), a pipeline's section of the result (`pipeline`). Depends on the worker protocol and the per-run pass below it,
//! never on the isolation of repeats or the suite loop above it.

pub mod group;
pub mod launch;
pub mod launcher;
pub(crate) mod mesh;
pub(super) mod pipeline;
pub mod rank_loop;
pub mod single_copy;
pub mod transport;

pub use group::{Ranks, expected_bytes_sent};
pub use launcher::LauncherEnv;
pub use transport::Transport;
