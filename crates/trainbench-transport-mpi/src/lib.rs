//! The MPI engine: [`MpiComm`] implements trainbench's [`Communicator`] on `MPI_COMM_WORLD` (Open MPI or
//! MPICH, found at build time through their compiler wrapper), so CPU ranks exchange gradients through the
//! library's own collectives (shared memory between local ranks, TCP or InfiniBand between machines).
//!
//! A collective called from the rank's main thread blocks inside MPI, which polls. One called from a
//! communication thread (an exchange overlapped with the computation) is started non-blocking and waited for
//! politely ([`wait_beside`]): tested in a short spin, then between short sleeps, so the computing thread keeps
//! its core; Open MPI progresses the collective inside each test.

use mpi::Count;
use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use mpi::datatype::{Equivalence, Partition, PartitionMut};
use mpi::environment::{Threading, Universe};
use mpi::point_to_point::{Destination, Source};
use mpi::raw::AsRaw;
use mpi::request::{Request, Scope};
use mpi::topology::{Color, Communicator as _, SimpleCommunicator};
use std::sync::Arc;
use trainbench_comm::{CommError, Communicator, EngineInfo};

/// `MPI_COMM_WORLD` of this process, or a group split from it ([`Communicator::split`]); MPI is finalised when the
/// world and every group split from it are dropped.
pub struct MpiComm {
    group: SimpleCommunicator,
    version: String,
    /// The thread that initialised MPI: the rank's main thread.
    main: std::thread::ThreadId,
    /// Sends posted and not yet waited for ([`Communicator::post_send`]).
    posted: Vec<PostedSend>,
    /// Waits test between sleeps ([`Communicator::wait_politely`]).
    polite: bool,
    // Dropped after the communicator: the last of the world and its groups finalises MPI.
    _universe: Arc<Universe>,
}

/// A send MPI is carrying out, and the values it reads.
struct PostedSend {
    request: mpi::ffi::MPI_Request,
    data: Vec<f32>,
}

impl Drop for MpiComm {
    fn drop(&mut self) {
        // A send still in flight reads its buffer: leak the buffers rather than free them under MPI.
        for p in self.posted.drain(..) {
            std::mem::forget(p.data);
        }
    }
}

impl MpiComm {
    /// Initialise MPI (once per process) and take the world. Started without a launcher, the world has one rank.
    /// MPI is asked for `MPI_THREAD_SERIALIZED`: the exchange of a step overlapped with its backward pass makes
    /// its calls from a communication thread, never two threads at once; a library that offers less is refused.
    pub fn init() -> Result<MpiComm, CommError> {
        let (universe, threading) = mpi::initialize_with_threading(Threading::Serialized)
            .ok_or_else(|| error("MPI was already initialised in this process".into()))?;
        if threading < Threading::Serialized {
            return Err(error(format!(
                "the MPI library offers thread support {threading:?}; overlapping the exchange needs Serialized"
            )));
        }
        let world = universe.world();
        let version = mpi::environment::library_version()
            .map(|v| v.trim_end_matches('\0').split(',').next().unwrap_or_default().trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        Ok(MpiComm {
            group: world,
            version,
            main: std::thread::current().id(),
            posted: Vec::new(),
            polite: false,
            _universe: Arc::new(universe),
        })
    }

    /// Whether this call comes from a communication thread, beside the computation, or this rank waits
    /// politely ([`Communicator::wait_politely`]).
    fn beside(&self) -> bool {
        self.polite || std::thread::current().id() != self.main
    }

    /// The name of the processor (host) this rank runs on.
    pub fn host(&self) -> String {
        mpi::environment::processor_name().unwrap_or_else(|_| "unknown".into())
    }
}

/// Wait for `request` beside a computing thread: tested in a spin of 50 microseconds (a collective whose peers
/// are there completes in it), then between sleeps of 20 microseconds, which leave the core to the computation;
/// in a spin again whenever the computing thread waits for this one ([`trainbench_comm::compute_waits`]).
pub fn wait_beside<'a, D: ?Sized, S: Scope<'a>>(mut request: Request<'a, D, S>) {
    let spin_until = std::time::Instant::now() + std::time::Duration::from_micros(50);
    loop {
        match request.test() {
            Ok(_) => return,
            Err(pending) => request = pending,
        }
        if trainbench_comm::compute_waits() || std::time::Instant::now() < spin_until {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
    }
}

fn error(message: String) -> CommError {
    CommError { engine: "mpi".into(), message }
}

fn count(n: usize) -> Result<Count, CommError> {
    Count::try_from(n).map_err(|_| error(format!("a message of {n} elements is more than MPI counts")))
}

impl Communicator for MpiComm {
    fn rank(&self) -> usize {
        self.group.rank() as usize
    }
    fn size(&self) -> usize {
        self.group.size() as usize
    }
    fn engine(&self) -> EngineInfo {
        EngineInfo { name: "mpi".into(), version: self.version.clone() }
    }

    fn all_reduce_sum(&mut self, send: &[f32], recv: &mut [f32]) -> Result<(), CommError> {
        if send.len() != recv.len() {
            return Err(error(format!("all-reduce of {} values into {}", send.len(), recv.len())));
        }
        count(send.len())?;
        if self.beside() {
            mpi::request::scope(|scope| {
                wait_beside(self.group.immediate_all_reduce_into(scope, send, recv, SystemOperation::sum()));
            });
        } else {
            self.group.all_reduce_into(send, recv, SystemOperation::sum());
        }
        Ok(())
    }

    fn reduce_scatter_sum(&mut self, send: &[f32], recv: &mut [f32]) -> Result<(), CommError> {
        trainbench_comm::check_blocks("mpi", "reduce-scatter", send.len(), recv.len(), self.size())?;
        count(send.len())?;
        if recv.is_empty() {
            return Ok(());
        }
        if self.beside() {
            mpi::request::scope(|scope| {
                let op = SystemOperation::sum();
                wait_beside(self.group.immediate_reduce_scatter_block_into(scope, send, recv, op));
            });
        } else {
            self.group.reduce_scatter_block_into(send, recv, SystemOperation::sum());
        }
        Ok(())
    }

    fn all_gather(&mut self, send: &[f32], recv: &mut [f32]) -> Result<(), CommError> {
        trainbench_comm::check_blocks("mpi", "all-gather", recv.len(), send.len(), self.size())?;
        count(recv.len())?;
        if send.is_empty() {
            return Ok(());
        }
        if self.beside() {
            mpi::request::scope(|scope| wait_beside(self.group.immediate_all_gather_into(scope, send, recv)));
        } else {
            self.group.all_gather_into(send, recv);
        }
        Ok(())
    }

    fn all_to_all(
        &mut self,
        send: &[f32],
        send_counts: &[usize],
        recv: &mut [f32],
        recv_counts: &[usize],
    ) -> Result<(), CommError> {
        trainbench_comm::check_counts("mpi", self.size(), (send.len(), send_counts), (recv.len(), recv_counts))?;
        count(send.len())?;
        count(recv.len())?;
        // Counts and displacements in MPI's integers (each fits: their sums were checked above).
        let ints = |counts: &[usize]| -> (Vec<Count>, Vec<Count>) {
            let c: Vec<Count> = counts.iter().map(|&n| n as Count).collect();
            let d = c.iter().scan(0, |at, &n| Some(std::mem::replace(at, *at + n))).collect();
            (c, d)
        };
        let (sc, sd) = ints(send_counts);
        let (rc, rd) = ints(recv_counts);
        let out = Partition::new(send, &sc[..], &sd[..]);
        let mut into = PartitionMut::new(recv, &rc[..], &rd[..]);
        if self.beside() {
            mpi::request::scope(|scope| {
                wait_beside(self.group.immediate_all_to_all_varcount_into(scope, &out, &mut into));
            });
        } else {
            self.group.all_to_all_varcount_into(&out, &mut into);
        }
        Ok(())
    }

    fn send(&mut self, to: usize, tag: u16, data: &[f32]) -> Result<(), CommError> {
        count(data.len())?;
        self.group.process_at_rank(to as i32).send_with_tag(data, i32::from(tag));
        Ok(())
    }

    fn recv(&mut self, from: usize, tag: u16, data: &mut [f32]) -> Result<(), CommError> {
        let status = if self.beside() {
            let peer = self.group.process_at_rank(from as i32);
            mpi::request::scope(|scope| {
                let mut request = peer.immediate_receive_into_with_tag(scope, data, i32::from(tag));
                loop {
                    match request.test() {
                        Ok(status) => break status,
                        Err(pending) => request = pending,
                    }
                    std::thread::sleep(std::time::Duration::from_micros(20));
                }
            })
        } else {
            self.group.process_at_rank(from as i32).receive_into_with_tag(data, i32::from(tag))
        };
        let got = status.count(f32::equivalent_datatype()) as usize;
        if got != data.len() {
            return Err(error(format!("rank {from} sent {got} values, {} expected", data.len())));
        }
        Ok(())
    }

    fn post_send(&mut self, to: usize, tag: u16, data: Vec<f32>) -> Result<(), CommError> {
        let n = count(data.len())?;
        let peer = i32::try_from(to).map_err(|_| error(format!("rank {to}")))?;
        // SAFETY: reading the constant MPI_REQUEST_NULL the MPI library defines.
        let null = unsafe { mpi::ffi::RSMPI_REQUEST_NULL };
        let mut request = PostedSend { request: null, data };
        // SAFETY: the buffer is `request.data`'s heap allocation, which stays where it is (the vector is only
        // moved, never grown) and alive until `wait_sends` completed the request (or, for a group dropped with
        // sends in flight, forever: `Drop` leaks it); the request handle is written by MPI.
        let code = unsafe {
            mpi::ffi::MPI_Isend(
                request.data.as_ptr().cast(),
                n,
                f32::equivalent_datatype().as_raw(),
                peer,
                i32::from(tag),
                self.group.as_raw(),
                &mut request.request,
            )
        };
        if code != 0 {
            return Err(error(format!("MPI_Isend to rank {to} failed with code {code}")));
        }
        self.posted.push(request);
        Ok(())
    }

    fn wait_sends(&mut self) -> Result<(), CommError> {
        let polite = self.polite;
        for mut p in self.posted.drain(..) {
            loop {
                let mut done: std::os::raw::c_int = 0;
                // SAFETY: a request MPI_Isend started on this group; its buffer lives in `p` until it completes.
                let code = unsafe { mpi::ffi::MPI_Test(&mut p.request, &mut done, mpi::ffi::RSMPI_STATUS_IGNORE) };
                if code != 0 {
                    return Err(error(format!("MPI_Test on a posted send failed with code {code}")));
                }
                if done != 0 {
                    break;
                }
                if polite {
                    std::thread::sleep(std::time::Duration::from_micros(20));
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        Ok(())
    }

    fn wait_politely(&mut self, on: bool) {
        self.polite = on;
    }

    fn gather_bytes(&mut self, root: usize, bytes: &[u8]) -> Result<Option<Vec<Vec<u8>>>, CommError> {
        let root_process = self.group.process_at_rank(root as i32);
        let len = count(bytes.len())?;
        if self.rank() != root {
            root_process.gather_into(&len);
            root_process.gather_varcount_into(bytes);
            return Ok(None);
        }
        let mut lens = vec![0 as Count; self.size()];
        root_process.gather_into_root(&len, &mut lens[..]);
        let displs: Vec<Count> = lens
            .iter()
            .scan(0, |acc, &l| {
                let d = *acc;
                *acc += l;
                Some(d)
            })
            .collect();
        let total: usize = lens.iter().map(|&l| l as usize).sum();
        let mut all = vec![0u8; total];
        {
            let mut partition = PartitionMut::new(&mut all[..], &lens[..], &displs[..]);
            root_process.gather_varcount_into_root(bytes, &mut partition);
        }
        Ok(Some(lens.iter().zip(&displs).map(|(&l, &d)| all[d as usize..(d + l) as usize].to_vec()).collect()))
    }

    fn broadcast_bytes(&mut self, root: usize, bytes: &mut Vec<u8>) -> Result<(), CommError> {
        let root_process = self.group.process_at_rank(root as i32);
        let mut len = count(bytes.len())? as u64;
        root_process.broadcast_into(&mut len);
        bytes.resize(len as usize, 0);
        root_process.broadcast_into(&mut bytes[..]);
        Ok(())
    }

    fn barrier(&mut self) -> Result<(), CommError> {
        self.group.barrier();
        Ok(())
    }

    fn split(&mut self, color: usize, key: usize) -> Result<Box<dyn Communicator>, CommError> {
        let value = |what: &str, n: usize| {
            i32::try_from(n).map_err(|_| error(format!("a split {what} of {n} is more than MPI takes")))
        };
        let color = Color::with_value(value("color", color)?);
        let key = value("key", key)?;
        let group = self
            .group
            .split_by_color_with_key(color, key)
            .ok_or_else(|| error("MPI_Comm_split gave no group".into()))?;
        Ok(Box::new(MpiComm {
            group,
            version: self.version.clone(),
            main: self.main,
            posted: Vec::new(),
            polite: false,
            _universe: Arc::clone(&self._universe),
        }))
    }

    fn abort(&mut self, code: i32) -> ! {
        self.group.abort(code)
    }
}
