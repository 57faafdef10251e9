//! The plain step: per micro-batch, forward every loss and backward (the recomputed blocks of activation
//! checkpointing replayed in the backward phase); then, once per optimizer step, the data-parallel exchange
//! and the optimizer. With gradient accumulation over k micro-batches each micro-batch's loss is scaled by
//! 1/k, so the accumulated gradients are those of the mean loss. ZeRO-3 hooks into the recomputed blocks
//! ([`Zero3Hooks`]) and ends the step with the root unit's exchange; ZeRO-1/2 exchange after backward.

use tch::{TchError, Tensor};

use super::Common;
use crate::clock::Clock;
use crate::events::Phase;
use crate::lower::EvalOpts;
use crate::optim::Optim;
use crate::zero::Zero3Hooks;

/// One optimizer over every parameter minimising the sum of the losses.
pub(super) struct PlainStep {
    pub(super) opt: Optim,
}

impl PlainStep {
    /// The step of `opt`.
    pub(super) fn new(opt: Optim) -> Self {
        Self { opt }
    }

    /// Forward and backward of one micro-batch (`env` holds its inputs); returns its (detached, unscaled)
    /// loss. Gradients accumulate into the parameters'.
    pub(super) fn micro(
        &mut self,
        c: &mut Common<'_>,
        mut env: Vec<Option<Tensor>>,
        clock: &mut Clock,
    ) -> Result<Tensor, TchError> {
        let graph = c.graph;
        let before = c.allocated()?;
        let opts = EvalOpts::plain();
        let loss = {
            let _ac = c.autocast_guard()?;
            let mut hooks = Zero3Hooks::of(&mut c.exchange, &mut c.zero, clock, Phase::Forward);
            let hooks = hooks.as_mut().map(|h| -> &mut dyn crate::checkpoint::BlockWeights { h });
            c.model.eval_checkpointed(graph, &mut env, &graph.losses, &opts, c.ckpt.as_mut(), hooks)?;
            let mut total: Option<Tensor> = None;
            for &l in &graph.losses {
                let v = env[l].take().ok_or_else(|| TchError::Kind("internal: loss not computed".into()))?;
                let v = match graph.nodes[l].op {
                    trainbench_graph::Op::Loss { weight, .. } if weight != 1.0 => v.f_mul_scalar(f64::from(weight))?,
                    _ => v,
                };
                total = Some(match total {
                    None => v,
                    Some(acc) => acc.f_add(&v)?,
                });
            }
            total.ok_or_else(|| TchError::Kind("the graph has no loss".into()))?
        };
        drop(env);
        c.note_forward(before)?;
        clock.lap(Phase::Forward)?;
        let scaled = if c.micro > 1 { loss.f_div_scalar(c.micro as f64)? } else { loss.shallow_clone() };
        let scaled = match &c.scaler {
            Some(s) => s.scale(&scaled)?,
            None => scaled,
        };
        let ac = if c.ckpt.is_some() { c.autocast_guard()? } else { None };
        match &mut c.ckpt {
            Some(ckpt) => {
                let keep = ckpt.keep_graph();
                if keep {
                    crate::autograd::backward_with(&scaled, &scaled.f_ones_like()?, true)?;
                } else {
                    scaled.f_backward()?;
                }
                drop(scaled);
                // The recomputation belongs to the backward phase, under the forward's autocast.
                let mut hooks = Zero3Hooks::of(&mut c.exchange, &mut c.zero, clock, Phase::Backward);
                let hooks = hooks.as_mut().map(|h| -> &mut dyn crate::checkpoint::BlockWeights { h });
                ckpt.backward(&c.model, graph, &opts, hooks)?;
            }
            None => scaled.f_backward()?,
        }
        drop(ac);
        clock.lap(Phase::Backward)?;
        if c.grad_bytes == 0 {
            c.grad_bytes = self.opt.grad_bytes();
        }
        loss.f_detach()
    }

    /// After the step's micro-batches: the data-parallel exchange (once per optimizer step) and the
    /// optimizer step.
    pub(super) fn finish(&mut self, c: &mut Common<'_>, clock: &mut Clock) -> Result<(), TchError> {
        if let Some(mut h) = Zero3Hooks::of(&mut c.exchange, &mut c.zero, clock, Phase::Optimizer) {
            // ZeRO-3: the blocks' gradients went in their backward; the root's go now, the shard is stepped
            // and the root gathered for the next step (the blocks are gathered as they run).
            h.phase = Phase::Backward;
            let roots = h.state.params.root_units();
            for &u in &roots {
                h.reduce(u)?;
            }
            let step = h.sharded.step(c.stop_wish).map_err(|e| tch::TchError::Kind(format!("sharded exchange: {e}")))?;
            h.clock.lap(Phase::Optimizer)?;
            h.phase = Phase::Optimizer;
            for &u in &roots {
                h.gather(u)?;
            }
            c.agreed_stop = step.stop;
            c.agreed_interrupted = step.interrupted;
            self.opt.zero_grad()?;
            return Ok(());
        }
        if let Some(x) = c.exchange.as_deref_mut() {
            let step = crate::dist::exchange(x, self.opt.params(), c.stop_wish, c.zero.as_mut())?;
            c.agreed_stop = step.stop;
            c.agreed_interrupted = step.interrupted;
            clock.lap(Phase::Comm)?;
            if step.weights_updated {
                // The parameter servers applied the optimizer: only the gradients are left to drop.
                self.opt.zero_grad()?;
                clock.lap(Phase::Optimizer)?;
                return Ok(());
            }
        }
        self.opt.step(c.scaler.as_mut())?;
        clock.lap(Phase::Optimizer)
    }
}
