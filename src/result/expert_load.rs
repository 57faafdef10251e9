//! [`ExpertLoad`]: a mixture-of-experts run's routing over its measured steps (tokens per expert per layer, the
//! load's coefficient of variation, the busiest expert's share, tokens dropped over capacity, the load-balancing
//! loss), derived from the backend's routing tally (`trainbench_contract::routing`) by [`ExpertLoad::of`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use trainbench_contract::routing::{LoadTally, RoutingTally};

/// The expert load of a mixture-of-experts run over its measured steps (warm-up excluded). Each step's load is
/// the assignments (token, chosen expert) each expert computed in that step's forward pass (every micro-batch);
/// with expert parallelism it is the global batch's (every rank knows every rank's counts), and a data-parallel
/// run without it reports its first worker's own tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpertLoad {
    /// Measured steps the figures cover.
    pub steps: u64,
    /// One entry per MoE layer, in the model's order.
    pub layers: Vec<LayerLoad>,
    /// Every layer's load summed per expert index in each step (`layer` = `all`); its balance and auxiliary
    /// loss are the sums over the layers (the auxiliary loss is what joined the training loss).
    pub all_layers: LayerLoad,
}

/// One layer's (or all layers') expert load over the measured steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LayerLoad {
    /// The layer's node name (`all` for the sum over layers).
    pub layer: String,
    /// Mean assignments per step each expert computed (after dropping), by expert index.
    pub tokens_per_expert: Vec<f64>,
    /// Mean over the steps of the load's coefficient of variation (population standard deviation over the
    /// mean of `tokens_per_expert` in a step; 0 for an even load); `null` when no step computed an assignment.
    pub cv_mean: Option<f64>,
    /// Largest coefficient of variation of a step.
    pub cv_max: Option<f64>,
    /// Mean over the steps of the busiest expert's share of the step's assignments (1 / experts when even).
    pub busiest_share_mean: Option<f64>,
    /// Largest busiest-expert share of a step.
    pub busiest_share_max: Option<f64>,
    /// Mean assignments dropped over capacity per step (0 when dropless).
    pub dropped_per_step: f64,
    /// Assignments dropped over all routed (computed + dropped); `null` when nothing was routed.
    pub dropped_fraction: Option<f64>,
    /// Mean per step of the load-balancing loss before its coefficient (`E * sum_e f_e P_e`, 1 when balanced).
    pub balance_mean: f64,
    /// Mean per step of the load-balancing loss as trained with (coefficient `aux_loss` applied; 0 without one).
    pub aux_loss_mean: f64,
}

impl LayerLoad {
    /// The figures of one tally.
    pub fn of(t: &LoadTally) -> Self {
        let steps = t.steps.max(1) as f64;
        let loaded = (t.loaded_steps > 0).then_some(t.loaded_steps as f64);
        let computed: u64 = t.tokens_per_expert.iter().sum();
        let routed = computed + t.dropped;
        LayerLoad {
            layer: t.layer.clone(),
            tokens_per_expert: t.tokens_per_expert.iter().map(|&c| c as f64 / steps).collect(),
            cv_mean: loaded.map(|n| t.cv_sum / n),
            cv_max: loaded.map(|_| t.cv_max),
            busiest_share_mean: loaded.map(|n| t.busiest_sum / n),
            busiest_share_max: loaded.map(|_| t.busiest_max),
            dropped_per_step: t.dropped as f64 / steps,
            dropped_fraction: (routed > 0).then(|| t.dropped as f64 / routed as f64),
            balance_mean: t.balance_sum / steps,
            aux_loss_mean: t.aux_loss_sum / steps,
        }
    }
}

impl ExpertLoad {
    /// The expert load of a backend's routing tally; `None` when it recorded no step.
    pub fn of(tally: &RoutingTally) -> Option<Self> {
        (tally.steps > 0).then(|| ExpertLoad {
            steps: tally.steps,
            layers: tally.layers.iter().map(LayerLoad::of).collect(),
            all_layers: LayerLoad::of(&tally.all),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trainbench_contract::routing::LayerRouting;

    #[test]
    fn figures_of_a_hand_worked_tally() {
        let mut t = RoutingTally::new();
        assert_eq!(ExpertLoad::of(&t), None);
        let layer = |load: Vec<u64>, dropped| LayerRouting {
            layer: "h0.mlp".into(),
            tokens_per_expert: load,
            dropped,
            balance: 1.2,
            aux_coefficient: 0.5,
        };
        t.record_step(&[layer(vec![6, 2, 2, 2], 4)]);
        t.record_step(&[layer(vec![3, 3, 3, 3], 0)]);
        let e = ExpertLoad::of(&t).unwrap();
        assert_eq!(e.steps, 2);
        let l = &e.layers[0];
        assert_eq!(l.tokens_per_expert, vec![4.5, 2.5, 2.5, 2.5]);
        let cv = 3f64.sqrt() / 3.0;
        assert!((l.cv_mean.unwrap() - cv / 2.0).abs() < 1e-12);
        assert!((l.cv_max.unwrap() - cv).abs() < 1e-12);
        assert_eq!((l.busiest_share_mean, l.busiest_share_max), (Some(0.375), Some(0.5)));
        // 4 dropped of 12 + 12 computed + 4 dropped.
        assert_eq!(l.dropped_per_step, 2.0);
        assert_eq!(l.dropped_fraction, Some(4.0 / 28.0));
        assert!((l.balance_mean - 1.2).abs() < 1e-12 && (l.aux_loss_mean - 0.6).abs() < 1e-12);
        assert_eq!(e.all_layers.layer, "all");
        assert_eq!(e.all_layers.tokens_per_expert, l.tokens_per_expert);
    }
}
