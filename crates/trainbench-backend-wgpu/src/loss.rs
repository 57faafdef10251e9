//! Training losses, each reduced to its batch mean (a rank-1 tensor of one element), in PyTorch's definitions.

use burn::tensor::activation::{log_softmax, relu, softmax};
use burn::tensor::module::ctc_loss;
use burn::tensor::{Int, Tensor};

use crate::value::{Act, IntAct, Value, ValueError};

/// Softmax cross-entropy over the last axis against integer labels, averaged over every labelled position
/// (`nn.CrossEntropyLoss()` on the flattened positions).
pub fn cross_entropy(logits: &Act, labels: &IntAct) -> Tensor<1> {
    let classes = logits.shape.last().copied().unwrap_or(1);
    let rows = logits.numel() / classes;
    let logp = log_softmax(logits.view([rows, classes]), 1);
    let picked = logp.gather(1, labels.view([rows, 1]));
    picked.mean().neg()
}

/// Mean squared error over every element (`nn.MSELoss()`).
pub fn mse(a: &Act, b: &Act) -> Tensor<1> {
    let d = a.t.clone() - b.t.clone();
    d.square().mean()
}

/// Smooth-L1 over every element (`F.smooth_l1_loss(a, b, beta=beta)`, mean): `0.5 d^2 / beta` where
/// `|d| < beta`, else `|d| - 0.5 beta`; plain L1 when `beta` is 0.
pub fn smooth_l1(a: &Act, b: &Act, beta: f64) -> Tensor<1> {
    let d = (a.t.clone() - b.t.clone()).abs();
    if beta <= 0.0 {
        return d.mean();
    }
    let quadratic = d.clone().square().mul_scalar(0.5 / beta);
    let linear = d.clone().sub_scalar(0.5 * beta);
    linear.mask_where(d.lower_elem(beta), quadratic).mean()
}

/// Binary cross-entropy with logits over every element, in the numerically stable form
/// `max(x, 0) - x y + log(1 + exp(-|x|))` (`nn.BCEWithLogitsLoss()`). Dense targets are binarised at 0
/// (synthetic targets are N(0, 1)); integer targets are used as 0/1 values.
pub fn bce_with_logits(x: &Act, target: &Value) -> Tensor<1> {
    let y = match target {
        Value::F(a) => a.t.clone().greater_elem(0.0).float(),
        Value::I(i) => i.t.clone().float(),
    };
    let x = x.t.clone();
    let l = relu(x.clone()) - x.clone() * y + x.abs().neg().exp().log1p();
    l.mean()
}

/// CTC with blank 0 over logits `[B, T, C]` and full-length labels `[B, S]`: each sample's negative
/// log-likelihood divided by its label length, averaged over the batch (`nn.CTCLoss()`'s `mean`), with
/// infeasible samples (infinite loss) counted as 0 as `zero_infinity = true` does.
pub fn ctc(logits: &Act, labels: &IntAct) -> Result<Tensor<1>, ValueError> {
    let [b, t, c]: [usize; 3] =
        logits.shape.as_slice().try_into().map_err(|_| ValueError("CTC logits must be [B, T, C]".into()))?;
    let s = labels.shape.get(1).copied().ok_or_else(|| ValueError("CTC labels must be [B, S]".into()))?;
    let logp = log_softmax(logits.view([b, t, c]), 2).swap_dims(0, 1);
    let device = logp.device();
    let input_lengths = Tensor::<1, Int>::full([b], t as i64, &device);
    let target_lengths = Tensor::<1, Int>::full([b], s as i64, &device);
    let per_sample = ctc_loss(logp, labels.view([b, s]), input_lengths, target_lengths, 0);
    let infeasible = per_sample.clone().is_inf();
    Ok(per_sample.mask_fill(infeasible, 0.0).div_scalar(s as f64).mean())
}

/// Weights of the actor-critic loss terms.
pub struct ActorCriticWeights {
    /// Entropy bonus coefficient.
    pub entropy: f64,
    /// Value-loss coefficient.
    pub value: f64,
}

/// A3C loss per sample, averaged over the batch:
/// `-log pi(a) * (R - V).detach() - entropy * H(pi) + value * (R - V)^2`.
pub fn actor_critic(logits: &Act, value: &Act, actions: &IntAct, returns: &Act, w: &ActorCriticWeights) -> Tensor<1> {
    let b = logits.shape[0];
    let a = logits.numel() / b;
    let l = logits.view([b, a]);
    let logp = log_softmax(l.clone(), 1);
    let p = softmax(l, 1);
    let entropy = (p * logp.clone()).sum_dim(1).neg();
    let chosen = logp.gather(1, actions.view([b, 1]));
    let adv = returns.view([b, 1]) - value.view([b, 1]);
    let policy = chosen.neg() * adv.clone().detach();
    let total = policy - entropy.mul_scalar(w.entropy) + adv.square().mul_scalar(w.value);
    total.mean()
}
