//! The runner: executes a [`Suite`]'s runs one by one on a backend, with collectors around each run, turns
//! what was measured into a [`RunResult`] and writes it the moment the run ends (plus the suite index).
//!
//! Outcomes: a backend error `OutOfMemory` is recorded as `out_of_memory` and the sweep goes on, except that
//! later runs of the same precision and world size with a batch at least as large are recorded as `skipped`
//! (they would run out of memory too); other errors are recorded as `failed`; a plan timeout ends that run as
//! `interrupted` and the sweep goes on; Ctrl-C ends the current run as `interrupted` and stops the suite,
//! keeping every result written so far. What stopped a run travels beside its result as a [`StopCause`], so the
//! suite's control flow never reads a message. A backend that is not compiled in stops the suite before any run.

pub mod data;
pub mod hooks;
pub mod launch;
pub mod output;
pub mod probe;
pub mod ranked;
pub mod ranks;
pub mod suite;
pub mod warmup;
pub mod worker;

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use trainbench_contract::mock::MockConfig;
use trainbench_contract::{
    Backend, BackendError, BackendKind, DeviceInfo, DeviceSelector, RawMeasurements, RunContext, RunPlan,
};
use trainbench_data::{BatchSource, DataError, Loader};
use trainbench_graph::Graph;
use trainbench_graph::analysis::{Analysis, analyze, memory_estimate};

use crate::backends;
use crate::manifest::{ManifestInput, environment};
use crate::metrics::collect::{CollectorConfig, Collectors};
use crate::metrics::nvml::GpuTarget;
use crate::metrics::{DeriveInput, derive, peak};
use crate::predict::record::{RunProfile, section};
use crate::result::{
    AnalysisSummary, FORMAT_VERSION, LoaderThroughput, MemoryEstimate, ProcessInfo, RunOutcome, RunResult,
};
use crate::spec::wire::MetricGroup;
pub use hooks::TestHooks;
pub use output::SuiteWriter;
pub use probe::{RunProbe, StopCause, StopFlag};
pub use suite::Suite;

/// How to run a suite.
#[derive(Debug, Clone, Default)]
pub struct RunnerOptions {
    /// Results root; each suite writes to `<out_dir>/<spec name>/`.
    pub out_dir: PathBuf,
    /// Show each run's progress on stderr: a bar on a terminal, else a line every `progress_interval`.
    pub progress: bool,
    /// Time between progress lines when stderr is not a terminal; `None`: [`probe::PROGRESS_INTERVAL`].
    pub progress_interval: Option<Duration>,
    /// Run the background collectors (CPU, NVML); off to measure their overhead.
    pub no_collectors: bool,
    /// Settings of the mock backend.
    pub mock: MockConfig,
    /// Stop request shared with the caller (Ctrl-C is honoured as well).
    pub stop: StopFlag,
    /// The `trainbench` executable that runs a repeat in a process of its own (`trainbench worker`); `None`
    /// runs every repeat in this process whatever `run.isolation` says (the results record which).
    pub worker_exe: Option<PathBuf>,
    /// Hooks for trainbench's own tests; the default (all off) for real runs.
    pub test_hooks: TestHooks,
    /// The hardware profile each result's `prediction` is made on (`trainbench run --hardware`, else this
    /// machine's calibrated profile); the default records that none was given.
    pub hardware: RunProfile,
}

impl RunnerOptions {
    /// How [`RunProbe::new`] shows progress: not at all, or at this interval between lines in a log.
    fn progress_display(&self) -> Option<Duration> {
        self.progress.then(|| self.progress_interval.unwrap_or(probe::PROGRESS_INTERVAL))
    }

    /// The mock backend's settings, with its test hooks applied.
    fn mock_config(&self) -> MockConfig {
        self.test_hooks.mock_config(&self.mock)
    }
}

/// Why a suite could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The backend is not usable in this build.
    #[error("{0}")]
    Backend(BackendError),
    /// A worker process could not be started or could not run its job.
    #[error("{0}")]
    Worker(String),
    /// A result could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// What a suite produced.
#[derive(Debug, Clone)]
pub struct SuiteReport {
    /// Folder the results were written to.
    pub dir: PathBuf,
    /// Results in run order (only runs that were reached).
    pub results: Vec<RunResult>,
    /// True when Ctrl-C stopped the suite before all runs were done.
    pub interrupted: bool,
}

fn analysis_summary(a: &Analysis, plan: &RunPlan) -> AnalysisSummary {
    let m = memory_estimate(a, plan.batch_size, plan.precision, &plan.optimizer);
    AnalysisSummary {
        parameters: a.parameters,
        buffers: a.buffers,
        forward_flops_per_sample: a.flops.forward_per_sample,
        backward_flops_per_sample: a.flops.backward_per_sample,
        train_flops_per_sample: a.flops.train_per_sample,
        memory: MemoryEstimate {
            weights_bytes: m.weights,
            gradients_bytes: m.gradients,
            optimizer_state_bytes: m.optimizer_state,
            activations_bytes: m.activations,
            workspace_bytes: m.workspace,
            total_bytes: m.total,
        },
        notes: a.notes.clone(),
    }
}

/// Run every plan of `suite`, writing each result as soon as its run ends. `on_result` is called after each
/// result is written (for printing). When [`Suite::uses_workers`] (`run.isolation = "process"` with repeats or a
/// timeout) and `opts.worker_exe` is set, each repeat runs in a worker process of its own (see [`worker`]);
/// otherwise every run happens in this process.
pub fn run_suite(
    suite: &Suite,
    opts: &RunnerOptions,
    on_result: &mut dyn FnMut(&RunResult, &Path),
) -> Result<SuiteReport, RunnerError> {
    // A test's stand-in for a build without this backend: its stub refuses every run, as that build's would.
    if opts.test_hooks.backend_not_built == Some(suite.backend) {
        return run_suite_with(suite, opts, Box::new(backends::Unavailable::not_built(suite.backend)), on_result);
    }
    // Started on every rank by an external launcher (multi-node): this process is one of the ranks.
    if let Some(launcher) = ranks::launcher_world().filter(|(_, n)| *n > 1) {
        return ranked::run_as_ranks(suite, opts, launcher, on_result);
    }
    // Data-parallel runs always start their own ranks, except on the mock backend, which simulates every
    // topology in one process (it exchanges nothing).
    let ranked = suite.backend != BackendKind::Mock && suite.plans.iter().any(|p| !p.topology.strategy.is_single());
    if (suite.uses_workers() || ranked)
        && let Some(exe) = &opts.worker_exe
    {
        if let Some(e) = backends::not_built(suite.backend) {
            return Err(RunnerError::Backend(e));
        }
        return worker::run_isolated(suite, opts, exe, on_result);
    }
    run_suite_with(suite, opts, backends::create(suite.backend, &opts.mock_config()), on_result)
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

/// Writes a suite's results as they arrive, each with its prediction, and keeps the report.
struct Recorder {
    dir: PathBuf,
    /// The suite (its graph) the predictions are made for.
    suite: Suite,
    /// The profile they are made on.
    hardware: RunProfile,
    spec_name: String,
    spec_sha: String,
    writer: Option<SuiteWriter>,
    report: SuiteReport,
}

impl Recorder {
    fn new(suite: &Suite, opts: &RunnerOptions) -> Self {
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
    fn record(
        &mut self,
        mut result: RunResult,
        stop: Option<StopCause>,
        on_result: &mut dyn FnMut(&RunResult, &Path),
    ) -> Result<Flow, RunnerError> {
        let setting = crate::predict::Setting::of(&result.plan);
        result.prediction = Some(section(&self.hardware, &self.suite.graph, Some(&setting), &result));
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
    pub(crate) ranks: Option<&'a RefCell<ranks::Ranks>>,
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

/// One run of a suite being recorded: the suite and graph it belongs to, its index, the process it ran in.
struct RunSlot<'a> {
    suite: &'a Suite,
    graph: &'a Graph,
    analysis: &'a Analysis,
    opts: &'a RunnerOptions,
    index: usize,
    /// The process that trains (or, for a lost run, trained) the run.
    process: ProcessInfo,
    /// The group of ranks this process belongs to, for data-parallel plans.
    ranks: Option<&'a RefCell<ranks::Ranks>>,
}

impl RunSlot<'_> {
    fn result(
        &self,
        plan: &RunPlan,
        backend: &str,
        outcome: RunOutcome,
        times: (SystemTime, SystemTime),
        device: Option<DeviceInfo>,
        raw: Option<&RawMeasurements>,
    ) -> RunResult {
        let env = ManifestInput {
            spec_canonical: &self.suite.spec_canonical,
            seed: plan.seed,
            started: times.0,
            finished: times.1,
            device,
            process: self.process,
        };
        RunResult {
            format_version: FORMAT_VERSION,
            spec_name: self.suite.spec_name.clone(),
            run_id: plan.id.clone(),
            backend: backend.to_string(),
            plan: plan.clone(),
            outcome,
            metrics: None,
            analysis: Some(analysis_summary(self.analysis, plan)),
            environment: environment(env, raw),
            distributed: None,
            data: None,
            prediction: None,
        }
    }

    fn skipped(&self, plan: &RunPlan, backend: &dyn Backend, oom_batch: usize) -> RunResult {
        let now = SystemTime::now();
        let reason =
            format!("batch size {oom_batch} of the same model, precision and device already ran out of memory");
        self.result(plan, backend.name(), RunOutcome::Skipped { reason }, (now, now), device_of(backend, plan), None)
    }

    fn not_run(&self, plan: &RunPlan, backend: &dyn Backend, err: BackendError) -> RunResult {
        let now = SystemTime::now();
        self.result(plan, backend.name(), outcome_of_error(err), (now, now), device_of(backend, plan), None)
    }

    /// Train and measure `plan`; the result, and what stopped the run early (if anything).
    fn run(&self, plan: &RunPlan, backend: &mut dyn Backend) -> (RunResult, Option<StopCause>) {
        let device = device_of(backend, plan);
        let collect = !self.opts.no_collectors;
        let gpu_target = GpuTarget::for_device(plan.device, device.as_ref());
        let wants_gpu =
            self.suite.collects(MetricGroup::GpuUtilization) || self.suite.collects(MetricGroup::PowerEnergy);
        let config = CollectorConfig {
            interval: self.suite.sample_interval,
            cpu: collect && self.suite.collects(MetricGroup::CpuUtilization),
            gpu: if collect && wants_gpu { gpu_target.clone() } else { None },
        };
        let label = format!("[{}/{}] {}", self.index + 1, self.suite.plans.len(), plan.id);
        let mut probe = RunProbe::new(plan, &label, self.opts.progress_display(), self.opts.stop.clone());
        if let Some((run, n)) = self.opts.test_hooks.interrupt_at {
            if run == self.index {
                probe = probe.interrupt_after(n);
            }
        }
        warmup::warm_up_process(backend, plan, self.graph, &self.opts.stop);
        let (mut loader, throughput, eval) = match self.open_data(plan) {
            Ok(opened) => opened,
            Err(e) => {
                let now = SystemTime::now();
                let outcome = RunOutcome::Failed { message: format!("local dataset: {e}") };
                return (self.result(plan, backend.name(), outcome, (now, now), device, None), None);
            }
        };
        let started = SystemTime::now();
        let clock = Instant::now();
        let collectors = Collectors::start(&config);
        let origin = collectors.origin();
        let (outcome, distributed) = match self.ranks.filter(|_| !plan.topology.strategy.is_single()) {
            Some(ranks) => {
                let data = loader.as_mut().map(|l| l as &mut dyn BatchSource);
                let rank = ranks.borrow().rank();
                match self.opts.test_hooks.rank_out_of_memory(plan, rank) {
                    Some(e) => (Err(e), None),
                    None => match ranks.borrow_mut().train(plan, self.graph, backend, &mut probe, data) {
                        Ok((raw, section)) => (Ok(raw), section),
                        Err(e) => (Err(e), None),
                    },
                }
            }
            None => {
                let mut ctx = RunContext::new(&mut probe);
                ctx.data = loader.as_mut().map(|l| l as &mut dyn BatchSource);
                ctx.eval = eval.as_ref();
                (backend.run_in(plan, self.graph, &mut ctx), None)
            }
        };
        let samples = collectors.stop();
        let finished = SystemTime::now();
        probe.finish();
        let data = self.suite.data.as_ref().zip(loader.as_ref()).map(|(d, l)| d.summary(l, throughput));

        let raw = match outcome {
            Ok(raw) => raw,
            Err(e) => {
                let outcome = outcome_of_error(e);
                let mut result = self.result(plan, backend.name(), outcome, (started, finished), device, None);
                result.data = data;
                return (result, None);
            }
        };
        // Backends may enforce the timeout themselves, so the probe need not have seen the cause.
        let cause = probe.stop_cause().or_else(|| {
            if self.opts.stop.is_set() {
                Some(StopCause::User)
            } else {
                plan.timeout_s.filter(|t| clock.elapsed().as_secs_f64() >= *t).map(StopCause::Timeout)
            }
        });
        let (outcome, stop) = match (raw.interrupted, cause) {
            (false, _) => (RunOutcome::Completed, None),
            (true, Some(cause)) => (RunOutcome::Interrupted { reason: cause.reason() }, Some(cause)),
            (true, None) => (RunOutcome::Interrupted { reason: "stopped early by the backend".into() }, None),
        };
        let mut result = self.result(plan, backend.name(), outcome, (started, finished), device.clone(), Some(&raw));
        result.data = data;
        let used = raw.device.clone().or(device);
        let peak = used.as_ref().and_then(|d| peak::peak_for(d, plan.precision, raw.tf32));
        let absent_cpu = absent_reason(collect, self.suite.collects(MetricGroup::CpuUtilization), None);
        let absent_gpu = absent_reason(collect, wants_gpu, gpu_target.is_none().then_some(plan.device));
        let secs = |t: Option<Instant>| t.map(|t| t.saturating_duration_since(origin).as_secs_f64()).unwrap_or(0.0);
        let window = (secs(probe.measure_start), secs(probe.measure_end));
        result.metrics = derive(&DeriveInput {
            plan,
            raw: &raw,
            items_per_sample: self.graph.items_per_sample,
            item_unit: &self.graph.item_unit,
            analysis: result.analysis.as_ref(),
            peak,
            collectors: &samples,
            window,
            cpu_absent: &absent_cpu,
            gpu_absent: &absent_gpu,
        });
        result.distributed = distributed;
        (result, stop)
    }
}

impl RunSlot<'_> {
    /// The run's loader when it reads a local dataset (a data-parallel worker's on its rank's shard: its slice
    /// of every global batch), the loader's throughput measured alone just before, and the evaluation split of a
    /// run with a target.
    fn open_data(&self, plan: &RunPlan) -> Result<OpenedData, DataError> {
        let Some(local) = &self.suite.data else { return Ok((None, None, None)) };
        let dataset = local.open(self.graph)?;
        let throughput = local.measure(dataset.clone(), plan, self.graph)?;
        let eval = local.eval_set(plan, self.graph)?;
        let rank = match self.ranks {
            Some(r) if !plan.topology.strategy.is_single() => r.borrow().rank(),
            _ => 0,
        };
        Ok((Some(local.loader(dataset, plan, self.graph, rank)?), Some(throughput), eval))
    }
}

/// What a run reading a local dataset opens: its loader, the loader's throughput alone, its evaluation split.
type OpenedData = (Option<Loader>, Option<LoaderThroughput>, Option<trainbench_data::EvalSet>);

/// Why a collector's figures are missing: disabled, not asked for, or not applicable to the device.
fn absent_reason(collect: bool, group_on: bool, non_gpu_device: Option<DeviceSelector>) -> String {
    match (collect, group_on, non_gpu_device) {
        (_, _, Some(d)) => format!("the run used device `{d}`, not an NVIDIA GPU"),
        (false, _, None) => "collectors disabled (--no-collectors)".into(),
        (true, false, None) => "not collected (metrics.collect)".into(),
        (true, true, None) => "no samples".into(),
    }
}

fn device_of(backend: &dyn Backend, plan: &RunPlan) -> Option<DeviceInfo> {
    device_in(&backend.devices(), plan)
}

/// The device of `devices` that `plan` is placed on.
pub(crate) fn device_in(devices: &[DeviceInfo], plan: &RunPlan) -> Option<DeviceInfo> {
    // Compare typed selectors: a plan on `cuda` runs on the device listed as `cuda:0`.
    let same = |listed: &str| listed.parse::<DeviceSelector>().is_ok_and(|d| d.canonical() == plan.device.canonical());
    devices.iter().find(|d| same(&d.selector)).cloned()
}

/// The devices of `backend` that `plans` are placed on, each once (listed once, not once per plan).
pub(crate) fn devices_of<'a>(backend: &dyn Backend, plans: impl IntoIterator<Item = &'a RunPlan>) -> Vec<DeviceInfo> {
    let listed = backend.devices();
    let mut placed: Vec<DeviceInfo> = Vec::new();
    for plan in plans {
        if let Some(d) = device_in(&listed, plan).filter(|d| !placed.contains(d)) {
            placed.push(d);
        }
    }
    placed
}

fn outcome_of_error(e: BackendError) -> RunOutcome {
    match e {
        BackendError::OutOfMemory { batch_size, message } => RunOutcome::OutOfMemory { batch_size, message },
        other => RunOutcome::Failed { message: other.to_string() },
    }
}
