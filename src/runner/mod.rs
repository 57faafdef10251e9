//! The runner: executes a [`Suite`]'s runs one by one on a backend, with collectors around each run, turns
//! what was measured into a [`RunResult`] and writes it the moment the run ends (plus the suite index).
//!
//! Outcomes: a backend error `OutOfMemory` is recorded as `out_of_memory` and the sweep goes on, except that
//! later runs of the same precision and world size with a batch at least as large are recorded as `skipped`
//! (they would run out of memory too); other errors are recorded as `failed`; a plan timeout ends that run as
//! `interrupted` and the sweep goes on; Ctrl-C ends the current run as `interrupted` and stops the suite,
//! keeping every result written so far. What stopped a run travels beside its result as a [`StopCause`], so the
//! suite's control flow never reads a message. A backend that is not compiled in stops the suite before any run.
//!
//! Layers, each depending only on those before it: the shared values and one run ([`options`], [`suite`],
//! [`probe`], [`data`], [`output`], [`warmup`], [`hooks`], [`slot`], [`pass`]); the worker protocol
//! ([`protocol`]); data-parallel ranks ([`dist`]); repeats in processes of their own ([`isolate`]); and here, the
//! suite loop that picks one of them (`scripts/import_cycles.py src/runner` checks that no circle creeps in).

pub mod clicks;
pub mod data;
pub mod dist;
pub mod hooks;
pub(crate) mod in_process;
pub mod isolate;
pub mod options;
pub mod output;
pub(crate) mod plan_run;
pub mod probe;
pub mod protocol;
pub mod suite;
pub mod warmup;

use std::path::Path;

use trainbench_contract::{Backend, BackendKind};

use crate::backend_registry;
use crate::result::RunResult;
pub use hooks::TestHooks;
use in_process::{Pass, Recorder};
pub use options::{RunnerError, RunnerOptions, SuiteReport};
pub use output::SuiteWriter;
pub use probe::{RunProbe, StopCause, StopFlag};
pub use suite::Suite;

/// Run every plan of `suite`, writing each result as soon as its run ends. `on_result` is called after each
/// result is written (for printing). When [`Suite::uses_workers`] (`run.isolation = "process"` with repeats or a
/// timeout) and `opts.worker_exe` is set, each repeat runs in a worker process of its own (see [`isolate`]);
/// otherwise every run happens in this process.
pub fn run_suite(
    suite: &Suite,
    opts: &RunnerOptions,
    on_result: &mut dyn FnMut(&RunResult, &Path),
) -> Result<SuiteReport, RunnerError> {
    // A test's stand-in for a build without this backend: its stub refuses every run, as that build's would.
    if opts.test_hooks.backend_not_built == Some(suite.backend) {
        return run_suite_with(
            suite,
            opts,
            Box::new(backend_registry::Unavailable::not_built(suite.backend)),
            on_result,
        );
    }
    // Started on every rank by an external launcher (multi-node): this process is one of the ranks.
    if let Some(launcher) = dist::LauncherEnv::get().external_ranks() {
        return dist::rank_loop::run_as_ranks(suite, opts, launcher, on_result);
    }
    // Data-parallel runs always start their own ranks, except on the mock backend, which simulates every
    // topology in one process (it exchanges nothing).
    let ranked = suite.backend != BackendKind::Mock && suite.plans.iter().any(|p| !p.topology.strategy.is_single());
    if (suite.uses_workers() || ranked)
        && let Some(exe) = &opts.worker_exe
    {
        if let Some(e) = backend_registry::not_built(suite.backend) {
            return Err(RunnerError::Backend(e));
        }
        return isolate::run_isolated(suite, opts, exe, on_result);
    }
    run_suite_with(suite, opts, backend_registry::create(suite.backend, &opts.mock_config()), on_result)
}

/// [`run_suite`] on a given backend instance, every run in this process (embedders, tests with custom
/// backends).
pub fn run_suite_with(
    suite: &Suite,
    opts: &RunnerOptions,
    mut backend: Box<dyn Backend>,
    on_result: &mut dyn FnMut(&RunResult, &Path),
) -> Result<SuiteReport, RunnerError> {
    let mut recorder = Recorder::new(suite, opts);
    let indices: Vec<usize> = (0..suite.plans.len()).collect();
    let mut ooms = Vec::new();
    let pass = Pass { suite, opts, own_process_per_repeat: false, ranks: None };
    pass.run(backend.as_mut(), &indices, &mut ooms, &mut |result, stop| recorder.record(result, stop, on_result))?;
    Ok(recorder.report)
}
