//! What the runner executes: a [`Suite`], one validated spec's runs (from [`crate::plan::plan_on`], on the
//! placement decided once when the suite is built) with the workload graph and the settings all of them share.

use std::time::Duration;

use trainbench_contract::{BackendKind, RunPlan};
use trainbench_graph::Graph;

use super::clicks::ClickData;
use super::data::LocalData;
use crate::plan::{PlacementOverride, placement, plan_on};
use crate::spec::diagnostics::render_text;
use crate::spec::wire::{Isolation, MetricGroup};
use crate::spec::{Overrides, SpecValidator, ValidatedSpec};

/// One spec's runs and the settings shared by all of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Suite {
    /// Spec name (results go to `<out>/<spec_name>/`).
    pub spec_name: String,
    /// Canonical spec text (its SHA-256 is recorded in every result).
    pub spec_canonical: String,
    /// The model's training graph.
    pub graph: Graph,
    /// The backend every run goes to (`auto` resolved when the suite was planned).
    pub backend: BackendKind,
    /// Runs, in execution order (the planner puts batch sizes outermost, ascending as written), each on a
    /// device `backend` drives.
    pub plans: Vec<RunPlan>,
    /// Sampling period of the background collectors.
    pub sample_interval: Duration,
    /// Metric groups to collect; empty means all.
    pub metric_groups: Vec<MetricGroup>,
    /// Whether each repeat runs in a process of its own.
    pub isolation: Isolation,
    /// The local dataset every run reads; `None` for synthetic data.
    pub data: Option<LocalData>,
    /// The synthetic clicks every run trains on (`source = "clicks"`).
    pub clicks: Option<ClickData>,
}

/// Why a spec given as text is no suite.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SuiteError {
    /// The spec validator could not be built (its message).
    #[error("{0}")]
    NoValidator(String),
    /// The spec is invalid: its rendered diagnostics.
    #[error("{0}")]
    Invalid(String),
}

impl Suite {
    /// The suite of a validated spec, where the spec puts it.
    pub fn from_validated(spec: &ValidatedSpec) -> Self {
        Self::placed(spec, PlacementOverride::default())
    }

    /// The suite of a validated spec with the command line's `--backend` / `--device` applied.
    pub fn placed(spec: &ValidatedSpec, over: PlacementOverride) -> Self {
        let s = spec.spec();
        let placed = placement(spec, over);
        Suite {
            spec_name: spec.name().to_string(),
            spec_canonical: spec.canonical_toml().to_string(),
            graph: spec.graph().clone(),
            backend: placed.backend,
            plans: plan_on(spec, placed),
            sample_interval: Duration::from_millis(s.run.sample_interval_ms.max(1)),
            metric_groups: s.metrics.collect.clone(),
            isolation: s.run.isolation,
            data: LocalData::of(spec),
            clicks: ClickData::of(spec),
        }
    }

    /// The suite of a spec given as text, validated as a file would be (e.g. the canonical spec a result
    /// embeds); the error is the rendered diagnostics.
    pub fn from_spec_text(display: &str, text: &str) -> Result<Self, SuiteError> {
        let validator = SpecValidator::new().map_err(|e| SuiteError::NoValidator(e.to_string()))?;
        let checked = validator.check_bytes(display, text.as_bytes(), None, &Overrides::none());
        checked.into_result().map(|spec| Self::from_validated(&spec)).map_err(|d| SuiteError::Invalid(render_text(&d)))
    }

    /// Whether the runs go to worker processes, one per repeat: the spec asks for it (`run.isolation =
    /// "process"`) and there are repeats to separate, or the runs have a timeout (a worker hung past it can be
    /// killed; a call hung in this process could not be).
    pub fn uses_workers(&self) -> bool {
        self.isolation == Isolation::Process && self.plans.iter().any(|p| p.repeat > 0 || p.timeout_s.is_some())
    }

    /// Whether a metric group is collected.
    pub fn collects(&self, group: MetricGroup) -> bool {
        self.metric_groups.is_empty() || self.metric_groups.contains(&group)
    }
}
