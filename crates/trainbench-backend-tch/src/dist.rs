//! A data-parallel worker's side in the tch backend: the gradients (or, with parameter servers, the weights)
//! staged through host memory for the exchange (`trainbench_comm`), which decides what comes back.

use tch::{Device, Kind, TchError, Tensor};
use trainbench_comm::{GradientExchange, StepExchange, StopWish};

fn comm_error(e: impl std::fmt::Display) -> TchError {
    TchError::Kind(format!("data-parallel exchange: {e}"))
}

/// Refuse parameters that do not match the exchange's layout (they would exchange the wrong values).
pub fn check_layout(x: &dyn GradientExchange, params: &[Tensor]) -> Result<(), TchError> {
    let layout = x.layout();
    let sizes: Vec<usize> = params.iter().map(|p| p.numel()).collect();
    let expected: Vec<usize> = (0..layout.decls.len()).map(|i| layout.len_of(i)).collect();
    if sizes != expected {
        return Err(comm_error(format!(
            "the model's {} trained tensors do not match the exchange's layout of {}",
            sizes.len(),
            expected.len()
        )));
    }
    Ok(())
}

/// Exchange the gradients of `params` (after backward). All-reduce: the gradients become the mean over the
/// workers and the caller steps its optimizer. Parameter servers: the parameters become the servers' updated
/// weights and the caller skips its optimizer.
///
/// `host` holds the staging buffers, kept from step to step (a fresh one per step would pay its page faults
/// every step).
pub fn exchange(
    x: &mut dyn GradientExchange,
    params: &[Tensor],
    wish: StopWish,
    host: &mut HostBuffers,
) -> Result<StepExchange, TchError> {
    let total = x.layout().total;
    let grads = &mut host.grads;
    grads.resize(total, 0.0);
    stage_grads(params.iter(), grads)?;
    // Parameter servers send the weights back; ZeRO (`PlainStep::finish_zero`) does not come here.
    let gathers = x.strategy().servers() > 0;
    let weights = &mut host.weights;
    weights.resize(if gathers { total } else { 0 }, 0.0);
    let step = x.exchange(grads, weights, wish).map_err(comm_error)?;
    apply(params, &step, grads, weights)?;
    Ok(step)
}

/// Host staging buffers of a data-parallel worker, reused every step.
#[derive(Debug, Default)]
pub struct HostBuffers {
    /// Flat gradients ([`trainbench_comm::Layout`] order).
    pub grads: Vec<f32>,
    /// Flat weights, for strategies that send them back.
    pub weights: Vec<f32>,
}

/// What an exchange decided, into `params`: the new weights (`step.weights_updated`) or the mean gradients.
pub fn apply(params: &[Tensor], step: &StepExchange, grads: &[f32], weights: &[f32]) -> Result<(), TchError> {
    let source = if step.weights_updated { weights } else { grads };
    let mut at = 0;
    tch::no_grad(|| -> Result<(), TchError> {
        for p in params {
            let n = p.numel();
            let values = &source[at..at + n];
            if step.weights_updated {
                write_into(&p.shallow_clone(), values)?;
            } else {
                let g = p.grad();
                if g.defined() {
                    write_into(&g, values)?;
                }
            }
            at += n;
        }
        Ok(())
    })
}

/// The accumulated gradients of `params`, one after the other, into `out` (as long as they are together); zeros
/// for a tensor that got none.
pub(crate) fn stage_grads<'t>(params: impl Iterator<Item = &'t Tensor>, out: &mut [f32]) -> Result<(), TchError> {
    let mut at = 0;
    for p in params {
        let n = p.numel();
        let g = p.grad();
        if g.defined() {
            let host = g.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?.f_contiguous()?;
            host.f_copy_data(&mut out[at..at + n], n)?;
        } else {
            out[at..at + n].fill(0.0);
        }
        at += n;
    }
    Ok(())
}

/// `values` into `t`'s elements: straight into its memory when it is a contiguous `f32` CPU tensor (one pass),
/// else through a staged tensor, copied under `no_grad` (`t` may be a leaf that requires a gradient: a weight
/// on a GPU, or in bf16).
pub(crate) fn write_into(t: &Tensor, values: &[f32]) -> Result<(), TchError> {
    if t.device() == Device::Cpu && t.kind() == Kind::Float && t.is_contiguous() && t.numel() == values.len() {
        // SAFETY: a live, contiguous CPU tensor of `values.len()` f32 elements, written by this thread only
        // (gradients and weights are not read concurrently), under no_grad.
        let dst = unsafe { std::slice::from_raw_parts_mut(t.data_ptr().cast::<f32>(), values.len()) };
        dst.copy_from_slice(values);
        return Ok(());
    }
    let staged = Tensor::f_from_slice(values)?.f_view(t.size().as_slice())?;
    let mut dst = t.shallow_clone();
    tch::no_grad(|| dst.f_copy_(&staged))
}

/// Every value of `params`, flat, in order, through host memory.
pub fn flat_values(params: &[Tensor]) -> Result<Vec<f32>, TchError> {
    let total: usize = params.iter().map(Tensor::numel).sum();
    let mut out = vec![0f32; total];
    let mut at = 0;
    for p in params {
        let n = p.numel();
        let t = p.f_detach()?.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?.f_contiguous()?;
        t.f_copy_data(&mut out[at..at + n], n)?;
        at += n;
    }
    Ok(out)
}

/// The digest of `params`' values ([`trainbench_contract::backend::weights_digest`]), read through host memory.
pub fn digest(params: &[Tensor]) -> Result<String, TchError> {
    let flat = flat_values(params)?;
    let mut at = 0;
    let tensors = params.iter().map(|p| {
        let slice = &flat[at..at + p.numel()];
        at += p.numel();
        slice
    });
    Ok(trainbench_contract::backend::weights_digest(tensors))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A weight that requires a gradient and is not a contiguous f32 CPU tensor (bf16 here; on a GPU every
    /// weight) takes the staged path, which must not be recorded by autograd (ZeRO writes gathered weights so).
    #[test]
    fn write_into_a_leaf_that_requires_grad_through_the_staged_path() {
        for kind in [Kind::BFloat16, Kind::Float] {
            let leaf = Tensor::zeros([2, 3], (kind, Device::Cpu));
            // A transposed view is not contiguous: the f32 case takes the staged path too.
            let leaf =
                if kind == Kind::Float { leaf.tr().set_requires_grad(true) } else { leaf.set_requires_grad(true) };
            let values = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
            write_into(&leaf, &values).unwrap();
            let back = flat_values(std::slice::from_ref(&leaf)).unwrap();
            assert_eq!(back, values, "{kind:?}");
            assert!(leaf.requires_grad(), "{kind:?}: still a weight that requires a gradient");
        }
    }
}
