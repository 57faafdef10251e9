//! How wrong a prediction can be: each group of terms carries a relative uncertainty (a standard deviation of
//! the log of its seconds, [`Uncertainty`], fitted by `crate::calibrate::fit_uncertainty` from the residuals of
//! the calibration's own micro-benchmarks, else a stated prior), and a step's 80% interval ([`Interval`]) combines
//! them by the share of the step each group holds: errors within a group move together (one GEMM curve prices
//! every product), errors of different groups are independent. The machine's own drift (how far its speed moves
//! from one moment to another, measured by the calibration's probe) moves every term together: it is added once,
//! at the whole step's share. So is the model's own error where it was tuned ([`MODEL_SIGMA`]): what its terms leave
//! out of a whole training step, which no micro-benchmark's residual shows.
//!
//! w = z80 x sqrt(sum over groups of (s_g / T)^2 sigma_g^2 + sigma_machine^2 + sigma_model^2), interval
//! [T e^-w, T e^w], z80 = 1.2816 (the 90th percentile of a normal: 80% of the mass between -z80 and +z80).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::terms::{Breakdown, Term};

/// The 90th percentile of the standard normal: a two-sided 80% interval is +-1.2816 standard deviations.
pub const Z80: f64 = 1.281_551_565_545;

/// The level of the intervals predictions carry.
pub const LEVEL: f64 = 0.8;

/// The model's own error on the configurations it was tuned on, beyond what its calibrated sigmas hold: the
/// root of the tuning set's mean squared log error less the mean square of its rows' own sigmas, sqrt(0.177^2 -
/// 0.153^2) = 0.09 on the validation of 2026-12-05 (`docs/validation-runs/2026-12-05-amd-epyc/`, 21 rows, after
/// `rnn-weight-gradients`; the held-out rows of that run are not used). A calibrated profile carries it (a
/// datasheet profile's priors are wider than any model error).
pub const MODEL_SIGMA: f64 = 0.09;

/// Relative uncertainty (standard deviation of the natural log of the seconds) of each group of terms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Uncertainty {
    /// Compute-bound kernel time (`roofline-compute`, `tied-weights`): leave-one-out residuals of the GEMM and
    /// convolution curves.
    pub compute: f64,
    /// Bytes over bandwidth (`memory-traffic`, `bias-pass`, `gradient-sums`): leave-one-out residuals of the
    /// bandwidth curve.
    pub memory: f64,
    /// Element-wise classes' work (`elementwise-work`, `rnn-cell-work`): leave-one-out residuals along sizes.
    pub elementwise: f64,
    /// Fixed costs (`per-op-overhead`, `step-fixed`, `first-node-cold-start`, `in-step-excess`).
    pub fixed: f64,
    /// The optimizer step.
    pub optimizer: f64,
    /// The exchange and the input copy (`exchange`, `input-copy`).
    pub exchange: f64,
    /// The machine's own drift, common to every term: the standard deviation of the log of the calibration's
    /// probe at its checkpoints (`calibration.load.probe_drift`). A run is measured at another moment than the
    /// calibration, and the whole step moves with the machine's speed then. 0 for a datasheet profile and for a
    /// calibration that kept no drift.
    #[serde(default)]
    pub machine: f64,
    /// The model's own error, common to every term (`MODEL_SIGMA` on a calibrated profile, 0 on a datasheet
    /// profile's priors).
    #[serde(default)]
    pub model: f64,
}

impl Default for Uncertainty {
    /// A profile fitted before the uncertainties were: the datasheet's.
    fn default() -> Self {
        Self::datasheet()
    }
}

impl Uncertainty {
    /// A datasheet profile's: compute-bound kernels at a peak they reach 35-80% of (80% of the mass between 0.5x
    /// and 2x), no measured fixed cost, bandwidth, exchange and optimizer within about 1.5x.
    pub fn datasheet() -> Self {
        let half_or_double = std::f64::consts::LN_2 / Z80;
        let one_and_a_half = 1.5f64.ln() / Z80;
        Uncertainty {
            compute: half_or_double,
            memory: one_and_a_half,
            elementwise: one_and_a_half,
            fixed: half_or_double,
            optimizer: one_and_a_half,
            exchange: one_and_a_half,
            machine: 0.0,
            model: 0.0,
        }
    }

    /// The variance every term shares, whatever the step's mix: the machine's drift and the model's own error.
    pub fn common_variance(&self) -> f64 {
        self.machine.powi(2) + self.model.powi(2)
    }

    /// The sigma of `group`.
    pub fn sigma(&self, group: Group) -> f64 {
        match group {
            Group::Compute => self.compute,
            Group::Memory => self.memory,
            Group::Elementwise => self.elementwise,
            Group::Fixed => self.fixed,
            Group::Optimizer => self.optimizer,
            Group::Exchange => self.exchange,
        }
    }
}

/// The groups of terms that share one uncertainty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Compute-bound kernel time.
    Compute,
    /// Bytes over bandwidth.
    Memory,
    /// Element-wise classes' work.
    Elementwise,
    /// Fixed costs.
    Fixed,
    /// The optimizer step.
    Optimizer,
    /// The exchange and the input copy.
    Exchange,
}

impl Group {
    /// The group `term` belongs to (`None`: a rate choice, which carries no seconds).
    pub fn of(term: Term) -> Option<Group> {
        Some(match term {
            Term::RooflineCompute | Term::TiedWeights => Group::Compute,
            Term::MemoryTraffic
            | Term::BiasPass
            | Term::GradientSums
            | Term::FreshPages
            | Term::ReclaimedPages
            | Term::RnnWeightGradients => Group::Memory,
            Term::ElementwiseWork | Term::RnnCellWork => Group::Elementwise,
            Term::PerOpOverhead | Term::StepFixed | Term::FirstNodeColdStart | Term::InStepExcess => Group::Fixed,
            Term::Optimizer | Term::ZeroMomentSqrt => Group::Optimizer,
            Term::Exchange | Term::InputCopy => Group::Exchange,
            Term::ProductGrid
            | Term::ConvGrid
            | Term::ConvClasses
            | Term::WorkingSetBandwidth
            | Term::BackwardWorkingSet
            | Term::MeasuredNodeCosts
            | Term::MeasuredOptimizer => return None,
        })
    }
}

/// A prediction's range of step times.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Interval {
    /// The share of outcomes the range is meant to hold (0.8).
    pub level: f64,
    /// Shortest step time of the range, seconds.
    pub low_s: f64,
    /// Longest step time of the range, seconds.
    pub high_s: f64,
    /// The relative half-width in log space (w: the range is [T e^-w, T e^w]).
    pub log_half_width: f64,
}

impl Interval {
    /// The 80% interval around `step_s` whose log has `variance`: [T e^-w, T e^w], w = z80 x its sigma.
    fn of_variance(step_s: f64, variance: f64) -> Interval {
        let w = Z80 * variance.sqrt();
        Interval { level: LEVEL, low_s: step_s * (-w).exp(), high_s: step_s * w.exp(), log_half_width: w }
    }

    /// Whether `seconds` lies inside.
    pub fn holds(&self, seconds: f64) -> bool {
        seconds >= self.low_s && seconds <= self.high_s
    }
}

/// The 80% interval of a step of `step_s` seconds whose additive terms hold `seconds` (by term, summed over the
/// step's phases).
pub fn interval(seconds: &Breakdown, step_s: f64, u: &Uncertainty) -> Interval {
    let mut groups: Vec<(Group, f64)> = Vec::new();
    for (term, s) in seconds {
        let Some(group) = Group::of(*term) else { continue };
        match groups.iter_mut().find(|(g, _)| *g == group) {
            Some((_, total)) => *total += s,
            None => groups.push((group, *s)),
        }
    }
    let variance: f64 = if step_s > 0.0 {
        groups.iter().map(|(g, s)| (s / step_s * u.sigma(*g)).powi(2)).sum::<f64>() + u.common_variance()
    } else {
        0.0
    };
    Interval::of_variance(step_s, variance)
}

/// The 80% interval of a step of `step_s` seconds composed of `inner_s` seconds priced as another prediction
/// prices its own step (moving with that prediction's errors: `inner`'s relative width) and `exchange_s`
/// seconds of communication (the exchange group's uncertainty), the two independent, and the machine's drift and
/// the model's own error over the whole step (taken out of `inner`'s width, which holds them at its own whole
/// step): a device mesh's step, its busiest stage's computation priced as one rank's micro-batch.
pub fn composed(step_s: f64, inner: &Interval, inner_s: f64, exchange_s: f64, u: &Uncertainty) -> Interval {
    let share = |s: f64| if step_s > 0.0 { s / step_s } else { 0.0 };
    let inner_sigma = ((inner.log_half_width / Z80).powi(2) - u.common_variance()).max(0.0).sqrt();
    let variance = (share(inner_s) * inner_sigma).powi(2)
        + (share(exchange_s) * u.exchange).powi(2)
        + if step_s > 0.0 { u.common_variance() } else { 0.0 };
    Interval::of_variance(step_s, variance)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Sigmas of 0.1, 0.2 and 0.3 for compute, memory and fixed costs, `exchange` for the exchange, none else.
    fn sigmas(exchange: f64) -> Uncertainty {
        Uncertainty {
            compute: 0.1,
            memory: 0.2,
            elementwise: 0.0,
            fixed: 0.3,
            optimizer: 0.0,
            exchange,
            machine: 0.0,
            model: 0.0,
        }
    }

    #[test]
    fn a_composed_step_keeps_its_inner_width_by_share_and_adds_the_exchange_in_quadrature() {
        let u = sigmas(0.4);
        let inner = Interval { level: LEVEL, low_s: 0.0, high_s: 0.0, log_half_width: Z80 * 0.1 };
        // All inner: its own width.
        assert!((composed(2.0, &inner, 2.0, 0.0, &u).log_half_width - Z80 * 0.1).abs() < 1e-12);
        // Half inner, half exchange: sqrt(0.05^2 + 0.2^2).
        let w = composed(2.0, &inner, 1.0, 1.0, &u).log_half_width;
        assert!((w - Z80 * (0.05f64.powi(2) + 0.2f64.powi(2)).sqrt()).abs() < 1e-12);
        let i = composed(2.0, &inner, 1.0, 1.0, &u);
        assert!(i.holds(2.0) && (i.low_s * i.high_s - 4.0).abs() < 1e-12);
    }

    #[test]
    fn one_group_gives_its_own_width_and_independent_groups_add_in_quadrature() {
        let u = sigmas(0.0);
        let mut b = Breakdown::new();
        b.insert(Term::RooflineCompute, 2.0);
        let i = interval(&b, 2.0, &u);
        assert!((i.log_half_width - Z80 * 0.1).abs() < 1e-12);
        assert!((i.low_s * i.high_s - 4.0).abs() < 1e-12, "symmetric in log");
        assert!(i.holds(2.0) && !i.holds(2.0 * (Z80 * 0.1 + 1e-6).exp()));
        // Half compute, half memory: sqrt(0.05^2 + 0.1^2).
        let mut b = Breakdown::new();
        b.insert(Term::RooflineCompute, 1.0);
        b.insert(Term::MemoryTraffic, 1.0);
        let w = interval(&b, 2.0, &u).log_half_width;
        assert!((w - Z80 * (0.05f64.powi(2) + 0.1f64.powi(2)).sqrt()).abs() < 1e-12);
        // Terms of one group move together: two fixed-cost terms count as one share.
        let mut b = Breakdown::new();
        b.insert(Term::PerOpOverhead, 1.0);
        b.insert(Term::StepFixed, 1.0);
        assert!((interval(&b, 2.0, &u).log_half_width - Z80 * 0.3).abs() < 1e-12);
        // Rate choices carry no seconds; an empty step has no width.
        assert_eq!(Group::of(Term::ProductGrid), None);
        assert_eq!(interval(&Breakdown::new(), 0.0, &u).log_half_width, 0.0);
    }

    #[test]
    fn the_machines_drift_moves_the_whole_step_whatever_its_terms() {
        let u = Uncertainty { machine: 0.2, ..Uncertainty::datasheet() };
        let quiet = Uncertainty { machine: 0.0, ..u };
        // Half compute, half memory: the groups by share, the drift at the whole step's share.
        let mut b = Breakdown::new();
        b.insert(Term::RooflineCompute, 1.0);
        b.insert(Term::MemoryTraffic, 1.0);
        let without = interval(&b, 2.0, &quiet).log_half_width / Z80;
        let with = interval(&b, 2.0, &u).log_half_width / Z80;
        assert!((with - (without.powi(2) + 0.04).sqrt()).abs() < 1e-12, "{with} {without}");
        // A step of rate choices only still moves with the machine; an empty step has no width.
        assert!((interval(&Breakdown::new(), 1.0, &u).log_half_width - Z80 * 0.2).abs() < 1e-12);
        assert_eq!(interval(&Breakdown::new(), 0.0, &u).log_half_width, 0.0);
        // A mesh step counts the drift once: taken out of the inner width, added at the whole step.
        let inner = interval(&b, 2.0, &u);
        let mesh = composed(4.0, &inner, 2.0, 2.0, &u).log_half_width / Z80;
        let expected = ((0.5 * without).powi(2) + (0.5 * u.exchange).powi(2) + 0.04).sqrt();
        assert!((mesh - expected).abs() < 1e-12, "{mesh} {expected}");
        // A profile written before the drift was kept reads as none.
        let old: Uncertainty = serde_json::from_value(serde_json::json!({
            "compute": 0.1, "memory": 0.1, "elementwise": 0.1, "fixed": 0.3, "optimizer": 0.29, "exchange": 0.3
        }))
        .unwrap();
        assert_eq!((old.machine, old.model), (0.0, 0.0));
    }

    #[test]
    fn the_models_own_error_moves_the_whole_step_with_the_machines_drift() {
        let u = Uncertainty { machine: 0.2, model: MODEL_SIGMA, ..Uncertainty::datasheet() };
        let quiet = Uncertainty { machine: 0.0, model: 0.0, ..u };
        let mut b = Breakdown::new();
        b.insert(Term::RooflineCompute, 1.0);
        b.insert(Term::Optimizer, 1.0);
        let without = interval(&b, 2.0, &quiet).log_half_width / Z80;
        let with = interval(&b, 2.0, &u).log_half_width / Z80;
        let common = 0.04 + MODEL_SIGMA.powi(2);
        assert!((with - (without.powi(2) + common).sqrt()).abs() < 1e-12, "{with} {without}");
        // A mesh step counts both once.
        let inner = interval(&b, 2.0, &u);
        let mesh = composed(4.0, &inner, 2.0, 2.0, &u).log_half_width / Z80;
        let expected = ((0.5 * without).powi(2) + (0.5 * u.exchange).powi(2) + common).sqrt();
        assert!((mesh - expected).abs() < 1e-12, "{mesh} {expected}");
    }

    #[test]
    fn groups_with_equal_sigmas_stay_independent() {
        let u = Uncertainty::datasheet();
        let mut b = Breakdown::new();
        b.insert(Term::MemoryTraffic, 1.0);
        b.insert(Term::Optimizer, 1.0);
        let w = interval(&b, 2.0, &u).log_half_width;
        assert!((w - Z80 * u.memory * 0.5 * 2f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn the_datasheet_prior_spans_half_to_double_for_a_compute_bound_step() {
        let mut b = Breakdown::new();
        b.insert(Term::RooflineCompute, 1.0);
        let i = interval(&b, 1.0, &Uncertainty::datasheet());
        assert!((i.low_s - 0.5).abs() < 1e-9 && (i.high_s - 2.0).abs() < 1e-9, "{i:?}");
    }
}
