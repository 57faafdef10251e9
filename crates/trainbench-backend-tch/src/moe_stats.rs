//! The routing figures of a run's measured steps on libtorch: the [`Routing`] records the MoE layers' forward
//! passes leave ([`crate::moe::take_routing`]) collected after each micro-batch's forward pass (so a
//! recomputation's or an evaluation's are not counted), summed per layer over the step's micro-batches into the
//! contract's [`LayerRouting`], and tallied over the measured steps ([`RoutingTally`]).

use trainbench_contract::routing::{LayerRouting, RoutingTally};
use trainbench_graph::graph::{Node, Op};

use crate::moe::Routing;

/// The routing of the current step's micro-batches so far, and the tally of the measured steps.
#[derive(Debug, Default)]
pub(crate) struct StepRouting {
    /// The records of this step's forward passes, in order.
    records: Vec<Routing>,
    /// The measured steps' tally.
    tally: Option<RoutingTally>,
}

impl StepRouting {
    /// Forget what an unfinished or unmeasured step collected.
    pub(crate) fn clear(&mut self) {
        self.records.clear();
    }

    /// After a micro-batch's forward pass: take what its MoE layers recorded.
    pub(crate) fn collect_forward(&mut self) {
        self.records.extend(crate::moe::take_routing());
    }

    /// At the end of a measured step: its layers added to the tally (nothing for a model without MoE layers).
    pub(crate) fn finish_measured(&mut self, nodes: &[Node]) {
        let step = per_layer(std::mem::take(&mut self.records), nodes);
        if !step.is_empty() {
            self.tally.get_or_insert_with(RoutingTally::new).record_step(&step);
        }
    }

    /// The measured steps' tally; `None` when no measured step routed anything.
    pub(crate) fn take_tally(&mut self) -> Option<RoutingTally> {
        self.tally.take().and_then(RoutingTally::into_recorded)
    }
}

/// The aux-loss coefficient of the MoE node named `layer` among `nodes` (0 if it is none).
fn aux_coefficient(nodes: &[Node], layer: &str) -> f64 {
    nodes
        .iter()
        .find(|n| n.name == layer)
        .map_or(0.0, |n| if let Op::Moe { aux_loss, .. } = n.op { f64::from(aux_loss) } else { 0.0 })
}

/// One step's records (one per layer per micro-batch) summed per layer, in the order first seen: counts and
/// drops added, the balance the mean over the micro-batches; each layer's aux-loss coefficient read from its node
/// among `nodes` (the graph's).
pub fn per_layer(records: Vec<Routing>, nodes: &[Node]) -> Vec<LayerRouting> {
    let mut out: Vec<(LayerRouting, u32)> = Vec::new();
    for r in records {
        let Some(i) = out.iter().position(|(l, _)| l.layer == r.layer) else {
            let aux_coefficient = aux_coefficient(nodes, &r.layer);
            let Routing { layer, tokens_per_expert, dropped, balance, .. } = r;
            out.push((LayerRouting { layer, tokens_per_expert, dropped, balance, aux_coefficient }, 1));
            continue;
        };
        let (l, passes) = &mut out[i];
        if l.tokens_per_expert.len() < r.tokens_per_expert.len() {
            l.tokens_per_expert.resize(r.tokens_per_expert.len(), 0);
        }
        for (sum, c) in l.tokens_per_expert.iter_mut().zip(&r.tokens_per_expert) {
            *sum += c;
        }
        l.dropped += r.dropped;
        l.balance += r.balance;
        *passes += 1;
    }
    out.into_iter()
        .map(|(mut l, passes)| {
            l.balance /= f64::from(passes);
            l
        })
        .collect()
}

#[cfg(test)]
#[path = "moe_stats_tests.rs"]
mod tests;
