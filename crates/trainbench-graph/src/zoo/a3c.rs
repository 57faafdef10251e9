//! A3C's Atari network (Mnih et al. 2016, the feed-forward agent): conv 16x8x8/4, conv 32x4x4/2, fully
//! connected 256, all ReLU, then a policy head (logits over actions) and a value head, trained with the
//! actor-critic loss (policy gradient + entropy bonus + value regression) on a batch of states.

use crate::builder::{ConvCfg, GraphBuilder};
use crate::graph::{Activation, Graph, InputKind, LossKind};
use crate::model::A3cSpec;

use super::common::{ZooError, at_least};

/// Build the A3C network with its actor-critic loss.
pub(crate) fn build(s: &A3cSpec) -> Result<Graph, ZooError> {
    at_least("actions", s.actions, 2)?;
    at_least("frames", s.frames, 1)?;
    at_least("image_size", s.image_size, 20)?;
    let mut b = GraphBuilder::new("a3c");
    let x = b.input("observation", &[s.frames, s.image_size, s.image_size], InputKind::Dense)?;
    let actions = b.input("actions", &[], InputKind::Labels { classes: s.actions })?;
    let returns = b.input("returns", &[1], InputKind::Dense)?;
    let mut y = b.conv("conv1", x, ConvCfg::square(16, 8, 4, 0).with_bias(true))?;
    y = b.act("relu1", y, Activation::Relu)?;
    y = b.conv("conv2", y, ConvCfg::square(32, 4, 2, 0).with_bias(true))?;
    y = b.act("relu2", y, Activation::Relu)?;
    y = b.flatten("flatten", y)?;
    y = b.linear("fc", y, 256, true)?;
    y = b.act("relu3", y, Activation::Relu)?;
    let policy = b.linear("policy", y, s.actions, true)?;
    let value = b.linear("value", y, 1, true)?;
    b.loss("loss", LossKind::ActorCritic { entropy: 0.01, value: 0.5 }, &[policy, value, actions, returns])?;
    Ok(b.finish(1, "samples")?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::zoo::common::shape;

    #[test]
    fn shapes() {
        let g = build(&A3cSpec { actions: 6, frames: 4, image_size: 84 }).unwrap();
        assert_eq!(shape(&g, "relu1"), [16, 20, 20]);
        assert_eq!(shape(&g, "relu2"), [32, 9, 9]);
        assert_eq!(shape(&g, "policy"), [6]);
        assert_eq!(shape(&g, "value"), [1]);
    }
}
