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
            sums.push(gradient_squares(&g)?.f_mul_scalar(w)?);
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

/// Values per row when a large gradient's squares are taken row by row ([`gradient_squares`]).
const ROW: i64 = 2048;

/// The sum of the squares of `g`'s values, a 0-d double tensor on its device, without a temporary the size of
/// `g`: up to [`ROW`] values converted to double, squared and summed; more as rows of [`ROW`] values, each row's
/// L2 norm reduced in one pass in the gradient's accumulation type (float for the half precisions), the rows'
/// norms squared and summed in double precision, and the leftover values as a small tensor. Squaring the whole
/// gradient and summing it in double precision allocated three times its bytes at every measured step, inside
/// the optimizer phase: 18 ms for a 2048 x 2048 weight and 141 ms for BERT's word embedding on one core, where
/// the rows take 0.4 and 3.6 ms and agree with an exact sum to about 1e-8 (docs/performance-model.md).
fn gradient_squares(g: &Tensor) -> Result<Tensor, TchError> {
    let flat = g.f_reshape([-1])?;
    let values = flat.size1()?;
    let small = |t: &Tensor| t.f_to_kind(Kind::Double)?.f_square()?.f_sum(Kind::Double);
    let rows = values / ROW;
    if rows == 0 {
        return small(&flat);
    }
    let accumulate = match g.kind() {
        Kind::Float | Kind::Double => None,
        _ => Some(Kind::Float),
    };
    let body = flat.f_narrow(0, 0, rows * ROW)?.f_view([rows, ROW])?;
    let norms = body.f_linalg_norm(2.0, Some([1i64].as_slice()), false, accumulate)?;
    let total = norms.f_to_kind(Kind::Double)?.f_square()?.f_sum(Kind::Double)?;
    match values - rows * ROW {
        0 => Ok(total),
        rest => total.f_add(&small(&flat.f_narrow(0, rows * ROW, rest)?)?),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use tch::{Kind, Tensor};

    use super::{ROW, squares, tensor_norms};

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

    #[test]
    fn a_large_gradients_squares_taken_by_rows_agree_with_an_exact_sum_at_every_remainder() {
        for (values, kind, tolerance) in [
            (1, Kind::Float, 1e-12),
            (ROW - 1, Kind::Float, 1e-12),
            (ROW, Kind::Float, 1e-6),
            (ROW + 1, Kind::Float, 1e-6),
            (3 * ROW + 5, Kind::Float, 1e-6),
            (200_003, Kind::Float, 1e-6),
            (200_003, Kind::BFloat16, 1e-6),
        ] {
            let g = Tensor::randn([values], (Kind::Float, tch::Device::Cpu)).to_kind(kind);
            let exact: f64 = Vec::<f64>::try_from(g.to_kind(Kind::Double)).unwrap().iter().map(|v| v * v).sum();
            let p = Tensor::zeros([values], (kind, tch::Device::Cpu)).set_requires_grad(true);
            p.f_mul(&g).unwrap().sum(Kind::Float).backward();
            let got = squares(&[p], &|_| 1.0, 1.0).unwrap();
            assert!((got / exact - 1.0).abs() <= tolerance, "{values} values of {kind:?}: {got} against {exact}");
        }
    }
}
