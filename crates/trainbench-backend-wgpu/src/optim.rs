//! Optimizers written on the raw (flat) parameter tensors, step for step as PyTorch's `torch.optim` computes
//! them: SGD (momentum, dampening 0, Nesterov, L2 decay), Adam (coupled L2 decay) and AdamW (decoupled decay).

use burn::tensor::Tensor;
use trainbench_graph::OptimizerSpec;

/// Optimizer state for every parameter slot.
pub struct Optimizer {
    spec: OptimizerSpec,
    /// Per slot: momentum buffer (SGD) or first and second moments (Adam/AdamW); empty until first used.
    state: Vec<Vec<Tensor<1>>>,
    /// Steps taken per slot (Adam's bias correction counts a parameter's own steps).
    steps: Vec<u64>,
}

impl Optimizer {
    /// An optimizer for `slots` parameter slots.
    pub fn new(spec: OptimizerSpec, slots: usize) -> Self {
        Self { spec, state: vec![Vec::new(); slots], steps: vec![0; slots] }
    }

    /// Update one parameter from its gradient (both without autodiff), returning the new value.
    pub fn update(&mut self, slot: usize, p: Tensor<1>, g: Tensor<1>) -> Tensor<1> {
        self.steps[slot] += 1;
        let t = self.steps[slot];
        let state = &mut self.state[slot];
        match self.spec {
            OptimizerSpec::Sgd { lr, momentum, weight_decay, nesterov } => {
                let mut d = if weight_decay != 0.0 { g + p.clone().mul_scalar(weight_decay) } else { g };
                if momentum != 0.0 {
                    let buf = match state.pop() {
                        Some(b) => b.mul_scalar(momentum) + d.clone(),
                        None => d.clone(),
                    };
                    d = if nesterov { d + buf.clone().mul_scalar(momentum) } else { buf.clone() };
                    state.push(buf);
                }
                p - d.mul_scalar(lr)
            }
            OptimizerSpec::Adam { lr, beta1, beta2, eps, weight_decay } => {
                let g = if weight_decay != 0.0 { g + p.clone().mul_scalar(weight_decay) } else { g };
                adam(state, p, g, t, lr, beta1, beta2, eps)
            }
            OptimizerSpec::Adamw { lr, beta1, beta2, eps, weight_decay } => {
                let p = if weight_decay != 0.0 { p.mul_scalar(1.0 - lr * weight_decay) } else { p };
                adam(state, p, g, t, lr, beta1, beta2, eps)
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn adam(
    state: &mut Vec<Tensor<1>>,
    p: Tensor<1>,
    g: Tensor<1>,
    t: u64,
    lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
) -> Tensor<1> {
    let (m, v) = match (state.pop(), state.pop()) {
        (Some(v), Some(m)) => (m, v),
        _ => (g.zeros_like(), g.zeros_like()),
    };
    let m = m.mul_scalar(beta1) + g.clone().mul_scalar(1.0 - beta1);
    let v = v.mul_scalar(beta2) + g.square().mul_scalar(1.0 - beta2);
    let bc1 = 1.0 - beta1.powi(t as i32);
    let bc2 = 1.0 - beta2.powi(t as i32);
    let denom = v.clone().sqrt().div_scalar(bc2.sqrt()).add_scalar(eps);
    let p = p - m.clone().div(denom).mul_scalar(lr / bc1);
    state.push(m);
    state.push(v);
    p
}
