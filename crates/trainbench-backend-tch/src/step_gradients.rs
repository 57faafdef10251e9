//! What a run records of its gradients and weights, so that a layout can be checked against one rank: at each
//! measured step, the squares of the gradient the optimizer steps with as far as this rank owns it (a value
//! every rank of a group holds counted once over the group), and after the run each whole trained tensor's
//! norm (the digest's tensors, gathered from their shards).

use tch::{TchError, Tensor};
use trainbench_contract::GradientSquares;

use super::Common;
use crate::norms::{owned_share, squares};

/// Whether the current step is measured, and the measured steps' squares so far.
#[derive(Default)]
pub(super) struct GradientTrack {
    /// The current step is measured: its gradient's squares are recorded.
    pub(super) measuring: bool,
    /// The measured steps' squares, as this rank owns them.
    pub(super) squares: Option<GradientSquares>,
}

impl Common<'_> {
    /// On a measured step, before the optimizer steps with `params`' gradients (the exchange's mean over the
    /// data-parallel replicas, where there is one): their squares as this rank owns them, recorded.
    pub(super) fn note_gradients(&mut self, params: &[Tensor]) -> Result<(), TchError> {
        if !self.gradients.measuring {
            return Ok(());
        }
        let scale = self.scaler.as_ref().map(|s| s.current()).transpose()?.unwrap_or(1.0);
        let squares = match &self.expert {
            Some((e, _)) => e.gradient_squares(scale)?,
            None => {
                let replicas = self.exchange.as_deref().map_or(1, |x| x.workers());
                squares(params, &owned_share(self.model.tensor_parallel(), replicas), scale)?
            }
        };
        GradientSquares::record(&mut self.gradients.squares, squares);
        Ok(())
    }

    /// On a measured step of ZeRO, after the shard was stepped: the squares of its gradient shard (the shards
    /// are disjoint over the data dimension; a tensor every rank of a tensor group holds counts once there), plus
    /// `outside`: the squares of what the shards leave out (the experts' beside expert parallelism).
    pub(super) fn note_sharded_gradients(&mut self, outside: f64) {
        if !self.gradients.measuring {
            return;
        }
        let weight = owned_share(self.model.tensor_parallel(), 1);
        if let Some(s) = self.exchange.as_deref_mut().and_then(|x| x.sharded()) {
            GradientSquares::record(&mut self.gradients.squares, s.gradient_squares(&weight) + outside);
        }
    }

    /// The whole trained tensors after the run, in the order one rank holds them, from this rank's `params`
    /// (the optimizer's): gathered over the tensor group, or with the experts gathered over their group. Every
    /// rank of a group calls it.
    pub(super) fn whole_weights(&self, params: &[Tensor]) -> Result<Vec<Tensor>, TchError> {
        crate::expert_state::ExpertState::whole_weights(
            self.expert.as_ref().map(|(e, _)| e),
            &self.model,
            self.graph,
            params,
        )
    }
}
