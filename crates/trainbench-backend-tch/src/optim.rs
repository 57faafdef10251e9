//! The optimizers of a run and fp16's dynamic loss scaler. On CUDA: the fused kernels ([`crate::fused`]), one
//! launch over every parameter, with the loss scale and the found-infinity flag on the device (no host
//! synchronisation per step). On the CPU: libtorch's C++ `torch::optim` (a loop over parameters, as PyTorch's
//! CPU default). Both follow `torch.optim`'s semantics, and gradients are set to none after each step.

use tch::{COptimizer, Device, Kind, TchError, Tensor};
use trainbench_graph::OptimizerSpec;

use crate::fused::{self, FusedOptimizer, ScaleState};
use crate::lower::tensor_bytes;

/// An optimizer over a set of parameters.
pub enum Optim {
    /// libtorch's C++ optimizer, with the parameters it was given.
    Torch {
        /// The optimizer.
        opt: COptimizer,
        /// Its parameters (handles sharing storage and gradients with the model's).
        params: Vec<Tensor>,
    },
    /// One fused kernel per step over every parameter.
    Fused(FusedOptimizer),
}

impl Optim {
    /// The optimizer `spec` describes over `params`: fused on CUDA devices, `torch::optim` elsewhere.
    pub fn new(spec: &OptimizerSpec, params: Vec<Tensor>, device: Device) -> Result<Self, TchError> {
        if device.is_cuda() {
            return Ok(Self::Fused(FusedOptimizer::new(spec, params)));
        }
        let mut opt = match *spec {
            OptimizerSpec::Sgd { lr, momentum, weight_decay, nesterov } => {
                COptimizer::sgd(lr, momentum, 0.0, weight_decay, nesterov)?
            }
            OptimizerSpec::Adam { lr, beta1, beta2, eps, weight_decay } => {
                COptimizer::adam(lr, beta1, beta2, weight_decay, eps, false)?
            }
            OptimizerSpec::Adamw { lr, beta1, beta2, eps, weight_decay } => {
                COptimizer::adamw(lr, beta1, beta2, weight_decay, eps, false)?
            }
        };
        for p in &params {
            opt.add_parameters(p, 0)?;
        }
        Ok(Self::Torch { opt, params })
    }

    /// The trained tensors.
    pub fn params(&self) -> &[Tensor] {
        match self {
            Self::Torch { params, .. } => params,
            Self::Fused(f) => &f.params,
        }
    }

    /// Bytes of the trained tensors.
    pub fn param_bytes(&self) -> u64 {
        self.params().iter().map(tensor_bytes).sum()
    }

    /// Bytes of the gradients that exist now.
    pub fn grad_bytes(&self) -> u64 {
        crate::lower::grad_bytes(self.params())
    }

    /// Bytes of optimizer state actually allocated, where the optimizer exposes it (the fused ones); `None` for
    /// `torch::optim`, whose state is internal.
    pub fn state_bytes(&self) -> Option<u64> {
        match self {
            Self::Torch { .. } => None,
            Self::Fused(f) => Some(f.state_bytes()),
        }
    }

    /// Drop the gradients (set to none).
    pub fn zero_grad(&mut self) -> Result<(), TchError> {
        match self {
            Self::Torch { opt, .. } => opt.zero_grad(),
            Self::Fused(f) => fused::grads_to_none(&f.params),
        }
    }

    /// Step (skipped when the scaler found non-finite gradients), then drop the gradients.
    pub fn step(&mut self, scaler: Option<&mut GradScaler>) -> Result<(), TchError> {
        match (&mut *self, scaler) {
            (Self::Torch { opt, .. }, None) => opt.step()?,
            (Self::Torch { opt, params }, Some(s)) => {
                // Unscaled in place; the skip is decided on the host (a synchronisation, on the CPU a no-op).
                let found_inf = s.check(params, true)?;
                if found_inf.f_double_value(&[0])? == 0.0 {
                    opt.step()?;
                }
                s.update(&found_inf)?;
            }
            (Self::Fused(f), None) => f.step(None)?,
            (Self::Fused(f), Some(s)) => {
                // Checked only: the fused kernel divides by the scale and skips the step on the device.
                let found_inf = s.check(&f.params, false)?;
                f.step(Some(ScaleState { scale: &s.scale, found_inf: &found_inf }))?;
                s.update(&found_inf)?;
            }
        }
        self.zero_grad()
    }
}

/// Dynamic loss scaling as `torch.amp.GradScaler` (initial scale from the plan, 2^16 by default; growth 2 every
/// 2000 finite steps, backoff 0.5 on overflow).
pub struct GradScaler {
    scale: Tensor,
    growth_tracker: Tensor,
    one: Tensor,
}

impl GradScaler {
    /// A scaler on `device` starting at `initial`.
    pub fn new(device: Device, initial: f64) -> Result<Self, TchError> {
        Ok(Self {
            scale: Tensor::f_full([1], initial, (Kind::Float, device))?,
            growth_tracker: Tensor::f_zeros([1], (Kind::Int, device))?,
            one: Tensor::f_ones([1], (Kind::Float, device))?,
        })
    }

    /// The current scale (a synchronisation on CUDA).
    pub fn current(&self) -> Result<f64, TchError> {
        self.scale.f_double_value(&[0])
    }

    /// The loss multiplied by the current scale.
    pub fn scale(&self, loss: &Tensor) -> Result<Tensor, TchError> {
        loss.f_mul(&self.scale)
    }

    /// One list-wide check of the gradients of `params` for infinities and NaNs (a one-element flag on the
    /// device), dividing them by the scale when `unscale`.
    fn check(&self, params: &[Tensor], unscale: bool) -> Result<Tensor, TchError> {
        let found_inf = self.scale.f_zeros_like()?;
        let grads: Vec<Tensor> = params.iter().map(Tensor::grad).filter(Tensor::defined).collect();
        let inv = if unscale { self.scale.f_reciprocal()? } else { self.one.shallow_clone() };
        if !grads.is_empty() {
            fused::amp_unscale(&grads, &found_inf, &inv)?;
        }
        Ok(found_inf)
    }

    /// Grow or back off the scale from this step's flag (on the device).
    fn update(&mut self, found_inf: &Tensor) -> Result<(), TchError> {
        let _updated = self.scale.f_internal_amp_update_scale_(&self.growth_tracker, found_inf, 2.0, 0.5, 2000)?;
        Ok(())
    }
}
