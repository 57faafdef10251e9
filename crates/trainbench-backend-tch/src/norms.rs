//! Norms of a model's tensors and of their gradients, summed on the device and read once: what a run records so
//! that a layout's training can be compared with one rank's.

use tch::{Kind, TchError, Tensor};

use crate::tensor_parallel::TensorParallel;

/// The share of each trained tensor's values (optimizer order) a rank owns: one over the tensor group's size for
/// a tensor every rank of `tensor` holds whole ([`TensorParallel::gradient_weights`]), 1 for a split one or
/// without tensor parallelism; divided by `replicas`, the ranks holding the same values along the data dimension.
pub fn owned_share(tensor: Option<&TensorParallel>, replicas: usize) -> impl Fn(usize) -> f64 {
    let weights = tensor.map(TensorParallel::gradient_weights);
    let replicas = replicas.max(1) as f64;
    move |i| weights.as_ref().and_then(|w| w.get(i)).copied().unwrap_or(1.0) / replicas
}

/// The sum over `params` with a gradient of `weight(i)` times the squares of tensor `i`'s gradient divided by
/// `scale` (a loss scale), summed on the device and read once.
pub fn squares(params: &[Tensor], weight: &dyn Fn(usize) -> f64, scale: f64) -> Result<f64, TchError> {
    let mut sums = Vec::with_capacity(params.len());
    for (i, p) in params.iter().enumerate() {
        let g = p.grad();
        let w = weight(i);
        if g.defined() && w != 0.0 {
            sums.push(g.f_to_kind(Kind::Float)?.f_square()?.f_sum(Kind::Double)?.f_mul_scalar(w)?);
        }
    }
    if sums.is_empty() {
        return Ok(0.0);
    }
    let total = Tensor::f_stack(&sums, 0)?.f_sum(Kind::Double)?.f_double_value(&[])?;
    Ok(total / (scale * scale))
}

/// Each tensor's L2 norm (accumulated in double precision).
pub fn tensor_norms(params: &[Tensor]) -> Result<Vec<f64>, TchError> {
    params
        .iter()
        .map(|p| p.f_detach()?.f_to_kind(Kind::Double)?.f_square()?.f_sum(Kind::Double)?.f_sqrt()?.f_double_value(&[]))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use tch::{Kind, Tensor};

    use super::{squares, tensor_norms};

    #[test]
    fn squares_weigh_each_gradient_undo_the_loss_scale_and_skip_tensors_without_one() {
        let a = Tensor::from_slice(&[1.0f32, 2.0]).set_requires_grad(true);
        let b = Tensor::from_slice(&[3.0f32]).set_requires_grad(true);
        let unused = Tensor::from_slice(&[5.0f32]).set_requires_grad(true);
        // A loss scaled by 4: gradients 4, 4 (a) and 8 (b).
        let loss = (a.sum(Kind::Float) + b.sum(Kind::Float) * 2.0) * 4.0;
        loss.backward();
        let weight = |i: usize| if i == 1 { 0.5 } else { 1.0 };
        // (16 + 16) x 1 + 64 x 0.5 = 64, over the scale's square 16.
        assert_eq!(squares(&[a, b, unused], &weight, 4.0).unwrap(), 4.0);
        assert_eq!(tensor_norms(&[Tensor::from_slice(&[3.0f32, 4.0])]).unwrap(), vec![5.0]);
    }
}
