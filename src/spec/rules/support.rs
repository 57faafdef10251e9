//! The plan-time backend check: the runs a validated spec expands to are put to the backend that will run
//! them ([`crate::backends::refusals`], which asks [`trainbench_workload::Backend::supports`]), so a layer, loss or
//! precision the backend cannot execute is refused when the spec is validated or planned, with a
//! message naming the layer and the backend, never in the middle of a run.

use super::Finding;
use crate::backends::{self, BackendChoice};
use crate::plan::plan;
use crate::spec::ValidatedSpec;
use crate::spec::path::FieldPath;

/// What the spec's backend (`auto` resolved as the runner resolves it) refuses of the spec's runs.
pub fn check_support(spec: &ValidatedSpec) -> Vec<Finding> {
    check_support_on(spec, spec.spec().topology.backend, None)
}

/// What `backend` would refuse of the spec's runs, on `device` when given (for `trainbench run --backend
/// --device`).
pub fn check_support_on(spec: &ValidatedSpec, backend: BackendChoice, device: Option<&str>) -> Vec<Finding> {
    let mut plans = plan(spec);
    if let Some(d) = device {
        plans.iter_mut().for_each(|p| p.device = d.to_string());
    }
    let Some(first) = plans.first() else {
        return Vec::new();
    };
    let name = backends::name(backends::resolve_for(backend, &first.device));
    backends::refusals(backend, &plans, spec.graph())
        .into_iter()
        .map(|e| {
            Finding::new(FieldPath::keys(&["topology", "backend"]), e.to_string())
                .or_at(FieldPath::keys(&["model"]))
                .hint(format!(
                    "the {name} backend refuses this before anything runs; choose another backend \
                     (`topology.backend` or `--backend`), or change the model or precision"
                ))
        })
        .collect()
}
