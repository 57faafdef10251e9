//! A mixture-of-experts run's routing figures: what one step routed per layer ([`LayerRouting`]), the load
//! statistics of one step ([`coefficient_of_variation`], [`busiest_share`]), and their running sums over the
//! measured steps ([`RoutingTally`]), in memory that does not grow with the run. A backend records one
//! [`LayerRouting`] per MoE layer per measured step; metrics turn the tally into the result's expert load.

use serde::{Deserialize, Serialize};

/// One mixture-of-experts layer's routing in one step (summed over the step's micro-batches).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerRouting {
    /// The layer's node name.
    pub layer: String,
    /// Assignments (token, chosen expert) each expert computed, after any dropped over capacity.
    pub tokens_per_expert: Vec<u64>,
    /// Assignments dropped over the capacity (0 when dropless).
    pub dropped: u64,
    /// The load-balancing loss before its coefficient (Switch Transformer's `E * sum_e f_e P_e`: 1 when the
    /// router is perfectly balanced), the mean over the step's micro-batches.
    pub balance: f64,
    /// The load-balancing loss's coefficient (`aux_loss`; 0: the loss is not trained with).
    pub aux_coefficient: f64,
}

/// The coefficient of variation of a load (population standard deviation over the mean, 0 for an even load);
/// `None` for no experts or no assignments.
pub fn coefficient_of_variation(load: &[u64]) -> Option<f64> {
    let n = load.len() as f64;
    let total: u64 = load.iter().sum();
    if load.is_empty() || total == 0 {
        return None;
    }
    let mean = total as f64 / n;
    let var = load.iter().map(|&c| (c as f64 - mean).powi(2)).sum::<f64>() / n;
    Some(var.sqrt() / mean)
}

/// The busiest expert's share of a load's assignments (`1 / experts` for an even load); `None` for no
/// assignments.
pub fn busiest_share(load: &[u64]) -> Option<f64> {
    let total: u64 = load.iter().sum();
    let max = load.iter().copied().max()?;
    (total > 0).then(|| max as f64 / total as f64)
}

/// Running sums of one layer's (or all layers') routing over the measured steps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadTally {
    /// The layer's node name (`all` for the sum over layers).
    pub layer: String,
    /// Steps recorded.
    pub steps: u64,
    /// Assignments each expert computed, summed over the steps.
    pub tokens_per_expert: Vec<u64>,
    /// Assignments dropped over capacity, summed over the steps.
    pub dropped: u64,
    /// Steps whose load had a coefficient of variation (some assignment computed).
    pub loaded_steps: u64,
    /// Sum over those steps of the load's coefficient of variation.
    pub cv_sum: f64,
    /// Largest coefficient of variation of a step.
    pub cv_max: f64,
    /// Sum over those steps of the busiest expert's share.
    pub busiest_sum: f64,
    /// Largest busiest-expert share of a step.
    pub busiest_max: f64,
    /// Sum over the steps of the load-balancing loss before its coefficient.
    pub balance_sum: f64,
    /// Sum over the steps of the load-balancing loss as trained with (coefficient applied).
    pub aux_loss_sum: f64,
}

impl LoadTally {
    fn named(layer: &str) -> Self {
        LoadTally { layer: layer.to_string(), ..LoadTally::default() }
    }

    /// Add one step: its load per expert, dropped assignments, balance and trained auxiliary loss.
    pub fn record(&mut self, load: &[u64], dropped: u64, balance: f64, aux_loss: f64) {
        if self.tokens_per_expert.len() < load.len() {
            self.tokens_per_expert.resize(load.len(), 0);
        }
        for (sum, &c) in self.tokens_per_expert.iter_mut().zip(load) {
            *sum += c;
        }
        self.steps += 1;
        self.dropped += dropped;
        if let (Some(cv), Some(share)) = (coefficient_of_variation(load), busiest_share(load)) {
            self.loaded_steps += 1;
            self.cv_sum += cv;
            self.cv_max = self.cv_max.max(cv);
            self.busiest_sum += share;
            self.busiest_max = self.busiest_max.max(share);
        }
        self.balance_sum += balance;
        self.aux_loss_sum += aux_loss;
    }
}

/// The routing of a run's measured steps: one [`LoadTally`] per MoE layer (in the order first seen) and one of
/// every layer's load summed per expert (the model's experts taken together, as a layer-agnostic view).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RoutingTally {
    /// Measured steps recorded.
    pub steps: u64,
    /// Per layer.
    pub layers: Vec<LoadTally>,
    /// Every layer's load summed per expert index per step; its balance and auxiliary loss are the layers' sums.
    pub all: LoadTally,
}

impl RoutingTally {
    /// An empty tally.
    pub fn new() -> Self {
        RoutingTally { all: LoadTally::named("all"), ..RoutingTally::default() }
    }

    /// Record one measured step's layers (a step without MoE layers records nothing).
    pub fn record_step(&mut self, step: &[LayerRouting]) {
        if step.is_empty() {
            return;
        }
        self.steps += 1;
        let mut summed: Vec<u64> = Vec::new();
        let (mut dropped, mut balance, mut aux) = (0, 0.0, 0.0);
        for r in step {
            let i = match self.layers.iter().position(|t| t.layer == r.layer) {
                Some(i) => i,
                None => {
                    self.layers.push(LoadTally::named(&r.layer));
                    self.layers.len() - 1
                }
            };
            let trained = r.balance * r.aux_coefficient;
            self.layers[i].record(&r.tokens_per_expert, r.dropped, r.balance, trained);
            if summed.len() < r.tokens_per_expert.len() {
                summed.resize(r.tokens_per_expert.len(), 0);
            }
            for (s, &c) in summed.iter_mut().zip(&r.tokens_per_expert) {
                *s += c;
            }
            dropped += r.dropped;
            balance += r.balance;
            aux += trained;
        }
        self.all.record(&summed, dropped, balance, aux);
    }

    /// The tally when it recorded any step, else `None` (a run without MoE layers).
    pub fn into_recorded(self) -> Option<RoutingTally> {
        (self.steps > 0).then_some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_even_load_has_no_variation_and_an_equal_busiest_share() {
        assert_eq!(coefficient_of_variation(&[3, 3, 3, 3]), Some(0.0));
        assert_eq!(busiest_share(&[3, 3, 3, 3]), Some(0.25));
        assert_eq!(coefficient_of_variation(&[]), None);
        assert_eq!(coefficient_of_variation(&[0, 0]), None);
        assert_eq!(busiest_share(&[0, 0]), None);
    }

    #[test]
    fn a_skewed_load_by_hand() {
        // Mean 3, deviations 3, -1, -1, -1: variance (9 + 1 + 1 + 1) / 4 = 3, CV sqrt(3) / 3.
        let cv = coefficient_of_variation(&[6, 2, 2, 2]).unwrap();
        assert!((cv - 3f64.sqrt() / 3.0).abs() < 1e-12, "{cv}");
        assert_eq!(busiest_share(&[6, 2, 2, 2]), Some(0.5));
        // Everything on one of two experts: mean 2, deviations +-2, CV 1.
        assert_eq!(coefficient_of_variation(&[4, 0]), Some(1.0));
    }

    #[test]
    fn the_tally_sums_layers_steps_and_the_all_layer_load() {
        let layer = |name: &str, load: Vec<u64>, dropped: u64| LayerRouting {
            layer: name.into(),
            tokens_per_expert: load,
            dropped,
            balance: 1.5,
            aux_coefficient: 0.01,
        };
        let mut t = RoutingTally::new();
        t.record_step(&[]);
        assert_eq!(t.clone().into_recorded(), None);
        t.record_step(&[layer("a", vec![6, 2, 2, 2], 1), layer("b", vec![0, 4, 4, 4], 0)]);
        t.record_step(&[layer("a", vec![3, 3, 3, 3], 0), layer("b", vec![3, 3, 3, 3], 2)]);
        assert_eq!(t.steps, 2);
        assert_eq!(t.layers.len(), 2);
        let a = &t.layers[0];
        assert_eq!((a.layer.as_str(), a.steps, a.dropped), ("a", 2, 1));
        assert_eq!(a.tokens_per_expert, vec![9, 5, 5, 5]);
        assert!((a.cv_max - 3f64.sqrt() / 3.0).abs() < 1e-12);
        assert!((a.cv_sum - 3f64.sqrt() / 3.0).abs() < 1e-12);
        assert_eq!((a.busiest_max, a.busiest_sum), (0.5, 0.75));
        assert!((a.aux_loss_sum - 0.03).abs() < 1e-12);
        // All layers, step 1: [6, 6, 6, 6] (even), step 2: [6, 6, 6, 6]; dropped 1 + 2.
        assert_eq!(t.all.tokens_per_expert, vec![12, 12, 12, 12]);
        assert_eq!((t.all.dropped, t.all.cv_max, t.all.busiest_max), (3, 0.0, 0.25));
        assert!((t.all.balance_sum - 6.0).abs() < 1e-12);
    }
}
