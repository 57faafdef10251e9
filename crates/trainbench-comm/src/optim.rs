//! The optimizers a parameter server applies to the weights it holds, on host `f32` buffers, with PyTorch's
//! update rules (`torch.optim.SGD`, `Adam`, `AdamW`; no dampening, no amsgrad), so a parameter-server run
//! trains what an all-reduce run with the backend's own optimizer trains.

use trainbench_graph::training::OptimizerSpec;

/// An optimizer over one flat buffer of weights, with its state.
#[derive(Debug, Clone)]
pub struct HostOptimizer {
    spec: OptimizerSpec,
    step: u64,
    /// Momentum buffer (SGD) or first moment (Adam, AdamW); empty until first used.
    first: Vec<f32>,
    /// Second moment (Adam, AdamW).
    second: Vec<f32>,
}

impl HostOptimizer {
    /// A fresh optimizer (step 0, no state).
    pub fn new(spec: &OptimizerSpec) -> Self {
        HostOptimizer { spec: spec.clone(), step: 0, first: Vec::new(), second: Vec::new() }
    }

    /// Bytes of state held (momentum, moments).
    pub fn state_bytes(&self) -> u64 {
        4 * (self.first.len() + self.second.len()) as u64
    }

    /// One update of `weights` with gradient `grads` (the same length).
    pub fn step(&mut self, weights: &mut [f32], grads: &[f32]) {
        self.step += 1;
        match self.spec {
            OptimizerSpec::Sgd { lr, momentum, weight_decay, nesterov } => {
                let (lr, m, wd) = (lr as f32, momentum as f32, weight_decay as f32);
                if m != 0.0 && self.first.is_empty() {
                    self.first = vec![0.0; weights.len()];
                }
                for (i, (p, &g)) in weights.iter_mut().zip(grads).enumerate() {
                    let mut d = if wd != 0.0 { g + wd * *p } else { g };
                    if m != 0.0 {
                        let buf = &mut self.first[i];
                        *buf = if self.step == 1 { d } else { m * *buf + d };
                        d = if nesterov { d + m * *buf } else { *buf };
                    }
                    *p -= lr * d;
                }
            }
            OptimizerSpec::Adam { lr, beta1, beta2, eps, weight_decay } => {
                self.adam(weights, grads, [lr, beta1, beta2, eps], weight_decay, false);
            }
            OptimizerSpec::Adamw { lr, beta1, beta2, eps, weight_decay } => {
                self.adam(weights, grads, [lr, beta1, beta2, eps], weight_decay, true);
            }
        }
    }

    fn adam(&mut self, weights: &mut [f32], grads: &[f32], [lr, b1, b2, eps]: [f64; 4], wd: f64, decoupled: bool) {
        if self.first.is_empty() {
            self.first = vec![0.0; weights.len()];
            self.second = vec![0.0; weights.len()];
        }
        let t = self.step as i32;
        let bc1 = 1.0 - b1.powi(t);
        let bc2_sqrt = (1.0 - b2.powi(t)).sqrt();
        let step_size = (lr / bc1) as f32;
        let (b1, b2, eps, wd, lr) = (b1 as f32, b2 as f32, eps as f32, wd as f32, lr as f32);
        let bc2_sqrt = bc2_sqrt as f32;
        for (i, (p, &g)) in weights.iter_mut().zip(grads).enumerate() {
            let g = if decoupled {
                *p *= 1.0 - lr * wd;
                g
            } else if wd != 0.0 {
                g + wd * *p
            } else {
                g
            };
            let m = &mut self.first[i];
            *m = b1 * *m + (1.0 - b1) * g;
            let v = &mut self.second[i];
            *v = b2 * *v + (1.0 - b2) * g * g;
            let denom = v.sqrt() / bc2_sqrt + eps;
            *p -= step_size * *m / denom;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sgd_with_momentum_follows_pytorch() {
        // torch.optim.SGD([p], lr=0.1, momentum=0.9) on p = 1 with gradients 1, 1: p = 0.9, then 0.9 - 0.1 * 1.9.
        let mut o =
            HostOptimizer::new(&OptimizerSpec::Sgd { lr: 0.1, momentum: 0.9, weight_decay: 0.0, nesterov: false });
        let mut w = [1.0f32];
        o.step(&mut w, &[1.0]);
        assert!((w[0] - 0.9).abs() < 1e-7);
        o.step(&mut w, &[1.0]);
        assert!((w[0] - (0.9 - 0.19)).abs() < 1e-6, "{}", w[0]);
        assert_eq!(o.state_bytes(), 4);
    }

    #[test]
    fn adam_first_step_moves_by_the_learning_rate() {
        // Adam's first step is lr * g / (|g| + eps') whatever the gradient's size; AdamW also shrinks the weight.
        let spec = OptimizerSpec::Adam { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 };
        let mut o = HostOptimizer::new(&spec);
        let mut w = [1.0f32, 1.0];
        o.step(&mut w, &[3.0, -0.5]);
        assert!((w[0] - 0.99).abs() < 1e-6 && (w[1] - 1.01).abs() < 1e-6, "{w:?}");
        let spec = OptimizerSpec::Adamw { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.5 };
        let mut o = HostOptimizer::new(&spec);
        let mut w = [1.0f32];
        o.step(&mut w, &[3.0]);
        assert!((w[0] - (1.0 * (1.0 - 0.005) - 0.01)).abs() < 1e-6, "{w:?}");
    }
}
