//! The model's terms: each correction the model applies, by name, so that a prediction can say what each one
//! costs ([`Breakdown`]) and a term can be switched off ([`Terms`], `predict --without-term NAME`). Additive terms
//! carry seconds of their own in a phase's breakdown; rate choices change which rate another term is priced at
//! (off: the simpler rate) and carry none. `docs/performance-model.md` gives each one's formula and what calibrates
//! it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One term of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Term {
    /// FLOPs over the rate a kernel of that size reaches (curve, grid or peak).
    RooflineCompute,
    /// Bytes a layer moves (inputs, output, weights, extra passes) over the memory bandwidth.
    MemoryTraffic,
    /// A measured element-wise class's own work per element.
    ElementwiseWork,
    /// A recurrent layer's gate arithmetic per time step.
    RnnCellWork,
    /// A recurrent layer's hidden weights' gradient, made at every time step and summed into the running one.
    RnnWeightGradients,
    /// A linear layer's bias as a pass of its own (CPU).
    BiasPass,
    /// What convolutions and linear layers cost inside the step beyond their isolated kernels.
    InStepExcess,
    /// The fixed cost of a node's framework operations.
    PerOpOverhead,
    /// Autograd's sums of the gradients of a tensor read by several nodes.
    GradientSums,
    /// A weight tied to another node's: read, its gradient product, its sum into the owner's.
    TiedWeights,
    /// The step's own fixed cost (the `(step)` row).
    StepFixed,
    /// The first node of each kind in a phase: its cold start.
    FirstNodeColdStart,
    /// The optimizer step.
    Optimizer,
    /// Allocations too large for the host allocator to keep, mapped afresh on every step: their pages' faults.
    FreshPages,
    /// Fresh pages the host reclaimed between steps (a virtual machine's free page reporting): faulted in again.
    ReclaimedPages,
    /// Adam's square root over second moments still zero: embedding rows no step has looked up.
    ZeroMomentSqrt,
    /// The input batch over the host link (T_data).
    InputCopy,
    /// The gradient exchange (T_comm).
    Exchange,
    /// Rate choice: a layer's products at their own shapes on the calibrated grid (off: along the GEMM curve).
    ProductGrid,
    /// Rate choice: a convolution at its channels, pixels per image and batch on the calibrated grid (off: along the
    /// curve).
    ConvGrid,
    /// Rate choice: a convolution that is not 3 x 3 at stride 1 at its measured kernel class's share of the grid's
    /// rate (off: the grid's rate for every kernel and stride, none for a transposed one).
    ConvClasses,
    /// Rate choice: bytes at the bandwidth of their working set (off: the triad's for every size).
    WorkingSetBandwidth,
    /// Rate choice: backward's bytes at the bandwidth of the step's saved activations (off: of their own size).
    BackwardWorkingSet,
    /// Rate choice: the training step's measured per-node costs (off: every operation at `op_overhead_us`).
    MeasuredNodeCosts,
    /// Rate choice: the optimizer's measured per-tensor and per-parameter costs (off: memory-bound passes).
    MeasuredOptimizer,
}

impl Term {
    /// Every term, additive ones first.
    pub const ALL: [Term; 25] = [
        Term::RooflineCompute,
        Term::MemoryTraffic,
        Term::ElementwiseWork,
        Term::RnnCellWork,
        Term::RnnWeightGradients,
        Term::BiasPass,
        Term::InStepExcess,
        Term::PerOpOverhead,
        Term::GradientSums,
        Term::TiedWeights,
        Term::StepFixed,
        Term::FirstNodeColdStart,
        Term::Optimizer,
        Term::FreshPages,
        Term::ReclaimedPages,
        Term::ZeroMomentSqrt,
        Term::InputCopy,
        Term::Exchange,
        Term::ProductGrid,
        Term::ConvGrid,
        Term::ConvClasses,
        Term::WorkingSetBandwidth,
        Term::BackwardWorkingSet,
        Term::MeasuredNodeCosts,
        Term::MeasuredOptimizer,
    ];

    /// The term's name (serde's; what `--without-term` takes).
    pub fn name(self) -> String {
        serde_json::to_value(self).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
    }

    /// The term named `name`, or an error naming it and every known term.
    pub fn parse(name: &str) -> Result<Term, UnknownTerm> {
        super::price_classes::parse(name).ok_or_else(|| UnknownTerm {
            name: name.to_string(),
            known: Term::ALL.iter().map(|t| t.name()).collect::<Vec<_>>().join(", "),
        })
    }
}

/// A term name no term has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown term `{name}` (known: {known})")]
pub struct UnknownTerm {
    /// The name given.
    pub name: String,
    /// Every term's name, comma-separated.
    pub known: String,
}

/// Which terms are on: every term unless switched off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Terms {
    off: Vec<Term>,
}

impl Terms {
    /// Every term on: the model as calibrated.
    pub fn all() -> Self {
        Self::default()
    }

    /// Every term but `off`.
    pub fn without(off: &[Term]) -> Self {
        let mut off = off.to_vec();
        off.sort();
        off.dedup();
        Self { off }
    }

    /// Whether `term` is on.
    pub fn on(&self, term: Term) -> bool {
        !self.off.contains(&term)
    }

    /// The terms switched off, sorted.
    pub fn off(&self) -> &[Term] {
        &self.off
    }

    /// `value` where `term` is on, else zero.
    pub fn gate(&self, term: Term, value: f64) -> f64 {
        if self.on(term) { value } else { 0.0 }
    }
}

/// Seconds of one phase by term (the additive terms that contribute; they sum to the phase's time).
pub type Breakdown = BTreeMap<Term, f64>;

/// Adds `seconds` of `term` to `b` (nothing for zero).
pub fn add(b: &mut Breakdown, term: Term, seconds: f64) {
    if seconds != 0.0 {
        *b.entry(term).or_insert(0.0) += seconds;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn terms_parse_by_name_and_an_unknown_name_lists_the_known_ones() {
        for t in Term::ALL {
            assert_eq!(Term::parse(&t.name()), Ok(t));
        }
        assert_eq!(Term::FirstNodeColdStart.name(), "first-node-cold-start");
        let e = Term::parse("cold-start").unwrap_err().to_string();
        assert!(e.contains("`cold-start`") && e.contains("first-node-cold-start") && e.contains("exchange"), "{e}");
        let t = Terms::without(&[Term::Exchange, Term::Exchange]);
        assert!(!t.on(Term::Exchange) && t.on(Term::Optimizer) && t.off() == [Term::Exchange]);
    }
}
