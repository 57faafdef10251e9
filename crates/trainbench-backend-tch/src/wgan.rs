//! The WGAN-GP step: a critic update with the gradient penalty, then a generator update with the critic
//! frozen, each with its own optimizer, on the same batch.

use tch::{Kind, TchError, Tensor};
use trainbench_graph::graph::Node;

use super::Common;
use crate::check::WganRoles;
use crate::clock::Clock;
use crate::events::Phase;
use crate::lower::EvalOpts;
use crate::optim::Optim;

/// The WGAN-GP step (the zoo's `critic_batch` convention) with the critic's and the generator's optimizers.
pub(super) struct WganStep {
    pub(super) roles: WganRoles,
    pub(super) critic: Optim,
    pub(super) generator: Optim,
}

impl WganStep {
    /// WGAN-GP, one critic update per generator update (n_critic = 1), on the same batch:
    /// 1. critic: the generator runs without gradients; `critic_batch` stacks (real, fake, x_hat) with x_hat a
    ///    fresh leaf; loss_D = mean D(fake) - mean D(real) + gp_weight * GP (the Wasserstein loss node, see
    ///    `loss::forward`); backward; critic optimizer step.
    /// 2. generator: critic parameters frozen (requires_grad off); the graph is evaluated again up to the
    ///    critic's scores (the critic still scores all three slots, as the graph's shapes say);
    ///    loss_G = -mean D(fake); backward; generator optimizer step.
    ///
    /// Phase times add up both halves; the loss reported is the critic's loss_D.
    pub(super) fn run(
        &mut self,
        c: &mut Common<'_>,
        mut env: Vec<Option<Tensor>>,
        i: u64,
        clock: &mut Clock,
    ) -> Result<Tensor, TchError> {
        let graph = c.graph;
        let roles = &self.roles;
        let critic_part = roles.critic_part.clone();
        let is_gen = move |n: &Node| n.part.as_ref().is_some_and(|q| *q != critic_part);
        let before = c.allocated()?;
        let loss_d = {
            let _ac = c.autocast_guard()?;
            let opts = EvalOpts { frozen: &is_gen, critic_update: true };
            c.model.eval(graph, &mut env, &[roles.loss], &opts)?;
            env[roles.loss].take().ok_or_else(|| TchError::Kind("internal: critic loss not computed".into()))?
        };
        drop(env);
        c.note_forward(before)?;
        clock.lap(Phase::Forward)?;
        loss_d.f_backward()?;
        clock.lap(Phase::Backward)?;
        let critic_grads = self.critic.grad_bytes();
        self.critic.step(None)?;
        self.set_critic_trainable(false);
        clock.lap(Phase::Optimizer)?;
        // Generator step, with the critic's parameters frozen; they are unfrozen whatever happens.
        let result = self.generator_step(c, i, critic_grads, clock);
        self.set_critic_trainable(true);
        result?;
        loss_d.f_detach()
    }

    fn set_critic_trainable(&self, on: bool) {
        for q in self.critic.params() {
            let _ = q.set_requires_grad(on);
        }
    }

    fn generator_step(
        &mut self,
        c: &mut Common<'_>,
        i: u64,
        critic_grads: u64,
        clock: &mut Clock,
    ) -> Result<(), TchError> {
        let graph = c.graph;
        let scores = self.roles.scores;
        let mut env = c.fresh_env(i, 0)?;
        let before = c.allocated()?;
        let loss_g = {
            let _ac = c.autocast_guard()?;
            c.model.eval(graph, &mut env, &[scores], &EvalOpts::plain())?;
            let s = env[scores].take().ok_or_else(|| TchError::Kind("internal: critic scores".into()))?;
            let b = s.size()[0];
            s.f_to_kind(Kind::Float)?.f_reshape([b, 3])?.f_select(1, 1)?.f_mean(None::<Kind>)?.f_neg()?
        };
        drop(env);
        c.note_forward(before)?;
        clock.lap(Phase::Forward)?;
        loss_g.f_backward()?;
        clock.lap(Phase::Backward)?;
        if c.grad_bytes == 0 {
            c.grad_bytes = critic_grads + self.generator.grad_bytes();
        }
        self.generator.step(None)?;
        clock.lap(Phase::Optimizer)?;
        Ok(())
    }
}
