//! The NCCL engine: [`NcclComm`] implements trainbench's [`Communicator`] on c10d's `ProcessGroupNCCL` through
//! the shim's C API (shim/nccl.cpp, rendezvous by a `TCPStore` on rank 0), so CUDA ranks exchange gradients
//! through NCCL (NVLink, PCIe or the network between machines). A device mesh's groups split from it
//! ([`Communicator::split`]): each a process group of its members, rendezvoused under its own prefix of the
//! world's store.
//!
//! The bytes are staged through the host like the MPI engine's: each call copies its host values into a tensor
//! on this rank's GPU, runs the collective there and copies the result back (`Communicator` speaks in host
//! slices, which is what the strategies and the backends share; why:
//! `docs/decisions/0005-nccl-staged-through-host.md`).
//!
//! The engine is compiled when the linked libtorch has CUDA and its headers are found (`cfg(trainbench_nccl)`,
//! set by build.rs); otherwise, and on a machine without a CUDA device, [`NcclComm::open`] is a clear error that
//! says why and what to do.

use tch::{Device, Kind, Tensor};
use trainbench_comm::{CommError, Communicator, EngineInfo, split_members};

pub use trainbench_contract::linked::Rendezvous;

fn error(message: impl std::fmt::Display) -> CommError {
    CommError { engine: "nccl".into(), message: message.to_string() }
}

/// Why a call into the shim's C API failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NcclError {
    /// This build has no NCCL engine (no CUDA libtorch, or its headers were missing).
    #[error("this build has no NCCL engine")]
    NotBuilt,
    /// The master address cannot be passed to C.
    #[error("the master address holds a NUL byte")]
    NulInAddress,
    /// A rank, world size or device number (what it is, its value) does not fit the C API's `int`.
    #[error("{0} {1} is out of range")]
    OutOfRange(&'static str, usize),
    /// NCCL, c10d or the rendezvous refused the call; the shim's message.
    #[error("{0}")]
    Failed(String),
}

/// Why this build cannot run the NCCL engine at all (`None` when it was compiled in).
pub fn not_built() -> Option<String> {
    if cfg!(trainbench_nccl) {
        return None;
    }
    let why =
        option_env!("TRAINBENCH_TCH_NCCL_MISSING").unwrap_or("the linked libtorch has no CUDA (libtorch_cuda.so)");
    Some(format!(
        "this build has no NCCL engine: {why}; build with a CUDA libtorch and its headers (scripts/env.sh sets up \
         PyTorch's CUDA wheel and the header wheels it needs)"
    ))
}

/// Why a data-parallel CUDA run cannot start here, if it cannot: no NCCL engine in this build, or no CUDA device
/// (NCCL runs one rank per GPU).
pub fn refusal() -> Option<String> {
    if let Some(why) = not_built() {
        return Some(why);
    }
    let count = tch::Cuda::device_count().max(0);
    (count == 0).then(|| {
        "libtorch sees no CUDA device here (no GPU, no driver, or CUDA_VISIBLE_DEVICES empty), and NCCL runs one \
         rank per GPU; run it on a machine with a GPU per rank, or on `cpu` (MPI ranks)"
            .to_string()
    })
}

/// The NCCL library's version (`NCCL 2.29.7`), when the engine is built.
pub fn version() -> Option<String> {
    sys::version().ok().map(|v| format!("NCCL {v}"))
}

/// This rank's membership of an NCCL group; the group is shut down when it is dropped.
pub struct NcclComm {
    handle: sys::Handle,
    rank: usize,
    size: usize,
    device: Device,
    version: String,
    /// How many groups this one has split off (names each new group's rendezvous: every rank splits in the
    /// same order, so the counts agree).
    splits: usize,
}

impl NcclComm {
    /// Join the group described by `at`. Refused with the reason when this build has no NCCL engine, when the
    /// device does not exist, and when NCCL or the rendezvous fails (a peer that never came, two ranks on one
    /// GPU); never a crash.
    pub fn open(at: &Rendezvous) -> Result<NcclComm, CommError> {
        if let Some(why) = not_built() {
            return Err(error(why));
        }
        if at.world == 0 || at.rank >= at.world {
            return Err(error(format!("rank {} of a world of {}: no such rank", at.rank, at.world)));
        }
        let count = usize::try_from(tch::Cuda::device_count()).unwrap_or(0);
        if count == 0 {
            return Err(error(
                "libtorch sees no CUDA device (no GPU, no driver, or CUDA_VISIBLE_DEVICES empty): the NCCL engine \
                 runs CUDA ranks only; run CPU ranks through `mpirun` or `srun --mpi=pmix`",
            ));
        }
        if at.device >= count {
            return Err(error(format!(
                "rank {} would drive CUDA device {}, but there are {count}: NCCL runs one rank per GPU, so a node \
                 holds at most {count} rank(s) here",
                at.rank, at.device
            )));
        }
        let handle = sys::open(at)
            .map_err(|e| error(format!("joining the group at {}:{}: {e}", at.master_addr, at.master_port)))?;
        let version = sys::version().unwrap_or_else(|_| "unknown".into());
        Ok(NcclComm { handle, rank: at.rank, size: at.world, device: Device::Cuda(at.device), version, splits: 0 })
    }

    /// The CUDA device this rank drives.
    pub fn device(&self) -> Device {
        self.device
    }

    /// Host values staged into a tensor on this rank's device.
    fn stage<T: tch::kind::Element>(&self, values: &[T]) -> Result<Tensor, CommError> {
        Tensor::f_from_slice(values)
            .and_then(|t| t.f_to_device(self.device))
            .map_err(|e| error(format!("staging {} values on {:?}: {e}", values.len(), self.device)))
    }

    /// A device tensor's values copied back into `out`.
    fn unstage<T: tch::kind::Element>(t: &Tensor, out: &mut [T]) -> Result<(), CommError> {
        t.f_to_device(Device::Cpu)
            .and_then(|h| h.f_copy_data(out, out.len()))
            .map_err(|e| error(format!("copying {} values back to the host: {e}", out.len())))
    }

    fn empty(&self, len: usize, kind: Kind) -> Result<Tensor, CommError> {
        let n = i64::try_from(len).map_err(|_| error(format!("{len} values are more than a tensor holds")))?;
        Tensor::f_zeros([n], (kind, self.device)).map_err(|e| error(format!("a buffer of {len} values: {e}")))
    }

    fn peer(&self, peer: usize) -> Result<i32, CommError> {
        if peer >= self.size {
            return Err(error(format!("rank {peer} is not in a group of {}", self.size)));
        }
        i32::try_from(peer).map_err(|_| error(format!("rank {peer}")))
    }

    fn send_len(&self, to: i32, tag: u16, len: usize) -> Result<(), CommError> {
        let t = self.stage(&[len as i64])?;
        sys::send(&self.handle, &t, to, i32::from(tag)).map_err(error)
    }

    fn recv_len(&self, from: i32, tag: u16) -> Result<usize, CommError> {
        let t = self.empty(1, Kind::Int64)?;
        sys::recv(&self.handle, &t, from, i32::from(tag)).map_err(error)?;
        let mut len = [0i64];
        Self::unstage(&t, &mut len)?;
        usize::try_from(len[0]).map_err(|_| error(format!("a peer announced {} bytes", len[0])))
    }
}

/// Tag of the lengths and bytes `gather_bytes` moves (NCCL matches point-to-point messages by peer and order).
const GATHER_TAG: u16 = u16::MAX;

impl Communicator for NcclComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn engine(&self) -> EngineInfo {
        EngineInfo { name: "nccl".into(), version: format!("NCCL {}", self.version) }
    }

    fn all_reduce_sum(&mut self, send: &[f32], recv: &mut [f32]) -> Result<(), CommError> {
        if send.len() != recv.len() {
            return Err(error(format!("all-reduce of {} values into {}", send.len(), recv.len())));
        }
        if send.is_empty() {
            return Ok(());
        }
        let t = self.stage(send)?;
        sys::all_reduce_sum(&self.handle, &t).map_err(error)?;
        Self::unstage(&t, recv)
    }

    fn reduce_scatter_sum(&mut self, send: &[f32], recv: &mut [f32]) -> Result<(), CommError> {
        trainbench_comm::check_blocks("nccl", "reduce-scatter", send.len(), recv.len(), self.size)?;
        if recv.is_empty() {
            return Ok(());
        }
        let input = self.stage(send)?;
        let out = self.empty(recv.len(), Kind::Float)?;
        sys::reduce_scatter_sum(&self.handle, &out, &input).map_err(error)?;
        Self::unstage(&out, recv)
    }

    fn all_gather(&mut self, send: &[f32], recv: &mut [f32]) -> Result<(), CommError> {
        trainbench_comm::check_blocks("nccl", "all-gather", recv.len(), send.len(), self.size)?;
        if send.is_empty() {
            return Ok(());
        }
        let input = self.stage(send)?;
        let out = self.empty(recv.len(), Kind::Float)?;
        sys::all_gather(&self.handle, &out, &input).map_err(error)?;
        Self::unstage(&out, recv)
    }

    fn all_to_all(
        &mut self,
        send: &[f32],
        send_counts: &[usize],
        recv: &mut [f32],
        recv_counts: &[usize],
    ) -> Result<(), CommError> {
        trainbench_comm::check_counts("nccl", self.size, (send.len(), send_counts), (recv.len(), recv_counts))?;
        let counts: Vec<i64> = send_counts.iter().chain(recv_counts).map(|&c| c as i64).collect();
        let input = self.stage(send)?;
        let out = self.empty(recv.len(), Kind::Float)?;
        sys::all_to_all(&self.handle, &out, &input, &counts).map_err(error)?;
        Self::unstage(&out, recv)
    }

    /// NCCL matches messages by peer and order, not by tag: both sides must issue them in the same order, which
    /// the strategies do.
    fn send(&mut self, to: usize, tag: u16, data: &[f32]) -> Result<(), CommError> {
        let to = self.peer(to)?;
        if data.is_empty() {
            return Ok(());
        }
        let t = self.stage(data)?;
        sys::send(&self.handle, &t, to, i32::from(tag)).map_err(error)
    }

    fn recv(&mut self, from: usize, tag: u16, data: &mut [f32]) -> Result<(), CommError> {
        let from = self.peer(from)?;
        if data.is_empty() {
            return Ok(());
        }
        let t = self.empty(data.len(), Kind::Float)?;
        sys::recv(&self.handle, &t, from, i32::from(tag)).map_err(error)?;
        Self::unstage(&t, data)
    }

    fn gather_bytes(&mut self, root: usize, bytes: &[u8]) -> Result<Option<Vec<Vec<u8>>>, CommError> {
        let root_peer = self.peer(root)?;
        if self.rank != root {
            self.send_len(root_peer, GATHER_TAG, bytes.len())?;
            if !bytes.is_empty() {
                let t = self.stage(bytes)?;
                sys::send(&self.handle, &t, root_peer, i32::from(GATHER_TAG)).map_err(error)?;
            }
            return Ok(None);
        }
        let mut all = Vec::with_capacity(self.size);
        for r in 0..self.size {
            if r == root {
                all.push(bytes.to_vec());
                continue;
            }
            let from = self.peer(r)?;
            let len = self.recv_len(from, GATHER_TAG)?;
            let mut got = vec![0u8; len];
            if len > 0 {
                let t = self.empty(len, Kind::Uint8)?;
                sys::recv(&self.handle, &t, from, i32::from(GATHER_TAG)).map_err(error)?;
                Self::unstage(&t, &mut got)?;
            }
            all.push(got);
        }
        Ok(Some(all))
    }

    fn broadcast_bytes(&mut self, root: usize, bytes: &mut Vec<u8>) -> Result<(), CommError> {
        let root_peer = self.peer(root)?;
        let len = self.stage(&[bytes.len() as i64])?;
        sys::broadcast(&self.handle, &len, root_peer).map_err(error)?;
        let mut n = [0i64];
        Self::unstage(&len, &mut n)?;
        let n = usize::try_from(n[0]).map_err(|_| error(format!("rank {root} announced {} bytes", n[0])))?;
        bytes.resize(n, 0);
        if n == 0 {
            return Ok(());
        }
        let t = self.stage(bytes)?;
        sys::broadcast(&self.handle, &t, root_peer).map_err(error)?;
        Self::unstage(&t, bytes)
    }

    fn barrier(&mut self) -> Result<(), CommError> {
        sys::barrier(&self.handle).map_err(error)
    }

    fn split(&mut self, color: usize, key: usize) -> Result<Box<dyn Communicator>, CommError> {
        let members = split_members(self, color, key)?;
        let rank = members.iter().position(|&r| r == self.rank).ok_or_else(|| error("split: not in my own group"))?;
        // The group's rendezvous keys live under its own prefix of this group's store: unique by this group's
        // split count and the new group's color (nested splits nest their prefixes).
        let name = format!("split{}/color{color}/", self.splits);
        self.splits += 1;
        let handle = sys::split(&self.handle, &name, rank, members.len())
            .map_err(|e| error(format!("splitting a group of {} (ranks {members:?}): {e}", members.len())))?;
        Ok(Box::new(NcclComm {
            handle,
            rank,
            size: members.len(),
            device: self.device,
            version: self.version.clone(),
            splits: 0,
        }))
    }

    fn abort(&mut self, code: i32) -> ! {
        // Collectives in flight on this rank return; the launcher (trainbench's, or torchrun) ends the others.
        let _ = sys::abort(&self.handle);
        std::process::exit(code)
    }
}

/// The shim's C API (`nccl_sys.rs`), or, without `cfg(trainbench_nccl)`, stand-ins that say so (never reached:
/// `open` refuses first).
#[cfg(trainbench_nccl)]
#[path = "nccl_sys.rs"]
mod sys;

#[cfg(not(trainbench_nccl))]
mod sys {
    use tch::Tensor;

    use super::{NcclError, Rendezvous};

    /// Never constructed: there is no group without the engine.
    pub enum Handle {}

    pub fn open(_: &Rendezvous) -> Result<Handle, NcclError> {
        Err(NcclError::NotBuilt)
    }
    pub fn all_reduce_sum(h: &Handle, _: &Tensor) -> Result<(), NcclError> {
        match *h {}
    }
    pub fn reduce_scatter_sum(h: &Handle, _: &Tensor, _: &Tensor) -> Result<(), NcclError> {
        match *h {}
    }
    pub fn all_gather(h: &Handle, _: &Tensor, _: &Tensor) -> Result<(), NcclError> {
        match *h {}
    }
    pub fn broadcast(h: &Handle, _: &Tensor, _: i32) -> Result<(), NcclError> {
        match *h {}
    }
    pub fn send(h: &Handle, _: &Tensor, _: i32, _: i32) -> Result<(), NcclError> {
        match *h {}
    }
    pub fn recv(h: &Handle, _: &Tensor, _: i32, _: i32) -> Result<(), NcclError> {
        match *h {}
    }
    pub fn all_to_all(h: &Handle, _: &Tensor, _: &Tensor, _: &[i64]) -> Result<(), NcclError> {
        match *h {}
    }
    pub fn barrier(h: &Handle) -> Result<(), NcclError> {
        match *h {}
    }
    pub fn abort(h: &Handle) -> Result<(), NcclError> {
        match *h {}
    }
    pub fn split(h: &Handle, _: &str, _: usize, _: usize) -> Result<Handle, NcclError> {
        match *h {}
    }
    pub fn version() -> Result<String, NcclError> {
        Err(NcclError::NotBuilt)
    }
}

#[cfg(test)]
#[path = "nccl_tests.rs"]
mod tests;
