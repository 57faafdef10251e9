//! The plain step: per micro-batch, forward every loss and backward (the recomputed blocks of activation
//! checkpointing replayed in the backward phase); then, once per optimizer step, the data-parallel exchange
//! and the optimizer. With gradient accumulation over k micro-batches each micro-batch's loss is scaled by
//! 1/k, so the accumulated gradients are those of the mean loss. ZeRO-3 hooks into the recomputed blocks
//! ([`with_zero3_hooks`]) and ends the step with the root unit's exchange; ZeRO-1/2 exchange after backward.

use tch::{TchError, Tensor};
use trainbench_comm::StepExchange;
use trainbench_graph::Op;

use super::Common;
use crate::checkpoint::{BlockWeights, Checkpoints};
use crate::clock::Clock;
use crate::events::Phase;
use crate::lower::EvalOpts;
use crate::lower::Lowered;
use crate::optim::Optim;
use crate::zero::with_zero3_hooks;

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
    /// loss. Gradients accumulate into the parameters'. In the step's `last` micro-batch of a data-parallel run
    /// that overlaps, the gradient buckets are exchanged during the backward pass.
    pub(super) fn micro(
        &mut self,
        c: &mut Common<'_>,
        mut env: Vec<Option<Tensor>>,
        clock: &mut Clock,
        last: bool,
    ) -> Result<Tensor, TchError> {
        let graph = c.graph;
        let before = c.allocated()?;
        let opts = EvalOpts::plain();
        // What an earlier pass (an evaluation, a recomputation) left behind belongs to no loss of this one.
        let _ = (crate::moe::take_aux_losses(), crate::moe::take_routing());
        let loss = {
            let _ac = c.autocast_guard()?;
            let Common { ckpt, model, exchange, zero, overlap, .. } = &mut *c;
            with_zero3_hooks(exchange, zero, clock, Phase::Forward, *overlap, |hooks| {
                model.eval_checkpointed(graph, &mut env, &graph.losses, &opts, ckpt.as_mut(), hooks)
            })?;
            let mut total: Option<Tensor> = None;
            for &l in &graph.losses {
                let v = env[l].take().ok_or_else(|| TchError::Kind("internal: loss not computed".into()))?;
                let v = match graph.nodes[l].op {
                    Op::Loss { weight, .. } if weight != 1.0 => v.f_mul_scalar(f64::from(weight))?,
                    Op::Input { .. }
                    | Op::Conv { .. }
                    | Op::BatchNorm { .. }
                    | Op::LayerNorm { .. }
                    | Op::RmsNorm { .. }
                    | Op::Linear { .. }
                    | Op::Embedding { .. }
                    | Op::Rnn { .. }
                    | Op::Attention { .. }
                    | Op::Rotary { .. }
                    | Op::Sdpa { .. }
                    | Op::ClassToken { .. }
                    | Op::EmbeddingBag { .. }
                    | Op::Pool { .. }
                    | Op::AdaptivePool { .. }
                    | Op::Act { .. }
                    | Op::Softmax
                    | Op::Dropout { .. }
                    | Op::Add
                    | Op::Mul
                    | Op::Concat { .. }
                    | Op::Reshape { .. }
                    | Op::Transpose { .. }
                    | Op::Slice { .. }
                    | Op::Mean { .. }
                    | Op::MatMul { .. }
                    | Op::SinusoidalPositions { .. }
                    | Op::LearnedPositions { .. }
                    | Op::CriticBatch
                    | Op::RoiAlign { .. }
                    | Op::Lora { .. }
                    | Op::Moe { .. }
                    | Op::Loss { .. } => v,
                };
                total = Some(match total {
                    None => v,
                    Some(acc) => acc.f_add(&v)?,
                });
            }
            // The mixture-of-experts layers' load-balancing losses join the loss they train with.
            let total = total.map(crate::moe::add_aux_losses).transpose()?;
            total.ok_or_else(|| TchError::Kind("the graph has no loss".into()))?
        };
        drop(env);
        // The routing of this forward pass (not a recomputation's, which runs in the backward pass).
        c.routing.collect_forward();
        c.note_forward(before)?;
        clock.lap(Phase::Forward)?;
        let scaled = if c.micro > 1 { loss.f_div_scalar(c.micro as f64)? } else { loss.shallow_clone() };
        let scaled = match &c.scaler {
            Some(s) => s.scale(&scaled)?,
            None => scaled,
        };
        let ac = if c.ckpt.is_some() { c.autocast_guard()? } else { None };
        // With one bucket there is nothing to overlap: it is complete when the backward pass is.
        let overlap = last
            && c.overlap
            && c.exchange.as_deref_mut().and_then(|x| x.overlapped()).is_some_and(|o| o.buckets().len() > 1);
        if overlap {
            // ZeRO-3 never overlaps: here only the hooks reach the exchange.
            let stage2 = c.exchange.as_deref().is_some_and(|x| x.strategy().zero_stage() == Some(2));
            let mut peak = c.zero.as_ref().map_or(0, |z| z.grads_peak);
            let Common { ckpt, model, exchange, .. } = &mut *c;
            if let Some(x) = exchange.as_deref_mut().and_then(|x| x.overlapped()) {
                let params = self.opt.params();
                let late = crate::overlap::late_tensors(graph, x.layout(), ckpt.is_some());
                crate::overlap::backward_overlapped(x, params, &late, stage2, &mut peak, &mut || {
                    run_backward(ckpt.as_mut(), model, graph, &opts, &scaled, None)?;
                    // The backward pass ends here; waiting for the buckets still in flight is the exchange's.
                    clock.lap(Phase::Backward)
                })?;
                clock.lap(Phase::Comm)?;
            }
            if let Some(z) = c.zero.as_mut() {
                z.grads_peak = peak;
            }
            c.overlap_pending = true;
        } else {
            let Common { ckpt, model, exchange, zero, overlap, .. } = &mut *c;
            with_zero3_hooks(exchange, zero, clock, Phase::Backward, *overlap, |hooks| {
                run_backward(ckpt.as_mut(), model, graph, &opts, &scaled, hooks)
            })?;
        }
        drop(scaled);
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
        // Gradients each rank of a tensor group holds only its share of are summed over the group first (after
        // an overlapped exchange, since summing and averaging commute).
        let tensor = c.model.tensor_parallel().filter(|tp| tp.has_partial_grads());
        if let Some(tp) = tensor.filter(|_| !c.overlap_pending) {
            tp.reduce_partial_grads(self.opt.params())?;
        }
        if c.exchange.as_deref().and_then(|x| x.strategy().zero_stage()).is_some() {
            return self.finish_zero(c, clock);
        }
        if c.overlap_pending {
            // The buckets went during the backward pass: what is left is averaging and agreeing on stopping.
            c.overlap_pending = false;
            let x = c.exchange.as_deref_mut().and_then(|x| x.overlapped());
            let x = x.ok_or_else(|| TchError::Kind("internal: an overlapped step without its exchange".into()))?;
            let host = &mut c.host;
            let step = x
                .finish(&mut host.grads, &mut host.weights, c.stop_wish)
                .map_err(|e| TchError::Kind(format!("data-parallel exchange: {e}")))?;
            crate::dist::apply(self.opt.params(), &step, &host.grads, &host.weights)?;
            if let Some(tp) = c.model.tensor_parallel().filter(|tp| tp.has_partial_grads()) {
                tp.reduce_partial_grads(self.opt.params())?;
            }
            return self.after_exchange(c, step, clock);
        }
        if let Some(x) = c.exchange.as_deref_mut() {
            // Expert parallelism: the experts' gradients over their replicas, the rest over the world.
            let params = match c.expert.as_mut() {
                Some((e, _)) => {
                    e.reduce_gradients()?;
                    e.dense.as_slice()
                }
                None => self.opt.params(),
            };
            let step = crate::dist::exchange(x, params, c.stop_wish, &mut c.host)?;
            return self.after_exchange(c, step, clock);
        }
        c.note_gradients(self.opt.params())?;
        self.opt.step(c.scaler.as_mut())?;
        clock.lap(Phase::Optimizer)
    }

    /// ZeRO's end of the step: the units' gradients reduce-scattered, the last first (stages 1-2: every unit,
    /// unless the backward pass did it; stage 3: the root units, the blocks' went in their backward), stage 2
    /// dropping each unit's full gradients as it goes (communication); the shard stepped (optimizer); those
    /// units' weights gathered into the model (communication; stage 3 gathers the blocks as they run).
    fn finish_zero(&mut self, c: &mut Common<'_>, clock: &mut Clock) -> Result<(), TchError> {
        let comm = crate::zero::comm_error;
        let overlapped = std::mem::take(&mut c.overlap_pending);
        let (Some(s), Some(z)) = (c.exchange.as_deref_mut().and_then(|x| x.sharded()), c.zero.as_mut()) else {
            return Err(TchError::Kind("internal: a ZeRO step without its shards".into()));
        };
        let units: Vec<usize> = if s.stage() == 3 { z.params.root_units() } else { (0..z.params.len()).collect() };
        if !overlapped {
            z.grads_peak = z.grads_peak.max(z.params.grad_bytes());
            for &u in units.iter().rev() {
                z.params.grads(u, &mut z.buf)?;
                s.reduce(u, &z.buf).map_err(comm)?;
                if s.stage() == 2 {
                    z.params.drop_grads(u)?;
                }
            }
        }
        // Beside expert parallelism the experts are outside the shards: their gradients summed over their
        // replicas, their squares taken before the step drops them.
        let mut expert_squares = 0.0;
        if let Some((e, _)) = c.expert.as_mut() {
            e.reduce_gradients()?;
            expert_squares = if c.gradients.measuring { e.expert_squares(1.0)? } else { 0.0 };
        }
        clock.lap(Phase::Comm)?;
        let step = s.step(c.stop_wish).map_err(comm)?;
        // A model without blocks is one root unit: nothing ran beside the computation.
        if s.stage() == 3 && c.overlap && units.len() < z.params.len() {
            s.count_prefetched_step();
        }
        if c.expert.is_some() {
            // The model's optimizer steps the experts only: the sharded tensors' gradients are dropped first (a
            // tensor without a gradient is skipped, and never gets optimizer state).
            (0..z.params.len()).try_for_each(|u| z.params.drop_grads(u))?;
            self.opt.step(None)?;
        } else {
            self.opt.zero_grad()?;
        }
        clock.lap(Phase::Optimizer)?;
        for &u in &units {
            z.buf.resize(z.params.unit_len(u), 0.0);
            s.gather(u, &mut z.buf).map_err(comm)?;
            z.params.write(u, &z.buf)?;
        }
        c.note_sharded_gradients(expert_squares);
        c.agreed_stop = step.stop;
        c.agreed_interrupted = step.interrupted;
        clock.lap(Phase::Comm)
    }

    /// The step after its exchange: the agreed stop noted, then the optimizer step, or, where the exchange
    /// applied the optimizer (parameter servers, ZeRO), only the gradients dropped.
    fn after_exchange(&mut self, c: &mut Common<'_>, step: StepExchange, clock: &mut Clock) -> Result<(), TchError> {
        c.agreed_stop = step.stop;
        c.agreed_interrupted = step.interrupted;
        clock.lap(Phase::Comm)?;
        if step.weights_updated {
            self.opt.zero_grad()?;
        } else {
            c.note_gradients(self.opt.params())?;
            self.opt.step(c.scaler.as_mut())?;
        }
        clock.lap(Phase::Optimizer)
    }
}

/// The backward pass from the (scaled) loss: through the recomputed blocks' replays when `ckpt` has them,
/// with `hooks` around each (ZeRO-3).
fn run_backward(
    ckpt: Option<&mut Checkpoints>,
    model: &Lowered,
    graph: &trainbench_graph::Graph,
    opts: &EvalOpts<'_>,
    scaled: &Tensor,
    mut hooks: Option<&mut (dyn BlockWeights + '_)>,
) -> Result<(), TchError> {
    match ckpt {
        Some(ckpt) => {
            // The first replay's weights can come while the loss's backward runs down to it.
            ckpt.prefetch_replay(hooks.as_deref_mut())?;
            if ckpt.keep_graph() {
                crate::autograd::backward_with(scaled, &scaled.f_ones_like()?, true)?;
            } else {
                scaled.f_backward()?;
            }
            // The recomputation belongs to the backward phase, under the forward's autocast.
            ckpt.backward(graph, &mut |env, last| model.eval(graph, env, &[last], opts), hooks)
        }
        None => scaled.f_backward(),
    }
}
