//! The WGAN-GP step's passes: what the tch backend runs for one step of a graph with a Wasserstein loss, in
//! units of the graph's priced forward and backward passes of its two parts.
//!
//! One step is two updates on the same batch (`crates/trainbench-backend-tch/src/wgan.rs`):
//! 1. the critic's: the generator forward (frozen), the critic forward on the stacked (real, fake, interpolated)
//!    images, the gradient penalty's first-order gradient of the scores against the interpolated images (an
//!    input-gradient pass through the critic, kept for differentiation: half a critic backward), then the
//!    backward of the loss: the critic's own backward and the penalty's second-order pass (one more critic
//!    backward: each layer's input gradient differentiated again, a forward-like and a weight-gradient product);
//! 2. the generator's: the whole graph forward again, then the backward through the frozen critic (input
//!    gradients only: half a critic backward) and the generator's backward.
//!
//! So forward = 2 (F_gen + F_critic) + B_critic / 2 and backward = 2.5 B_critic + B_gen (without a penalty:
//! forward = 2 (F_gen + F_critic), backward = 1.5 B_critic + B_gen). The two optimizers step the same
//! parameters as one, which the optimizer term already prices. Counts of passes, not fitted: the per-layer
//! costs are the calibration's.

use trainbench_contract::lowering::tch::wgan_roles;
use trainbench_graph::graph::{Graph, LossKind, Op};

use super::roofline::LayerCost;

/// The seconds of one WGAN-GP step's forward and backward phases.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WganPasses {
    /// Both updates' forward passes and the penalty's first-order gradient, seconds.
    pub forward_s: f64,
    /// Both updates' backward passes and the penalty's second-order pass, seconds.
    pub backward_s: f64,
}

/// Forward and backward seconds of one part of the graph.
#[derive(Debug, Clone, Copy, Default)]
struct PartCost {
    forward_s: f64,
    backward_s: f64,
}

impl PartCost {
    fn add(&mut self, layer: &LayerCost) {
        self.forward_s += layer.forward.time_s;
        self.backward_s += layer.backward.time_s;
    }
}

/// The WGAN-GP step's passes over `layers` (the priced layers of `graph`, one pass), when `graph` is a WGAN-GP
/// graph the tch lowering trains as one (`wgan_roles`); `None` otherwise. Layers outside both parts (the step's own fixed cost) are paid once.
pub fn passes(graph: &Graph, layers: &[LayerCost]) -> Option<WganPasses> {
    // The roles the tch lowering trains by: the critic's part is the `critic_batch` node's, every other part the
    // generator's.
    let roles = wgan_roles(graph).ok()?;
    let Op::Loss { loss: LossKind::Wasserstein { gp_weight }, .. } = graph.nodes[roles.loss].op else {
        return None;
    };
    let (mut generator, mut crit, mut once) = (PartCost::default(), PartCost::default(), PartCost::default());
    for layer in layers {
        match graph.node(&layer.name).and_then(|n| n.part.as_deref()) {
            Some(p) if p == roles.critic_part => crit.add(layer),
            Some(_) => generator.add(layer),
            None => once.add(layer),
        }
    }
    let penalty = if gp_weight > 0.0 { 1.0 } else { 0.0 };
    Some(WganPasses {
        forward_s: 2.0 * (generator.forward_s + crit.forward_s) + penalty * crit.backward_s / 2.0 + once.forward_s,
        backward_s: (1.5 + penalty) * crit.backward_s + generator.backward_s + once.backward_s,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use trainbench_graph::model::WganGpSpec;

    use super::*;
    use crate::predict::roofline::{Bound, PhaseCost};

    fn cost(seconds: f64) -> PhaseCost {
        PhaseCost {
            flops: 0.0,
            bytes: 0.0,
            compute_s: seconds,
            memory_s: 0.0,
            overhead_s: 0.0,
            time_s: seconds,
            bound: Bound::Compute,
            terms: Default::default(),
        }
    }

    /// Every node of `graph` priced (forward, backward) = (1, 10) in the generator, (100, 1000) in the critic,
    /// plus the step's own (0.5, 0) outside both parts.
    fn priced(graph: &Graph) -> Vec<LayerCost> {
        let mut layers: Vec<LayerCost> = graph
            .nodes
            .iter()
            .filter(|n| !matches!(n.op, Op::Input { .. }))
            .map(|n| {
                let critic = n.part.as_deref() == Some("critic");
                let (f, b) = if critic { (100.0, 1000.0) } else { (1.0, 10.0) };
                LayerCost { name: n.name.clone(), op: String::new(), forward: cost(f), backward: cost(b) }
            })
            .collect();
        layers.push(LayerCost { name: "(step)".into(), op: String::new(), forward: cost(0.5), backward: cost(0.0) });
        layers
    }

    fn wgan(gp_weight: f64) -> Graph {
        let spec = WganGpSpec { image_size: 16, latent: 8, width: 4, gp_weight };
        trainbench_graph::zoo::build(&trainbench_graph::ModelSpec::WganGp(spec)).unwrap()
    }

    #[test]
    fn the_step_is_two_updates_and_the_penaltys_two_passes_through_the_critic() {
        let graph = wgan(10.0);
        let layers = priced(&graph);
        let count = |part: &str| {
            let part = Some(part);
            layers.iter().filter(|l| graph.node(&l.name).and_then(|n| n.part.as_deref()) == part).count() as f64
        };
        let (g, c) = (count("generator"), count("critic"));
        assert!(g > 0.0 && c > 0.0);
        let p = passes(&graph, &layers).unwrap();
        assert_eq!(p.forward_s, 2.0 * (g + 100.0 * c) + 1000.0 * c / 2.0 + 0.5);
        assert_eq!(p.backward_s, 2.5 * 1000.0 * c + 10.0 * g);
        // Without a penalty: no first-order gradient, no second-order pass.
        let plain = passes(&wgan(0.0), &priced(&wgan(0.0))).unwrap();
        assert_eq!(plain.forward_s, 2.0 * (g + 100.0 * c) + 0.5);
        assert_eq!(plain.backward_s, 1.5 * 1000.0 * c + 10.0 * g);
    }

    #[test]
    fn a_graph_without_a_wasserstein_loss_is_one_pass() {
        let spec = trainbench_graph::ModelSpec::Mlp(trainbench_graph::model::MlpSpec {
            inputs: 4,
            hidden: vec![8],
            classes: 2,
        });
        let graph = trainbench_graph::zoo::build(&spec).unwrap();
        assert_eq!(passes(&graph, &priced(&graph)), None);
    }
}
