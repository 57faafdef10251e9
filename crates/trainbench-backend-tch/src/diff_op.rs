//! Operations computed by Rust inside libtorch's autograd graph ([`DiffOp`], applied with [`apply`]): the node's
//! forward and backward call back into Rust, which is how a collective over a group of ranks becomes part of a
//! model (tensor and sequence parallelism's copy/reduce/gather/scatter, expert parallelism's all-to-all).
//! [`Group`] is a communicator shared by the operations of one mesh dimension; [`TensorCollective`] names the
//! four collectives of Megatron-style tensor and sequence parallelism.
//!
//! The operation is handed to the graph's node and released with it, whether or not a backward ran.

use std::ffi::{c_char, c_int, c_void};
use std::sync::{Arc, Mutex};

use tch::{Device, Kind, TchError, Tensor};
use torch_sys::C_tensor;
use trainbench_comm::{CommError, Communicator};

use crate::shim::call;

type DiffFn = unsafe extern "C" fn(*mut c_void, c_int, *mut C_tensor, *mut *mut C_tensor, *mut c_char, usize) -> c_int;
type DropFn = unsafe extern "C" fn(*mut c_void);

unsafe extern "C" {
    fn tb_diff_apply(
        x: *const C_tensor,
        op: *mut c_void,
        f: DiffFn,
        drop: DropFn,
        out: *mut *mut C_tensor,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
}

/// An operation with a hand-written backward: `forward` maps the input to the output, `backward` the output's
/// gradient to the input's. It may keep state from its forward for its backward (an all-to-all's split sizes).
/// On the CPU the backward runs on the thread that called backward; on CUDA on libtorch's device thread while
/// that thread waits, hence `Send`.
pub trait DiffOp: Send + 'static {
    /// What the operation is, for error messages (`tensor-parallel all-reduce`).
    fn name(&self) -> &'static str;
    /// The output for `input`.
    fn forward(&mut self, input: &Tensor) -> Result<Tensor, TchError>;
    /// The input's gradient for the output's gradient `grad`.
    fn backward(&mut self, grad: &Tensor) -> Result<Tensor, TchError>;
}

/// `op` applied to `input` as one node of the autograd graph (recorded when gradients are on and `input` needs
/// one; otherwise only its forward runs).
pub fn apply(op: Box<dyn DiffOp>, input: &Tensor) -> Result<Tensor, TchError> {
    let name = op.name();
    let raw = Box::into_raw(Box::new(op)).cast::<c_void>();
    let mut out: *mut C_tensor = std::ptr::null_mut();
    // SAFETY: `input` is a live handle; `raw` is handed over to the shim, which releases it through `drop_op`
    // exactly once (with the graph's node, or at once when nothing recorded it or the call failed).
    call(|e, n| unsafe { tb_diff_apply(input.as_ptr(), raw, trampoline, drop_op, &mut out, e, n) })
        .map_err(|e| TchError::Torch(format!("{name}: {e}")))?;
    // SAFETY: on success the shim stored a new handle that this side now owns.
    Ok(unsafe { Tensor::from_ptr(out) })
}

unsafe extern "C" fn drop_op(op: *mut c_void) {
    // SAFETY: made by `Box::into_raw` in `apply`; the shim calls this once.
    drop(unsafe { Box::from_raw(op.cast::<Box<dyn DiffOp>>()) });
}

unsafe extern "C" fn trampoline(
    op: *mut c_void,
    direction: c_int,
    input: *mut C_tensor,
    output: *mut *mut C_tensor,
    err: *mut c_char,
    err_len: usize,
) -> c_int {
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `op` is the live operation `apply` handed over (the node holds it while it calls); `input` is
        // a live tensor handle, borrowed: a new handle to the same tensor is made.
        let op = unsafe { &mut *op.cast::<Box<dyn DiffOp>>() };
        let input = unsafe { Tensor::clone_from_ptr(input) };
        let result = if direction == 0 { op.forward(&input) } else { op.backward(&input) };
        result.map_err(|e| {
            format!("{} ({}): {}", op.name(), if direction == 0 { "forward" } else { "backward" }, plain(&e))
        })
    }));
    let message = match run {
        Ok(Ok(mut tensor)) => {
            // SAFETY: the shim takes the handle over (and deletes it); forgetting the tensor keeps it alive.
            unsafe { *output = tensor.as_mut_ptr() };
            std::mem::forget(tensor);
            return 0;
        }
        Ok(Err(message)) => message,
        Err(_) => "a differentiable operation panicked".to_string(),
    };
    if !err.is_null() && err_len > 0 {
        let bytes = message.as_bytes();
        let n = bytes.len().min(err_len - 1);
        // SAFETY: the shim's buffer holds `err_len` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), err, n);
            *err.add(n) = 0;
        }
    }
    1
}

/// An error's own message, without the wrapper's prefix (`tensor kind error: `): the shim adds the operation.
fn plain(e: &TchError) -> String {
    match e {
        TchError::Kind(m) | TchError::Torch(m) => m.clone(),
        other => other.to_string(),
    }
}

/// The communicator of one mesh dimension (a tensor-parallel group, say), shared by every operation that
/// communicates along it, with the values it has moved.
#[derive(Clone)]
pub struct Group {
    inner: Arc<Mutex<GroupState>>,
    rank: usize,
    size: usize,
}

struct GroupState {
    comm: Box<dyn Communicator>,
    traffic: GroupTraffic,
}

// SAFETY: the communicator is used by one thread at a time (the mutex), and engines are initialised for calls
// from any one thread at a time (MPI_THREAD_SERIALIZED; NCCL's communicators and the in-process engine are
// thread-safe); it moves between threads only while libtorch's CUDA backward runs with the caller waiting.
unsafe impl Send for GroupState {}

/// Values a [`Group`] has passed to each collective (each rank's own send buffer, in elements).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupTraffic {
    /// All-reduce calls and the values each rank sent.
    pub all_reduce: (u64, u64),
    /// All-gather calls and the values each rank sent (its own block).
    pub all_gather: (u64, u64),
    /// Reduce-scatter calls and the values each rank sent (all blocks).
    pub reduce_scatter: (u64, u64),
    /// All-to-all calls and the values this rank passed (its whole send buffer, its own block included).
    pub all_to_all: (u64, u64),
    /// Nanoseconds this rank spent in all-to-all calls (waiting for its peers included).
    pub all_to_all_nanos: u64,
}

fn comm(what: &str) -> impl Fn(CommError) -> TchError + '_ {
    move |e| TchError::Kind(format!("{what}: {e}"))
}

impl Group {
    /// A group over `comm` (its ranks are the dimension's ranks, in the dimension's order).
    pub fn new(comm: Box<dyn Communicator>) -> Group {
        let (rank, size) = (comm.rank(), comm.size());
        Group { inner: Arc::new(Mutex::new(GroupState { comm, traffic: GroupTraffic::default() })), rank, size }
    }

    /// This rank's place in the group.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Ranks in the group.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The values moved so far.
    pub fn traffic(&self) -> GroupTraffic {
        self.lock().traffic
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GroupState> {
        // A poisoned lock means a collective panicked on another thread; its state is a plain counter and a
        // communicator that reports its own failures, so carry on with it.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The element-wise sum of `x` over the group (same shape, device and kind).
    pub fn all_reduce(&self, x: &Tensor) -> Result<Tensor, TchError> {
        let send = to_host(x)?;
        let mut recv = vec![0f32; send.len()];
        let mut g = self.lock();
        g.comm.all_reduce_sum(&send, &mut recv).map_err(comm("all-reduce"))?;
        g.traffic.all_reduce.0 += 1;
        g.traffic.all_reduce.1 += send.len() as u64;
        from_host(&recv, &x.size(), x)
    }

    /// Every rank's `x` concatenated along `dim` in rank order (each rank's `x` of the same shape).
    pub fn all_gather(&self, x: &Tensor, dim: i64) -> Result<Tensor, TchError> {
        let front = x.f_transpose(0, dim)?.f_contiguous()?;
        let send = to_host(&front)?;
        let mut recv = vec![0f32; send.len() * self.size];
        {
            let mut g = self.lock();
            g.comm.all_gather(&send, &mut recv).map_err(comm("all-gather"))?;
            g.traffic.all_gather.0 += 1;
            g.traffic.all_gather.1 += send.len() as u64;
        }
        let mut shape = front.size();
        shape[0] *= self.size as i64;
        from_host(&recv, &shape, x)?.f_transpose(0, dim)
    }

    /// The sum of `x` over the group, this rank's block of it along `dim` (`x`'s size there divides by the group).
    pub fn reduce_scatter(&self, x: &Tensor, dim: i64) -> Result<Tensor, TchError> {
        let mut shape = x.size();
        let d = usize::try_from(dim).map_err(|_| TchError::Kind(format!("reduce-scatter along dimension {dim}")))?;
        if shape.get(d).is_none_or(|n| *n % self.size as i64 != 0) {
            return Err(TchError::Kind(format!(
                "reduce-scatter of a {shape:?} tensor along dimension {dim} over {} ranks: the size there does not divide",
                self.size
            )));
        }
        let front = x.f_transpose(0, dim)?.f_contiguous()?;
        let send = to_host(&front)?;
        let mut recv = vec![0f32; send.len() / self.size];
        {
            let mut g = self.lock();
            g.comm.reduce_scatter_sum(&send, &mut recv).map_err(comm("reduce-scatter"))?;
            g.traffic.reduce_scatter.0 += 1;
            g.traffic.reduce_scatter.1 += send.len() as u64;
        }
        shape = front.size();
        shape[0] /= self.size as i64;
        from_host(&recv, &shape, x)?.f_transpose(0, dim)
    }
}

/// The largest count [`Group::exchange_counts`] and [`Group::gather_counts`] carry exactly (they travel as `f32`).
const EXACT_COUNT: usize = 1 << 24;

impl Group {
    /// Rows of `x` (`[rows, ..]`, contiguous along the rest) exchanged: the first `send_rows[0]` rows to rank 0,
    /// the next `send_rows[1]` to rank 1, and so on; the result holds `recv_rows[r]` rows from each rank `r`, in
    /// rank order. Not differentiable (see [`Group::all_to_all_diff`]).
    pub fn all_to_all(&self, x: &Tensor, send_rows: &[usize], recv_rows: &[usize]) -> Result<Tensor, TchError> {
        let shape = x.size();
        let width = shape.iter().skip(1).product::<i64>().max(0) as usize;
        let send = to_host(x)?;
        let values = |rows: &[usize]| rows.iter().map(|r| r * width).collect::<Vec<_>>();
        let (send_counts, recv_counts) = (values(send_rows), values(recv_rows));
        let mut recv = vec![0f32; recv_counts.iter().sum()];
        {
            let mut g = self.lock();
            let start = std::time::Instant::now();
            g.comm.all_to_all(&send, &send_counts, &mut recv, &recv_counts).map_err(comm("all-to-all"))?;
            g.traffic.all_to_all_nanos += start.elapsed().as_nanos() as u64;
            g.traffic.all_to_all.0 += 1;
            g.traffic.all_to_all.1 += send.len() as u64;
        }
        let mut out_shape = shape;
        if let Some(rows) = out_shape.first_mut() {
            *rows = recv_rows.iter().sum::<usize>() as i64;
        }
        from_host(&recv, &out_shape, x)
    }

    /// [`Group::all_to_all`] as a node of the autograd graph: the backward sends each row's gradient back where
    /// the row came from (the same exchange with the counts swapped).
    pub fn all_to_all_diff(&self, x: &Tensor, send_rows: &[usize], recv_rows: &[usize]) -> Result<Tensor, TchError> {
        let op = AllToAll { group: self.clone(), send_rows: send_rows.to_vec(), recv_rows: recv_rows.to_vec() };
        apply(Box::new(op), x)
    }

    /// Counts exchanged: `counts` holds `per_rank` counts for each rank in rank order; the result holds the
    /// `per_rank` counts each rank sent this one, in rank order (an expert-parallel dispatch's counts: what each
    /// rank will send to each of this rank's experts). Counts travel exactly up to 2^24.
    pub fn exchange_counts(&self, counts: &[usize], per_rank: usize) -> Result<Vec<usize>, TchError> {
        let send = counts_as_values(counts)?;
        let rows = vec![per_rank; self.size];
        let mut recv = vec![0f32; per_rank * self.size];
        {
            let mut g = self.lock();
            g.comm.all_to_all(&send, &rows, &mut recv, &rows).map_err(comm("all-to-all of counts"))?;
            g.traffic.all_to_all.0 += 1;
            g.traffic.all_to_all.1 += send.len() as u64;
        }
        Ok(recv.iter().map(|&v| v as usize).collect())
    }

    /// Every rank's `counts` (all of the same length), concatenated in rank order. Counts travel exactly up to
    /// 2^24.
    pub fn gather_counts(&self, counts: &[usize]) -> Result<Vec<usize>, TchError> {
        let send = counts_as_values(counts)?;
        let mut recv = vec![0f32; send.len() * self.size];
        {
            let mut g = self.lock();
            g.comm.all_gather(&send, &mut recv).map_err(comm("all-gather of counts"))?;
            g.traffic.all_gather.0 += 1;
            g.traffic.all_gather.1 += send.len() as u64;
        }
        Ok(recv.iter().map(|&v| v as usize).collect())
    }

    /// The element-wise sum of `values` over the group, in place, outside any graph (gradients of tensors the
    /// group's ranks hold alike).
    pub fn all_reduce_values(&self, values: &mut [f32]) -> Result<(), TchError> {
        let send = values.to_vec();
        let mut g = self.lock();
        g.comm.all_reduce_sum(&send, values).map_err(comm("all-reduce"))?;
        g.traffic.all_reduce.0 += 1;
        g.traffic.all_reduce.1 += send.len() as u64;
        Ok(())
    }
}

fn counts_as_values(counts: &[usize]) -> Result<Vec<f32>, TchError> {
    match counts.iter().find(|&&c| c > EXACT_COUNT) {
        Some(c) => Err(TchError::Kind(format!("a count of {c} is more than {EXACT_COUNT} (exchanged as f32)"))),
        None => Ok(counts.iter().map(|&c| c as f32).collect()),
    }
}

/// The differentiable all-to-all ([`Group::all_to_all_diff`]): rows out by `send_rows`, in by `recv_rows`.
struct AllToAll {
    group: Group,
    send_rows: Vec<usize>,
    recv_rows: Vec<usize>,
}

impl DiffOp for AllToAll {
    fn name(&self) -> &'static str {
        "expert-parallel all-to-all"
    }

    fn forward(&mut self, input: &Tensor) -> Result<Tensor, TchError> {
        self.group.all_to_all(input, &self.send_rows, &self.recv_rows)
    }

    fn backward(&mut self, grad: &Tensor) -> Result<Tensor, TchError> {
        self.group.all_to_all(grad, &self.recv_rows, &self.send_rows)
    }
}

/// `x`'s values as host `f32`, in row-major order.
fn to_host(x: &Tensor) -> Result<Vec<f32>, TchError> {
    let host = x.f_detach()?.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?.f_contiguous()?;
    let n = host.numel();
    let mut out = vec![0f32; n];
    host.f_copy_data(&mut out, n)?;
    Ok(out)
}

/// `values` as a tensor of `shape` on `like`'s device and of its kind.
fn from_host(values: &[f32], shape: &[i64], like: &Tensor) -> Result<Tensor, TchError> {
    Tensor::f_from_slice(values)?.f_view(shape)?.f_to_kind(like.kind())?.f_to_device(like.device())
}

/// The four collectives of Megatron-style tensor and sequence parallelism, each the other's transpose: a
/// column-parallel layer's input is copied (its gradient all-reduced), a row-parallel layer's output reduced;
/// with sequence parallelism the sequence shards are gathered before a parallel region and reduce-scattered after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorCollective {
    /// Forward: identity; backward: all-reduce.
    Copy,
    /// Forward: all-reduce; backward: identity.
    Reduce,
    /// Forward: all-gather along the dimension; backward: reduce-scatter along it.
    Gather(i64),
    /// Forward: reduce-scatter along the dimension; backward: all-gather along it.
    Scatter(i64),
    /// Forward: all-gather along the dimension, for a consumer every rank computes whole; backward: this rank's
    /// slice of the gradient, which every rank holds whole and alike.
    GatherWhole(i64),
}

struct Collective {
    kind: TensorCollective,
    group: Group,
}

impl DiffOp for Collective {
    fn name(&self) -> &'static str {
        match self.kind {
            TensorCollective::Copy => "tensor-parallel copy",
            TensorCollective::Reduce => "tensor-parallel all-reduce",
            TensorCollective::Gather(_) => "sequence-parallel all-gather",
            TensorCollective::Scatter(_) => "sequence-parallel reduce-scatter",
            TensorCollective::GatherWhole(_) => "sequence-parallel all-gather to whole",
        }
    }

    fn forward(&mut self, input: &Tensor) -> Result<Tensor, TchError> {
        match self.kind {
            TensorCollective::Copy => Ok(input.shallow_clone()),
            TensorCollective::Reduce => self.group.all_reduce(input),
            TensorCollective::Gather(dim) | TensorCollective::GatherWhole(dim) => self.group.all_gather(input, dim),
            TensorCollective::Scatter(dim) => self.group.reduce_scatter(input, dim),
        }
    }

    fn backward(&mut self, grad: &Tensor) -> Result<Tensor, TchError> {
        match self.kind {
            TensorCollective::Copy => self.group.all_reduce(grad),
            TensorCollective::Reduce => Ok(grad.shallow_clone()),
            TensorCollective::Gather(dim) => self.group.reduce_scatter(grad, dim),
            TensorCollective::Scatter(dim) => self.group.all_gather(grad, dim),
            TensorCollective::GatherWhole(dim) => {
                let len = grad.size().get(dim as usize).copied().unwrap_or(0) / self.group.size as i64;
                grad.f_narrow(dim, self.group.rank as i64 * len, len)?.f_contiguous()
            }
        }
    }
}

impl Group {
    /// `x` through `kind` over this group, as a node of the autograd graph. A group of one rank is the identity.
    pub fn collective(&self, kind: TensorCollective, x: &Tensor) -> Result<Tensor, TchError> {
        if self.size == 1 {
            return Ok(x.shallow_clone());
        }
        apply(Box::new(Collective { kind, group: self.clone() }), x)
    }
}

#[cfg(test)]
#[path = "diff_op_tests.rs"]
mod tests;
