//! Re-running the run a result describes, on this machine, through the runner: the embedded spec gives the
//! model and settings, the stored plan gives the exact run (batch, precision, seed, budget, repeat).

use std::path::PathBuf;

use trainbench_contract::DeviceSelector;

use super::RerunError;
use crate::backend_registry::BackendChoice;
use crate::plan::PlacementOverride;
use crate::result::RunResult;
use crate::runner::{RunnerOptions, Suite, run_suite};
use crate::spec::overrides::Overrides;
use crate::spec::validate::SpecValidator;

/// How to re-run.
#[derive(Debug, Clone, Default)]
pub struct RerunOptions {
    /// Backend; `None` uses the one that produced the result.
    pub backend: Option<BackendChoice>,
    /// Device selector; `None` keeps the plan's.
    pub device: Option<DeviceSelector>,
    /// Folder the re-run result is written to (`<dir>/<spec>/<run id>.json`).
    pub out_dir: PathBuf,
    /// Show progress.
    pub progress: bool,
}

/// The backend a result names (`RunResult::backend`, a `BackendKind`'s name), read as the spec's
/// `topology.backend` reads it: the names are defined once, by the types, not listed again here.
fn backend_of(name: &str) -> Option<BackendChoice> {
    serde_json::from_value(serde_json::Value::String(name.to_string())).ok()
}

/// Re-run `original`'s plan with the model and settings of its embedded spec.
pub fn rerun_here(original: &RunResult, opts: &RerunOptions) -> Result<RunResult, RerunError> {
    let validator = SpecValidator::new().map_err(|e| RerunError(e.to_string()))?;
    let spec = validator
        .check_bytes("<embedded spec>", original.environment.spec_canonical.as_bytes(), None, &Overrides::none())
        .into_result()
        .map_err(|diagnostics| {
            RerunError(format!(
                "this trainbench does not accept the embedded spec:\n{}",
                crate::spec::diagnostics::render_text(&diagnostics)
            ))
        })?;
    let over = PlacementOverride {
        backend: opts.backend.or_else(|| backend_of(&original.backend)),
        device: Some(opts.device.unwrap_or(original.plan.device)),
    };
    let mut suite = Suite::placed(&spec, over);
    let device = suite.plans.first().map_or(original.plan.device, |p| p.device);
    // The original's configuration, recovered from its run id when it predates `RunPlan::config`.
    let config = original.config_id().to_string();
    suite.plans = vec![trainbench_contract::RunPlan { device, config, ..original.plan.clone() }];
    let runner = RunnerOptions { out_dir: opts.out_dir.clone(), progress: opts.progress, ..RunnerOptions::default() };
    let report = run_suite(&suite, &runner, &mut |_, _| {}).map_err(|e| RerunError(e.to_string()))?;
    report.results.into_iter().next().ok_or_else(|| RerunError("the re-run was interrupted before it started".into()))
}

#[cfg(test)]
mod tests {
    use trainbench_contract::BackendKind;

    use super::*;
    use crate::backend_registry;

    #[test]
    fn a_recorded_backend_name_reruns_on_that_backend() {
        for kind in [BackendKind::Tch, BackendKind::Wgpu, BackendKind::Mock] {
            let choice = backend_of(kind.name());
            assert_eq!(
                choice.map(|c| backend_registry::resolve(c, DeviceSelector::Cpu)),
                Some(kind),
                "{}",
                kind.name()
            );
        }
        assert_eq!(backend_of("torch"), None);
        assert_eq!(backend_of(""), None);
    }
}
