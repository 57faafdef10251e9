//! One pass over some of a suite's plans in this process, on one backend instance ([`Pass`]: out-of-memory
//! families skipped, each plan checked, then run by a [`RunSlot`]), and the [`Recorder`] that writes each
//! result, with its prediction, the moment it arrives. Every way of running a suite (in this process, in
//! workers, as ranks) ends in these two.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use trainbench_contract::{Backend, BackendError, RunPlan};
use trainbench_graph::analysis::analyze;

use super::options::{RunnerError, RunnerOptions, SuiteReport};
use super::output::SuiteWriter;
use super::plan_run::{GroupRun, RunSlot};
use super::probe::StopCause;
use super::suite::Suite;
use crate::predict::record::{RunProfile, section};
use crate::result::{ProcessInfo, RunOutcome, RunResult};

/// Writes a suite's results as they arrive, each with its prediction, and keeps the report.
pub(crate) struct Recorder {
    dir: PathBuf,
    /// The suite (its graph) the predictions are made for.
    suite: Suite,
    /// The profile they are made on.
    hardware: RunProfile,
    spec_name: String,
    spec_sha: String,
    writer: Option<SuiteWriter>,
    /// What the suite produced so far.
    pub(crate) report: SuiteReport,
}

impl Recorder {
    /// A recorder writing `suite`'s results under `opts.out_dir`, each with a prediction on `opts.hardware`.
    pub(crate) fn new(suite: &Suite, opts: &RunnerOptions) -> Self {
        let dir = opts.out_dir.join(&suite.spec_name);
        Recorder {
            dir: dir.clone(),
            suite: suite.clone(),
            hardware: opts.hardware.clone(),
            spec_name: suite.spec_name.clone(),
            spec_sha: crate::format::sha256_hex(&suite.spec_canonical),
            writer: None,
            report: SuiteReport { dir, results: Vec::new(), interrupted: false },
        }
    }

    /// Write one result (opening the folder on the first), with the prediction for its configuration; `stop` is
    /// what stopped its run early, if anything. Returns [`Flow::Stop`] when the user stopped the run (Ctrl-C or a
    /// stop request): the suite must stop.
    pub(crate) fn record(
        &mut self,
        mut result: RunResult,
        stop: Option<StopCause>,
        on_result: &mut dyn FnMut(&RunResult, &Path),
    ) -> Result<Flow, RunnerError> {
        result.prediction = Some(section(&self.hardware, &self.suite.graph, &result));
        let io = |source| RunnerError::Io { path: self.dir.display().to_string(), source };
        if self.writer.is_none() {
            self.writer = Some(SuiteWriter::open(self.dir.clone(), &self.spec_name, &self.spec_sha).map_err(io)?);
        }
        if let Some(w) = self.writer.as_mut() {
            let path = w.record(&result).map_err(io)?;
            on_result(&result, &path);
        }
        self.report.results.push(result);
        if stop == Some(StopCause::User) {
            self.report.interrupted = true;
            return Ok(Flow::Stop);
        }
        Ok(Flow::Continue)
    }
}

/// Whether a pass over plans goes on after a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Next plan.
    Continue,
    /// The user stopped the suite.
    Stop,
}

/// One pass over some of a suite's plans in this process, on one backend instance.
pub(crate) struct Pass<'a> {
    pub(crate) suite: &'a Suite,
    pub(crate) opts: &'a RunnerOptions,
    /// Recorded in each result: this process runs one repeat only.
    pub(crate) own_process_per_repeat: bool,
    /// This process is one rank of a data-parallel group (`trainbench worker --ranks`).
    pub(crate) ranks: Option<&'a RefCell<dyn GroupRun>>,
}

impl Pass<'_> {
    /// Run the plans at `indices`, in order, handing each result to `emit` with what stopped its run early, if
    /// anything. A plan of a family that already ran out of memory (in `ooms`, which grows) at a batch no larger is
    /// skipped. Returns [`Flow::Stop`] when the user stopped the suite.
    pub(crate) fn run(
        &self,
        backend: &mut dyn Backend,
        indices: &[usize],
        ooms: &mut Vec<RunPlan>,
        emit: &mut dyn FnMut(RunResult, Option<StopCause>) -> Result<Flow, RunnerError>,
    ) -> Result<Flow, RunnerError> {
        let (suite, opts) = (self.suite, self.opts);
        let analysis = analyze(&suite.graph);
        for &i in indices {
            let Some(plan) = suite.plans.get(i) else { continue };
            if opts.stop.is_set() {
                return Ok(Flow::Stop);
            }
            let ctx = RunSlot {
                suite,
                graph: &suite.graph,
                analysis: &analysis,
                opts,
                index: i,
                process: ProcessInfo { pid: std::process::id(), own_process_per_repeat: self.own_process_per_repeat },
                ranks: self.ranks,
            };
            let (result, stop) = match ooms.iter().find(|o| same_family(o, plan) && plan.batch_size >= o.batch_size) {
                Some(o) => (ctx.skipped(plan, backend, o.batch_size), None),
                None => match backend.check(plan, &suite.graph) {
                    Err(e @ BackendError::NotBuilt { .. }) => return Err(RunnerError::Backend(e)),
                    Err(e) => (ctx.not_run(plan, backend, e), None),
                    Ok(()) => ctx.run(plan, backend),
                },
            };
            if matches!(result.outcome, RunOutcome::OutOfMemory { .. }) {
                ooms.push(plan.clone());
            }
            if emit(result, stop)? == Flow::Stop {
                return Ok(Flow::Stop);
            }
        }
        Ok(Flow::Continue)
    }
}

/// Same model, precision, world size and device: a larger batch after an OOM would run out of memory too.
fn same_family(a: &RunPlan, b: &RunPlan) -> bool {
    a.precision == b.precision && a.topology.world_size() == b.topology.world_size() && a.device == b.device
}
