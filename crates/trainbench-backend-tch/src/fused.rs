//! Fused optimizers and the list-wide AMP unscale through the shim: ATen's `_fused_sgd_`, `_fused_adam_` and
//! `_fused_adamw_` (one kernel over every parameter, as PyTorch's `fused=True`) and
//! `_amp_foreach_non_finite_check_and_unscale_`. They take fp16's loss scale and the found-infinity flag on the
//! device, so a skipped step needs no host synchronisation. Used on CUDA, where PyTorch eager also runs
//! list-wide kernels by default; the CPU keeps libtorch's per-parameter `torch::optim` (PyTorch's CPU default).

use std::ffi::{c_char, c_int};

use tch::{Kind, TchError, Tensor};
use torch_sys::C_tensor;
use trainbench_graph::OptimizerSpec;

use crate::shim::call;

unsafe extern "C" {
    fn tb_fused_adam(
        adamw: c_int,
        params: *const *const C_tensor,
        grads: *const *const C_tensor,
        exp_avg: *const *const C_tensor,
        exp_avg_sq: *const *const C_tensor,
        steps: *const *const C_tensor,
        n: c_int,
        lr: f64,
        beta1: f64,
        beta2: f64,
        weight_decay: f64,
        eps: f64,
        grad_scale: *const C_tensor,
        found_inf: *const C_tensor,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_fused_sgd(
        params: *const *const C_tensor,
        grads: *const *const C_tensor,
        momentum_buf: *const *const C_tensor,
        n: c_int,
        weight_decay: f64,
        momentum: f64,
        lr: f64,
        nesterov: c_int,
        first_step: c_int,
        grad_scale: *const C_tensor,
        found_inf: *const C_tensor,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_amp_unscale(
        grads: *const *const C_tensor,
        n: c_int,
        found_inf: *const C_tensor,
        inv_scale: *const C_tensor,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
    fn tb_grads_to_none(list: *const *const C_tensor, n: c_int, err: *mut c_char, err_len: usize) -> c_int;
    fn tb_foreach_add(
        list: *const *const C_tensor,
        n: c_int,
        other: *const C_tensor,
        alpha: f64,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int;
}

fn ptrs(ts: &[Tensor]) -> Vec<*const C_tensor> {
    ts.iter().map(Tensor::as_ptr).collect()
}

fn opt_ptr(t: Option<&Tensor>) -> *const C_tensor {
    t.map_or(std::ptr::null(), Tensor::as_ptr)
}

fn shim_err(e: crate::shim::ShimError) -> TchError {
    TchError::Torch(e.0)
}

fn len(ts: &[Tensor]) -> Result<c_int, TchError> {
    c_int::try_from(ts.len()).map_err(|_| TchError::Kind("too many tensors for one fused call".into()))
}

/// Check gradients for infinities and NaNs in one list-wide kernel, setting `found_inf` to 1 if any, and
/// multiply them by `inv_scale` (a one-element fp32 tensor; 1 checks only).
pub fn amp_unscale(grads: &[Tensor], found_inf: &Tensor, inv_scale: &Tensor) -> Result<(), TchError> {
    let (g, n) = (ptrs(grads), len(grads)?);
    // SAFETY: every pointer is a live tensor handle borrowed for the call; `n` is the list's length.
    call(|e, m| unsafe { tb_amp_unscale(g.as_ptr(), n, found_inf.as_ptr(), inv_scale.as_ptr(), e, m) })
        .map_err(shim_err)
}

/// `list[i] += alpha * other` (a one-element tensor) for every tensor, or `+= alpha` without `other`, in one
/// list-wide kernel.
fn foreach_add(list: &[Tensor], other: Option<&Tensor>, alpha: f64) -> Result<(), TchError> {
    let (l, n) = (ptrs(list), len(list)?);
    // SAFETY: as in `amp_unscale`; `other` may be null.
    call(|e, m| unsafe { tb_foreach_add(l.as_ptr(), n, opt_ptr(other), alpha, e, m) }).map_err(shim_err)
}

/// Drop the gradients of `params` (PyTorch's `zero_grad(set_to_none=True)`): they are freed, and the next
/// backward pass allocates them again.
pub fn grads_to_none(params: &[Tensor]) -> Result<(), TchError> {
    let (l, n) = (ptrs(params), len(params)?);
    // SAFETY: live handles, `n` of them.
    call(|e, m| unsafe { tb_grads_to_none(l.as_ptr(), n, e, m) }).map_err(shim_err)
}

/// fp16's loss scale and the found-infinity flag of this step, both on the device.
#[derive(Clone, Copy)]
pub struct ScaleState<'t> {
    /// The current loss scale (one fp32 element): gradients are divided by it inside the kernel.
    pub scale: &'t Tensor,
    /// 1 when a gradient is not finite (one fp32 element): the kernel skips the step.
    pub found_inf: &'t Tensor,
}

/// Per-parameter optimizer state, created at a parameter's first gradient (as PyTorch's lazy state).
enum State {
    /// SGD's momentum buffer (none without momentum).
    Sgd { buf: Option<Tensor> },
    /// Adam's moments and step count (an fp32 scalar on the device, as PyTorch's fused path keeps it).
    Adam { exp_avg: Tensor, exp_avg_sq: Tensor, step: Tensor },
}

/// A fused SGD, Adam or AdamW over a fixed list of parameters, with PyTorch's semantics (SGD: dampening 0;
/// Adam/AdamW: no amsgrad; parameters without a gradient are skipped and keep their state).
pub struct FusedOptimizer {
    spec: OptimizerSpec,
    /// The trained tensors (handles sharing storage and gradients with the model's).
    pub params: Vec<Tensor>,
    state: Vec<Option<State>>,
}

impl FusedOptimizer {
    /// An optimizer for `params` with the settings of `spec`.
    pub fn new(spec: &OptimizerSpec, params: Vec<Tensor>) -> Self {
        let state = params.iter().map(|_| None).collect();
        Self { spec: spec.clone(), params, state }
    }

    /// Bytes of optimizer state allocated so far (momentum buffers, moments, step counts).
    pub fn state_bytes(&self) -> u64 {
        self.state
            .iter()
            .flatten()
            .map(|s| match s {
                State::Sgd { buf } => buf.as_ref().map_or(0, crate::lower::tensor_bytes),
                State::Adam { exp_avg, exp_avg_sq, step } => {
                    crate::lower::tensor_bytes(exp_avg)
                        + crate::lower::tensor_bytes(exp_avg_sq)
                        + crate::lower::tensor_bytes(step)
                }
            })
            .sum()
    }

    /// One step over the parameters that have a gradient; with `scale`, gradients are unscaled inside the
    /// kernel and the step is skipped on the device when `found_inf` is set (Adam's step counts then stay).
    pub fn step(&mut self, scale: Option<ScaleState<'_>>) -> Result<(), TchError> {
        let with_grad: Vec<(usize, Tensor)> =
            self.params.iter().enumerate().map(|(i, p)| (i, p.grad())).filter(|(_, g)| g.defined()).collect();
        if with_grad.is_empty() {
            return Ok(());
        }
        let (grad_scale, found_inf) = (scale.map(|s| s.scale), scale.map(|s| s.found_inf));
        match self.spec {
            OptimizerSpec::Sgd { lr, momentum, weight_decay, nesterov } => {
                // Parameters whose momentum buffer starts now (set to the gradient) and those that have one.
                let (mut first, mut later) = (Group::default(), Group::default());
                for (i, g) in with_grad {
                    let p = self.params[i].shallow_clone();
                    let fresh = self.state[i].is_none();
                    let buf = if momentum != 0.0 {
                        let s = self.state[i].get_or_insert_with(|| State::Sgd { buf: None });
                        let State::Sgd { buf } = s else { return Err(wrong_state()) };
                        if buf.is_none() {
                            *buf = Some(p.f_zeros_like()?);
                        }
                        buf.as_ref().map(Tensor::shallow_clone)
                    } else {
                        self.state[i].get_or_insert_with(|| State::Sgd { buf: None });
                        None
                    };
                    let group = if fresh { &mut first } else { &mut later };
                    group.params.push(p);
                    group.grads.push(g);
                    group.a.extend(buf);
                }
                for (group, is_first) in [(&first, true), (&later, false)] {
                    if group.params.is_empty() {
                        continue;
                    }
                    let (p, g, b, n) = (ptrs(&group.params), ptrs(&group.grads), ptrs(&group.a), len(&group.params)?);
                    let (gs, fi) = (opt_ptr(grad_scale), opt_ptr(found_inf));
                    // SAFETY: the lists are live handles of equal length `n` (`b` empty without momentum, which the
                    // shim then ignores); `gs`/`fi` are null or live.
                    call(|e, m| unsafe {
                        tb_fused_sgd(
                            p.as_ptr(),
                            g.as_ptr(),
                            b.as_ptr(),
                            n,
                            weight_decay,
                            momentum,
                            lr,
                            c_int::from(nesterov),
                            c_int::from(is_first),
                            gs,
                            fi,
                            e,
                            m,
                        )
                    })
                    .map_err(shim_err)?;
                }
            }
            OptimizerSpec::Adam { lr, beta1, beta2, eps, weight_decay }
            | OptimizerSpec::Adamw { lr, beta1, beta2, eps, weight_decay } => {
                let adamw = matches!(self.spec, OptimizerSpec::Adamw { .. });
                let mut group = Group::default();
                for (i, g) in with_grad {
                    let p = self.params[i].shallow_clone();
                    if self.state[i].is_none() {
                        let step = Tensor::f_zeros([], (Kind::Float, p.device()))?;
                        self.state[i] =
                            Some(State::Adam { exp_avg: p.f_zeros_like()?, exp_avg_sq: p.f_zeros_like()?, step });
                    }
                    let Some(State::Adam { exp_avg, exp_avg_sq, step }) = &self.state[i] else {
                        return Err(wrong_state());
                    };
                    group.params.push(p);
                    group.grads.push(g);
                    group.a.push(exp_avg.shallow_clone());
                    group.b.push(exp_avg_sq.shallow_clone());
                    group.steps.push(step.shallow_clone());
                }
                // As PyTorch's fused path: count the step first, and take it back where the step was skipped.
                foreach_add(&group.steps, None, 1.0)?;
                let (p, g, m1, m2, st, n) = (
                    ptrs(&group.params),
                    ptrs(&group.grads),
                    ptrs(&group.a),
                    ptrs(&group.b),
                    ptrs(&group.steps),
                    len(&group.params)?,
                );
                let (gs, fi) = (opt_ptr(grad_scale), opt_ptr(found_inf));
                // SAFETY: five live lists of length `n`; `gs`/`fi` null or live.
                call(|e, m| unsafe {
                    tb_fused_adam(
                        c_int::from(adamw),
                        p.as_ptr(),
                        g.as_ptr(),
                        m1.as_ptr(),
                        m2.as_ptr(),
                        st.as_ptr(),
                        n,
                        lr,
                        beta1,
                        beta2,
                        weight_decay,
                        eps,
                        gs,
                        fi,
                        e,
                        m,
                    )
                })
                .map_err(shim_err)?;
                if let Some(fi) = found_inf {
                    // The list-wide add takes a 0-dim tensor: a view of the one-element flag.
                    foreach_add(&group.steps, Some(&fi.f_reshape([] as [i64; 0])?), -1.0)?;
                }
            }
        }
        Ok(())
    }
}

fn wrong_state() -> TchError {
    TchError::Kind("internal: optimizer state of another kind".into())
}

/// The tensors of one fused call: parameters, gradients and up to two state lists, and Adam's step counts.
#[derive(Default)]
struct Group {
    params: Vec<Tensor>,
    grads: Vec<Tensor>,
    a: Vec<Tensor>,
    b: Vec<Tensor>,
    steps: Vec<Tensor>,
}

#[cfg(test)]
#[path = "fused_tests.rs"]
mod tests;
