//! The differentiable collectives over an in-process group of two ranks: forward values, the gradients the
//! backward hands on, the traffic counted, and an operation's failure surfacing as an error of the backward.

use tch::{Kind, Tensor};
use trainbench_comm::local::ThreadComm;

use super::*;

/// Run `body(rank, group)` on every rank of an in-process group of `size`, each on its own thread.
fn on_ranks<T: Send + 'static>(size: usize, body: fn(usize, Group) -> T) -> Vec<T> {
    let handles: Vec<_> = ThreadComm::group(size)
        .into_iter()
        .enumerate()
        .map(|(rank, comm)| std::thread::spawn(move || body(rank, Group::new(Box::new(comm)))))
        .collect();
    handles.into_iter().map(|h| h.join().expect("rank thread")).collect()
}

fn values(t: &Tensor) -> Vec<f32> {
    let t = t.to_kind(Kind::Float).contiguous().view(-1);
    let mut out = vec![0f32; t.numel()];
    t.copy_data(&mut out, t.numel());
    out
}

#[test]
fn reduce_sums_forward_and_passes_the_gradient_through() {
    let out = on_ranks(2, |rank, group| {
        let x = Tensor::from_slice(&[1f32, 2., 3.]).g_mul_scalar((rank + 1) as f64).set_requires_grad(true);
        let y = group.collective(TensorCollective::Reduce, &x).unwrap();
        let w = Tensor::from_slice(&[1f32, 10., 100.]);
        (y * &w).sum(Kind::Float).backward();
        (values(&x.detach()), values(&x.grad()), group.traffic())
    });
    for (rank, (_, grad, traffic)) in out.iter().enumerate() {
        assert_eq!(grad, &vec![1., 10., 100.], "rank {rank}: the backward of a reduce is the identity");
        assert_eq!(traffic.all_reduce, (1, 3));
        assert_eq!(traffic.all_gather, (0, 0));
    }
}

#[test]
fn copy_is_the_identity_forward_and_sums_the_gradients() {
    let out = on_ranks(2, |rank, group| {
        let x = Tensor::from_slice(&[1f32, 2.]).set_requires_grad(true);
        let y = group.collective(TensorCollective::Copy, &x).unwrap();
        let forward = values(&y.detach());
        (y * ((rank + 1) as f64)).sum(Kind::Float).backward();
        (forward, values(&x.grad()))
    });
    for (forward, grad) in out {
        assert_eq!(forward, vec![1., 2.]);
        assert_eq!(grad, vec![3., 3.], "each rank's gradient (1 and 2) summed");
    }
}

#[test]
fn gather_and_scatter_along_a_dimension_are_each_others_transpose() {
    let out = on_ranks(2, |rank, group| {
        // Rank r holds a [2, 1, 2] shard of a [2, 2, 2] tensor along dimension 1.
        let base = if rank == 0 { [0f32, 1., 4., 5.] } else { [2f32, 3., 6., 7.] };
        let x = Tensor::from_slice(&base).view([2, 1, 2]).set_requires_grad(true);
        let full = group.collective(TensorCollective::Gather(1), &x).unwrap();
        let gathered = values(&full.detach());
        // Weighting by the element's own value: the reduce-scatter of a replicated gradient is twice the shard.
        let w = Tensor::from_slice(&[0f32, 1., 2., 3., 4., 5., 6., 7.]).view([2, 2, 2]);
        (&full * &w).sum(Kind::Float).backward();
        let scattered = group.collective(TensorCollective::Scatter(1), &w.detach()).unwrap();
        (gathered, values(&x.grad()), values(&scattered), base.to_vec())
    });
    for (gathered, grad, scattered, base) in out {
        assert_eq!(gathered, vec![0., 1., 2., 3., 4., 5., 6., 7.]);
        let twice: Vec<f32> = base.iter().map(|v| 2.0 * v).collect();
        assert_eq!(grad, twice, "the gathered tensor's gradient, summed over both ranks, this rank's block");
        assert_eq!(scattered, twice);
    }
}

#[test]
fn a_group_of_one_is_the_identity() {
    let out = on_ranks(1, |_, group| {
        let x = Tensor::from_slice(&[5f32]).set_requires_grad(true);
        let y = group.collective(TensorCollective::Reduce, &x).unwrap();
        y.sum(Kind::Float).backward();
        (values(&x.grad()), group.traffic())
    });
    assert_eq!(out[0].0, vec![1.]);
    assert_eq!(out[0].1, GroupTraffic::default());
}

/// An operation that fails in its backward.
struct FailsBackward;

impl DiffOp for FailsBackward {
    fn name(&self) -> &'static str {
        "failing test operation"
    }
    fn forward(&mut self, input: &Tensor) -> Result<Tensor, TchError> {
        input.f_mul_scalar(2.0)
    }
    fn backward(&mut self, _grad: &Tensor) -> Result<Tensor, TchError> {
        Err(TchError::Kind("the peer is gone".into()))
    }
}

#[test]
fn a_failing_backward_is_an_error_naming_the_operation() {
    let x = Tensor::from_slice(&[1f32]).set_requires_grad(true);
    let y = apply(Box::new(FailsBackward), &x).unwrap();
    assert_eq!(values(&y.detach()), vec![2.]);
    let err = y.sum(Kind::Float).f_backward().unwrap_err().to_string();
    assert!(err.contains("failing test operation (backward)") && err.contains("the peer is gone"), "{err}");
    // Without gradients only the forward runs, and nothing is kept.
    let z = tch::no_grad(|| apply(Box::new(FailsBackward), &x)).unwrap();
    assert!(!z.requires_grad());
}
