//! The shim's hooks that activation checkpointing and CPU memory measurement need and tch does not expose:
//! backward from a tensor with a given gradient, the default random generator's state (so a recomputed
//! block replays its dropout masks), a count of the CPU allocator's live bytes, and a call after each leaf's
//! gradient is accumulated ([`GradReady`], what data-parallel overlap starts its buckets from).

use std::ffi::{c_char, c_int};

use tch::{Device, TchError, Tensor};
use torch_sys::C_tensor;

use crate::shim::call;

unsafe extern "C" {
    fn tb_backward_with_grad(
        out: *const C_tensor,
        grad: *const C_tensor,
        keep_graph: c_int,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_rng_get_state(
        device_cuda: c_int,
        index: c_int,
        out: *mut *mut C_tensor,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_rng_set_state(
        device_cuda: c_int,
        index: c_int,
        state: *const C_tensor,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_cpu_memory_tracking(on: c_int, err: *mut c_char, err_len: usize) -> c_int;
    fn tb_set_grad_ready_hook(
        t: *const C_tensor,
        f: Option<unsafe extern "C" fn(*mut std::ffi::c_void, i64)>,
        ctx: *mut std::ffi::c_void,
        index: i64,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_cpu_allocated() -> i64;
}

fn torch(what: &str) -> impl Fn(crate::shim::ShimError) -> TchError + '_ {
    move |e| TchError::Torch(format!("{what}: {e}"))
}

/// `out.backward(grad)`: gradients flow from `out` into every leaf it depends on (accumulating into their
/// `.grad`); `keep_graph` keeps the graph's buffers for a later backward through the same nodes.
pub fn backward_with(out: &Tensor, grad: &Tensor, keep_graph: bool) -> Result<(), TchError> {
    // SAFETY: both handles are live tensors borrowed for the call.
    call(|e, n| unsafe { tb_backward_with_grad(out.as_ptr(), grad.as_ptr(), c_int::from(keep_graph), e, n) })
        .map_err(torch("backward"))
}

fn device_args(device: Device) -> (c_int, c_int) {
    match device {
        Device::Cuda(i) => (1, i as c_int),
        _ => (0, 0),
    }
}

/// The state of `device`'s default random generator (what dropout draws from).
pub fn rng_state(device: Device) -> Result<Tensor, TchError> {
    let (cuda, index) = device_args(device);
    let mut out: *mut C_tensor = std::ptr::null_mut();
    // SAFETY: the out-pointer is a valid local; the shim stores a new `at::Tensor*` there.
    call(|e, n| unsafe { tb_rng_get_state(cuda, index, &mut out, e, n) }).map_err(torch("random generator state"))?;
    if out.is_null() {
        return Err(TchError::Torch("random generator state: none was returned".into()));
    }
    // SAFETY: `out` is a fresh `at::Tensor*` allocated by the shim, owned from here on by the tch Tensor.
    Ok(unsafe { Tensor::from_ptr(out) })
}

/// Restore a state [`rng_state`] read.
pub fn set_rng_state(device: Device, state: &Tensor) -> Result<(), TchError> {
    let (cuda, index) = device_args(device);
    // SAFETY: `state` is a live tensor borrowed for the call.
    call(|e, n| unsafe { tb_rng_set_state(cuda, index, state.as_ptr(), e, n) }).map_err(torch("random generator state"))
}

/// While alive, the CPU allocations of this thread are counted ([`CpuMemory::allocated`]), through the
/// memory-profiler hook of libtorch's CPU allocator.
pub struct CpuMemory(());

impl CpuMemory {
    /// Start counting on this thread.
    pub fn track() -> Result<Self, TchError> {
        // SAFETY: plain call.
        call(|e, n| unsafe { tb_cpu_memory_tracking(1, e, n) }).map_err(torch("CPU memory tracking"))?;
        Ok(Self(()))
    }

    /// Live bytes allocated on the CPU by this thread since counting started (`None` when it is not on).
    pub fn allocated() -> Option<u64> {
        // SAFETY: plain call reading a counter.
        let v = unsafe { tb_cpu_allocated() };
        (v >= 0).then_some(v as u64)
    }
}

impl Drop for CpuMemory {
    fn drop(&mut self) {
        // Removing the thread-local hook cannot fail in practice; a failure leaves counting on.
        // SAFETY: plain call.
        let _ = call(|e, n| unsafe { tb_cpu_memory_tracking(0, e, n) });
    }
}

type ReadyFn<'f> = Box<dyn FnMut(usize) + 'f>;

unsafe extern "C" fn grad_ready_trampoline(ctx: *mut std::ffi::c_void, index: i64) {
    // SAFETY: `ctx` is the `ReadyFn` a live `GradReady` registered; the hooks are cleared before it is freed, and
    // the autograd engine runs them while the thread that owns it waits in `backward`.
    let f = unsafe { &mut *ctx.cast::<ReadyFn<'_>>() };
    // A panic must not unwind into libtorch: it is caught and the call dropped (the caller notices the tensor
    // never became ready).
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(index as usize)));
}

/// While alive, `on_ready(i)` is called after the gradient of `params[i]` has been accumulated into its
/// `.grad` in a backward pass (once per pass, all uses of the tensor summed); dropped, the hooks are removed.
pub struct GradReady<'f> {
    params: Vec<Tensor>,
    // Boxed twice so the pointer handed to libtorch stays put.
    callback: Box<ReadyFn<'f>>,
}

impl<'f> GradReady<'f> {
    /// Register `on_ready` on every tensor of `params` (leaves that require gradients).
    pub fn install(params: &[Tensor], on_ready: impl FnMut(usize) + 'f) -> Result<Self, TchError> {
        let mut me = GradReady { params: Vec::new(), callback: Box::new(Box::new(on_ready)) };
        let ctx: *mut ReadyFn<'f> = &mut *me.callback;
        for (i, p) in params.iter().enumerate() {
            // SAFETY: a live tensor; the trampoline and `ctx` outlive the hook (cleared in `drop`).
            call(|e, n| unsafe {
                tb_set_grad_ready_hook(p.as_ptr(), Some(grad_ready_trampoline), ctx.cast(), i as i64, e, n)
            })
            .map_err(torch("gradient hook"))?;
            me.params.push(p.shallow_clone());
        }
        Ok(me)
    }
}

impl Drop for GradReady<'_> {
    fn drop(&mut self) {
        for p in &self.params {
            // Clearing a hook cannot fail on a live tensor.
            // SAFETY: a live tensor; a null function clears the hook.
            let _ = call(|e, n| unsafe { tb_set_grad_ready_hook(p.as_ptr(), None, std::ptr::null_mut(), 0, e, n) });
        }
    }
}
