//! The training engines this build links, as the table the runner asks ([`trainbench_contract::linked`]):
//! one entry per cargo feature. Only the binary that trains (`trainbench-engine`) and tests that train in
//! their own process depend on this crate, so the `trainbench` front binary links no backend and starts in
//! milliseconds.

use trainbench_contract::linked::Linked;

/// Every engine compiled into this build.
pub fn linked() -> Linked {
    Linked { tch: tch(), wgpu: wgpu(), mpi: mpi(), nccl: nccl() }
}

#[cfg(feature = "tch")]
fn tch() -> Option<trainbench_contract::linked::MakeBackend> {
    Some(|| Box::new(trainbench_backend_tch::TchBackend::new()))
}

#[cfg(not(feature = "tch"))]
fn tch() -> Option<trainbench_contract::linked::MakeBackend> {
    None
}

#[cfg(feature = "wgpu")]
fn wgpu() -> Option<trainbench_contract::linked::MakeBackend> {
    Some(|| Box::new(trainbench_backend_wgpu::WgpuBackend::new()))
}

#[cfg(not(feature = "wgpu"))]
fn wgpu() -> Option<trainbench_contract::linked::MakeBackend> {
    None
}

#[cfg(feature = "mpi")]
fn mpi() -> Option<fn() -> Result<trainbench_contract::linked::Joined, trainbench_comm::CommError>> {
    Some(|| {
        let comm = trainbench_transport_mpi::MpiComm::init()?;
        let host = comm.host();
        Ok(trainbench_contract::linked::Joined { comm: Box::new(comm), host })
    })
}

#[cfg(not(feature = "mpi"))]
fn mpi() -> Option<fn() -> Result<trainbench_contract::linked::Joined, trainbench_comm::CommError>> {
    None
}

/// The NCCL engine is part of the tch backend: present with feature `tch`, and it says itself when this
/// libtorch has no CUDA to compile it against.
#[cfg(feature = "tch")]
fn nccl() -> Option<trainbench_contract::linked::NcclTransport> {
    Some(trainbench_contract::linked::NcclTransport {
        refusal: trainbench_backend_tch::nccl::refusal,
        open: |at| Ok(Box::new(trainbench_backend_tch::nccl::NcclComm::open(at)?)),
    })
}

#[cfg(not(feature = "tch"))]
fn nccl() -> Option<trainbench_contract::linked::NcclTransport> {
    None
}
