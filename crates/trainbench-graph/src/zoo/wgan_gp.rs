//! WGAN-GP (Gulrajani et al.) with the DCGAN-style networks of its 64x64 experiments: a generator
//! (Linear to 8w x 4 x 4, batch norm, ReLU, then 4x4/2 transposed convolutions halving the channels and
//! doubling the resolution, batch norm + ReLU, tanh at the end) and a critic without batch norm (4x4/2
//! convolutions doubling the channels, leaky ReLU 0.2, Linear to one score).
//!
//! The two networks are separate parts (`generator`, `critic`) with separate optimizers. The critic runs on
//! the stacked (real, fake, interpolated) images of [`Op::CriticBatch`](crate::graph::Op::CriticBatch);
//! the Wasserstein loss with gradient penalty takes its scores and that node.

use crate::builder::{ConvCfg, GraphBuilder};
use crate::graph::{Activation, Graph, InputKind, LossKind};
use crate::model::WganGpSpec;

use super::common::{ZooError, at_least};

/// Build WGAN-GP: generator, critic and the critic's loss.
pub(crate) fn build(s: &WganGpSpec) -> Result<Graph, ZooError> {
    if s.image_size < 16 || !s.image_size.is_power_of_two() {
        return Err(ZooError::field(
            "image_size",
            format!("image_size = {} must be a power of two of at least 16", s.image_size),
            Some("use 32, 64 or 128"),
        ));
    }
    at_least("latent", s.latent, 1)?;
    at_least("width", s.width, 1)?;
    if !(s.gp_weight.is_finite() && s.gp_weight >= 0.0) {
        return Err(ZooError::field("gp_weight", format!("gp_weight = {} must be >= 0", s.gp_weight), None));
    }
    // Resolution doublings from 4x4; the widest feature map has 8w channels for 64x64 and scales with depth.
    let stages = (s.image_size / 4).trailing_zeros() as usize;
    let top = s.width << (stages - 1);
    let mut b = GraphBuilder::new("wgan_gp");

    b.set_part(Some("generator"));
    b.push("generator");
    let z = b.input("noise", &[s.latent], InputKind::Dense)?;
    let mut g = b.linear("fc", z, top * 16, true)?;
    g = b.batch_norm("fc.bn", g)?;
    g = b.act("fc.relu", g, Activation::Relu)?;
    g = b.reshape("reshape", g, &[top, 4, 4])?;
    for i in 1..=stages {
        let last = i == stages;
        let out = if last { 3 } else { top >> i };
        b.push(format!("deconv{i}"));
        g = b.conv("conv", g, ConvCfg::square(out, 4, 2, 1).transposed().with_bias(last))?;
        g = if last {
            b.act("tanh", g, Activation::Tanh)?
        } else {
            let n = b.batch_norm("bn", g)?;
            b.act("relu", n, Activation::Relu)?
        };
        b.pop();
    }
    b.pop();

    b.set_part(Some("critic"));
    b.push("critic");
    let real = b.input("real", &[3, s.image_size, s.image_size], InputKind::Dense)?;
    let batch = b.critic_batch("inputs", real, g)?;
    let mut c = batch;
    for i in 0..stages {
        b.push(format!("conv{}", i + 1));
        c = b.conv("conv", c, ConvCfg::square(s.width << i, 4, 2, 1).with_bias(true))?;
        c = b.act("lrelu", c, Activation::LeakyRelu(0.2))?;
        b.pop();
    }
    let n = b.shape(c).0[1..].iter().product::<usize>();
    c = b.reshape("flatten", c, &[3, n])?;
    let scores = b.linear("fc", c, 1, true)?;
    b.loss("loss", LossKind::Wasserstein { gp_weight: s.gp_weight as f32 }, &[scores, batch])?;
    b.pop();
    Ok(b.finish(1, "samples")?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::zoo::common::shape;

    #[test]
    fn shapes_and_parts() {
        let g = build(&WganGpSpec { image_size: 64, latent: 128, width: 64, gp_weight: 10.0 }).unwrap();
        assert_eq!(shape(&g, "generator.reshape"), [512, 4, 4]);
        assert_eq!(shape(&g, "generator.deconv4.tanh"), [3, 64, 64]);
        assert_eq!(shape(&g, "critic.inputs"), [3, 3, 64, 64]);
        assert_eq!(shape(&g, "critic.conv4.lrelu"), [3, 512, 4, 4]);
        assert_eq!(shape(&g, "critic.fc"), [3, 1]);
        assert_eq!(g.node("generator.fc").unwrap().part.as_deref(), Some("generator"));
        assert_eq!(g.node("critic.fc").unwrap().part.as_deref(), Some("critic"));
        let e = build(&WganGpSpec { image_size: 48, latent: 128, width: 64, gp_weight: 10.0 }).unwrap_err();
        assert_eq!(e.path, ["image_size"]);
    }
}
