//! The fused optimizers against libtorch's `torch::optim` on the CPU (ATen has CPU kernels of the fused ops):
//! the same weights after a few steps, skipped steps when an infinity was found, and the list-wide unscale.
#![allow(clippy::unwrap_used)]

use tch::{COptimizer, Device, Kind, Tensor};
use trainbench_graph::OptimizerSpec;

use super::*;

fn leaf(v: &[f32], shape: &[i64]) -> Tensor {
    Tensor::from_slice(v).reshape(shape).set_requires_grad(true)
}

/// Parameters of a tiny affine model and a loss whose gradients differ per element.
fn model() -> Vec<Tensor> {
    vec![leaf(&[0.5, -1.0, 2.0, 0.25, 0.75, -0.5], &[2, 3]), leaf(&[0.1, -0.2, 0.3], &[3])]
}

fn loss(params: &[Tensor]) -> Tensor {
    let x = Tensor::from_slice(&[1.0f32, 2.0, -1.0, 0.5]).reshape([2, 2]);
    (x.matmul(&params[0]) + &params[1]).pow_tensor_scalar(2.0).sum(Kind::Float)
}

fn values(params: &[Tensor]) -> Vec<f32> {
    params.iter().flat_map(|p| Vec::<f32>::try_from(p.detach().flatten(0, -1)).unwrap()).collect()
}

fn reference(spec: &OptimizerSpec, steps: usize) -> Vec<f32> {
    let params = model();
    let mut opt = match *spec {
        OptimizerSpec::Sgd { lr, momentum, weight_decay, nesterov } => {
            COptimizer::sgd(lr, momentum, 0.0, weight_decay, nesterov).unwrap()
        }
        OptimizerSpec::Adam { lr, beta1, beta2, eps, weight_decay } => {
            COptimizer::adam(lr, beta1, beta2, weight_decay, eps, false).unwrap()
        }
        OptimizerSpec::Adamw { lr, beta1, beta2, eps, weight_decay } => {
            COptimizer::adamw(lr, beta1, beta2, weight_decay, eps, false).unwrap()
        }
    };
    for p in &params {
        opt.add_parameters(p, 0).unwrap();
    }
    for _ in 0..steps {
        loss(&params).backward();
        opt.step().unwrap();
        opt.zero_grad().unwrap();
    }
    values(&params)
}

fn fused(spec: &OptimizerSpec, steps: usize) -> Vec<f32> {
    let params = model();
    let mut opt = FusedOptimizer::new(spec, params.iter().map(Tensor::shallow_clone).collect());
    for _ in 0..steps {
        loss(&params).backward();
        opt.step(None).unwrap();
        grads_to_none(&params).unwrap();
        assert!(params.iter().all(|p| !p.grad().defined()));
    }
    values(&params)
}

fn specs() -> Vec<OptimizerSpec> {
    vec![
        OptimizerSpec::Sgd { lr: 0.01, momentum: 0.0, weight_decay: 0.0, nesterov: false },
        OptimizerSpec::Sgd { lr: 0.01, momentum: 0.9, weight_decay: 1e-3, nesterov: false },
        OptimizerSpec::Sgd { lr: 0.01, momentum: 0.9, weight_decay: 0.0, nesterov: true },
        OptimizerSpec::Adam { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 },
        OptimizerSpec::Adam { lr: 1e-2, beta1: 0.8, beta2: 0.99, eps: 1e-6, weight_decay: 1e-2 },
        OptimizerSpec::Adamw { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.1 },
    ]
}

#[test]
fn fused_steps_match_torch_optim() {
    for spec in specs() {
        let (want, got) = (reference(&spec, 5), fused(&spec, 5));
        let start = values(&model());
        assert!(want.iter().zip(&start).any(|(a, b)| a != b), "{spec:?}: the reference did not move");
        for (i, (a, b)) in want.iter().zip(&got).enumerate() {
            assert!((a - b).abs() <= 1e-5 * a.abs().max(1.0), "{spec:?} element {i}: torch::optim {a}, fused {b}");
        }
    }
}

#[test]
fn a_scaled_step_unscales_and_an_infinite_one_is_skipped() {
    for spec in specs() {
        let want = reference(&spec, 1);
        let params = model();
        let mut opt = FusedOptimizer::new(&spec, params.iter().map(Tensor::shallow_clone).collect());
        let scale = Tensor::from_slice(&[1024.0f32]);
        let mut found_inf = Tensor::zeros([1], (Kind::Float, Device::Cpu));
        // A step with every gradient infinite: skipped, and Adam's step count stays at 0.
        (loss(&params) * f64::INFINITY).backward();
        let grads: Vec<Tensor> = params.iter().map(Tensor::grad).collect();
        amp_unscale(&grads, &found_inf, &Tensor::from_slice(&[1.0f32])).unwrap();
        assert_eq!(found_inf.double_value(&[0]), 1.0);
        opt.step(Some(ScaleState { scale: &scale, found_inf: &found_inf })).unwrap();
        assert_eq!(values(&params), values(&model()), "{spec:?}: a step with an infinity moved the weights");
        grads_to_none(&params).unwrap();
        // Then a finite step on the loss scaled by 1024: the same as one unscaled reference step.
        let _ = found_inf.zero_();
        (loss(&params) * 1024.0).backward();
        opt.step(Some(ScaleState { scale: &scale, found_inf: &found_inf })).unwrap();
        for (a, b) in want.iter().zip(values(&params)) {
            assert!((a - b).abs() <= 1e-5 * a.abs().max(1.0), "{spec:?}: reference {a}, scaled fused {b}");
        }
        assert!(opt.state_bytes() > 0 || matches!(spec, OptimizerSpec::Sgd { momentum: 0.0, .. }));
    }
}

#[test]
fn unscale_divides_finite_gradients_in_place() {
    let g = vec![Tensor::from_slice(&[2.0f32, 4.0]), Tensor::from_slice(&[8.0f32])];
    let found_inf = Tensor::zeros([1], (Kind::Float, Device::Cpu));
    amp_unscale(&g, &found_inf, &Tensor::from_slice(&[0.5f32])).unwrap();
    assert_eq!(found_inf.double_value(&[0]), 0.0);
    assert_eq!(values(&g), vec![1.0, 2.0, 4.0]);
    let with_nan = vec![Tensor::from_slice(&[f32::NAN])];
    amp_unscale(&with_nan, &found_inf, &Tensor::from_slice(&[1.0f32])).unwrap();
    assert_eq!(found_inf.double_value(&[0]), 1.0);
}
