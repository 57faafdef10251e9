//! Training losses: each loss node's per-sample value averaged over the batch (a 0-d tensor), computed in fp32
//! even under autocast; the WGAN-GP gradient penalty.

use tch::{Kind, Reduction, TchError, Tensor};
use trainbench_graph::graph::{Graph, LossKind, NodeId};

/// Batch mean of loss node `id` (of kind `loss`) from its evaluated inputs.
///
/// - cross-entropy: mean over the batch of the per-sample mean over positions (`[.., classes]` logits).
/// - CTC: PyTorch's `reduction = "mean"` (each sample's loss divided by its label length), every sample using
///   the full output length, class 0 the blank, `zero_infinity = true` (random labels can be infeasible).
/// - MSE: mean over all elements.
/// - BCE with logits: dense targets are binarised at 0 (synthetic targets are N(0, 1), so this is a fair coin);
///   integer targets are used as 0/1 values.
/// - actor-critic (A3C): policy gradient `-log pi(a) * (R - V).detach()`, minus `entropy` x entropy, plus
///   `value` x `(R - V)^2`, averaged over the batch.
/// - smooth L1: PyTorch's `smooth_l1_loss` with the node's beta, mean over all elements.
/// - Wasserstein (WGAN-GP critic loss): `mean D(fake) - mean D(real) + gp_weight * GP` from the critic's
///   scores `[B, 3, 1]` on the stacked (real, fake, x_hat) batch of `critic_batch` (input 1), where
///   `GP = mean_b (||d D(x_hat) / d x_hat||_2 - 1)^2` (second-order: the penalty's graph is kept). Outside a
///   critic update (`critic_update = false`) the interpolates carry no gradient and the penalty is left out.
///
/// The loss node's `weight` is applied by the caller when summing losses.
pub fn forward(
    graph: &Graph,
    id: NodeId,
    loss: LossKind,
    ins: &[Tensor],
    critic_update: bool,
) -> Result<Tensor, TchError> {
    let node = &graph.nodes[id];
    match loss {
        LossKind::CrossEntropy => {
            let logits = ins[0].f_to_kind(Kind::Float)?;
            let classes = *logits.size().last().unwrap_or(&1);
            logits.f_reshape([-1, classes])?.f_cross_entropy_loss(
                &ins[1].f_reshape([-1])?,
                None::<Tensor>,
                Reduction::Mean,
                -100,
                0.0,
            )
        }
        LossKind::Ctc => {
            let s = ins[0].size();
            let (b, t) = (s[0], s[1]);
            let log_probs = ins[0].f_to_kind(Kind::Float)?.f_log_softmax(-1, None::<Kind>)?.f_transpose(0, 1)?;
            let label_len = ins[1].size()[1];
            let dev = ins[0].device();
            let input_lengths = Tensor::f_full([b], t, (Kind::Int64, dev))?;
            let target_lengths = Tensor::f_full([b], label_len, (Kind::Int64, dev))?;
            Tensor::f_ctc_loss_tensor(&log_probs, &ins[1], &input_lengths, &target_lengths, 0, Reduction::Mean, true)
        }
        LossKind::Mse => ins[0].f_to_kind(Kind::Float)?.f_mse_loss(&ins[1].f_to_kind(Kind::Float)?, Reduction::Mean),
        LossKind::SmoothL1 { beta } => ins[0].f_to_kind(Kind::Float)?.f_smooth_l1_loss(
            &ins[1].f_to_kind(Kind::Float)?,
            Reduction::Mean,
            f64::from(beta),
        ),
        LossKind::BceWithLogits => {
            let target_is_ids = graph.nodes[node.inputs[1]].op.is_index_input();
            let target = if target_is_ids {
                ins[1].f_to_kind(Kind::Float)?
            } else {
                ins[1].f_gt(0.0)?.f_to_kind(Kind::Float)?
            };
            ins[0].f_to_kind(Kind::Float)?.f_binary_cross_entropy_with_logits(
                &target,
                None::<Tensor>,
                None::<Tensor>,
                Reduction::Mean,
            )
        }
        LossKind::ActorCritic { entropy, value } => {
            let b = ins[0].size()[0];
            let logits = ins[0].f_to_kind(Kind::Float)?.f_reshape([b, -1])?;
            let v = ins[1].f_to_kind(Kind::Float)?.f_reshape([b])?;
            let actions = ins[2].f_reshape([b, 1])?;
            let returns = ins[3].f_to_kind(Kind::Float)?.f_reshape([b])?;
            let logp = logits.f_log_softmax(-1, None::<Kind>)?;
            let logp_a = logp.f_gather(1, &actions, false)?.f_reshape([b])?;
            let advantage = returns.f_sub(&v)?;
            let policy = logp_a.f_mul(&advantage.f_detach()?)?.f_neg()?.f_mean(None::<Kind>)?;
            let ent = logp.f_exp()?.f_mul(&logp)?.f_sum_dim_intlist(Some([1i64].as_slice()), false, None::<Kind>)?;
            let ent = ent.f_neg()?.f_mean(None::<Kind>)?;
            let vloss = advantage.f_square()?.f_mean(None::<Kind>)?;
            policy.f_sub(&ent.f_mul_scalar(f64::from(entropy))?)?.f_add(&vloss.f_mul_scalar(f64::from(value))?)
        }
        LossKind::Wasserstein { gp_weight } => {
            let scores = ins[0].f_to_kind(Kind::Float)?;
            let b = scores.size()[0];
            let scores = scores.f_reshape([b, 3])?;
            let mean_slot = |k: i64| scores.f_select(1, k)?.f_mean(None::<Kind>);
            let critic = mean_slot(1)?.f_sub(&mean_slot(0)?)?;
            if !critic_update {
                return Ok(critic);
            }
            let gp = gradient_penalty(&scores.f_select(1, 2)?, &ins[1])?;
            critic.f_add(&gp.f_mul_scalar(f64::from(gp_weight))?)
        }
    }
}

/// WGAN-GP penalty `mean_b((||d D(x_hat) / d x_hat||_2 - 1)^2)`: `hat_scores` are the critic's scores `[B]` of
/// the interpolates, `stacked` the `critic_batch` output `[B, 3, ..]` whose slot 2 holds them. The gradient
/// is taken against the whole stack (slot 2 is x_hat itself) with the graph kept for the second-order
/// backward.
pub fn gradient_penalty(hat_scores: &Tensor, stacked: &Tensor) -> Result<Tensor, TchError> {
    let total = hat_scores.f_sum(None::<Kind>)?;
    let grads = Tensor::f_run_backward(&[&total], &[stacked], true, true)?;
    let g = grads[0].f_select(1, 2)?.f_flatten(1, -1)?;
    let norm = g.f_to_kind(Kind::Float)?.f_norm_scalaropt_dim(2.0, [1i64], false)?;
    norm.f_sub_scalar(1.0)?.f_square()?.f_mean(None::<Kind>)
}
