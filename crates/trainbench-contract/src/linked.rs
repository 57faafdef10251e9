//! The training engines a process links, as one table: the backends that train (tch, wgpu) and the
//! communication engines ranks join (MPI, NCCL). The binary that trains (`trainbench-engine`) fills it from the
//! `trainbench-linked` crate at start; the `trainbench` front binary, which links none of them, leaves it empty
//! and hands every command that needs one over to the engine binary. Code that needs an engine asks this table,
//! never a cargo feature.

use std::time::Duration;

use crate::backend::Backend;
use trainbench_comm::{CommError, Communicator};

/// Makes a backend instance.
pub type MakeBackend = fn() -> Box<dyn Backend>;

/// What a process links. A `None` entry is an engine this process cannot use: left out of the build, or this is
/// the front binary.
#[derive(Debug, Clone, Copy, Default)]
pub struct Linked {
    /// The libtorch backend.
    pub tch: Option<MakeBackend>,
    /// The burn/wgpu backend.
    pub wgpu: Option<MakeBackend>,
    /// Joins the MPI world this process was started in (CPU ranks).
    pub mpi: Option<fn() -> Result<Joined, CommError>>,
    /// The NCCL engine (CUDA ranks), compiled into the tch backend.
    pub nccl: Option<NcclTransport>,
}

/// A rank's membership of its group and the host it runs on.
pub struct Joined {
    /// The group.
    pub comm: Box<dyn Communicator>,
    /// This rank's host name, as the engine reports it.
    pub host: String,
}

/// The NCCL engine's two entry points.
#[derive(Debug, Clone, Copy)]
pub struct NcclTransport {
    /// Why CUDA ranks cannot start here (no NCCL in this build, no CUDA device), `None` when they can.
    pub refusal: fn() -> Option<String>,
    /// Join the group described by the rendezvous.
    pub open: fn(&Rendezvous) -> Result<Box<dyn Communicator>, CommError>,
}

/// Where and how a CUDA rank joins its NCCL group: torchrun's variables (`MASTER_ADDR`, `MASTER_PORT`, `RANK`,
/// `WORLD_SIZE`) and the CUDA device this rank drives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendezvous {
    /// Host of rank 0, which serves the `TCPStore` the ranks meet through.
    pub master_addr: String,
    /// The store's TCP port on `master_addr`.
    pub master_port: u16,
    /// This rank.
    pub rank: usize,
    /// Ranks in the group.
    pub world: usize,
    /// The CUDA device index of this rank (NCCL runs one rank per GPU).
    pub device: usize,
    /// Bound on the rendezvous and on every collective (c10d's defaults are 300 s and 30 min).
    pub timeout: Duration,
}
