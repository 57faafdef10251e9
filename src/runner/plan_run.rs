//! One run of a suite ([`RunSlot`]): the process warm-up, the local dataset, the collectors around the
//! training (in this process, or as one rank of a group through [`GroupRun`]), and the [`RunResult`] built from
//! what was measured; also the result of a run that never ran (skipped, refused, lost with its worker).

use std::cell::RefCell;
use std::time::{Instant, SystemTime};

use trainbench_contract::{
    Backend, BackendError, DeviceInfo, DeviceSelector, Probe, RawMeasurements, RunContext, RunPlan,
};
use trainbench_data::{BatchSource, DataError, Loader, MemorySource};
use trainbench_graph::Graph;
use trainbench_graph::analysis::{Analysis, memory_estimate_checkpointed};

use super::options::RunnerOptions;
use super::probe::{RunProbe, StopCause};
use super::suite::Suite;
use super::warmup;
use crate::manifest::{ManifestInput, environment};
use crate::metrics::collect::{CollectorConfig, Collectors};
use crate::metrics::nvml::GpuTarget;
use crate::metrics::{DeriveInput, derive, peak};
use crate::result::distributed::DistributedResult;
use crate::result::{
    AnalysisSummary, FORMAT_VERSION, LoaderThroughput, MemoryEstimate, ProcessInfo, RunOutcome, RunResult, StageRecord,
};
use crate::spec::wire::MetricGroup;

/// This process as one rank of a data-parallel group, as a run sees it: its rank, and training a plan with the
/// group (the gradient exchange, then the ranks' figures merged on rank 0). [`crate::runner::dist::Ranks`] is
/// the one implementation; the per-run code names only this, so it sits below the data-parallel layer.
pub(crate) trait GroupRun {
    /// This process's rank in the group.
    fn rank(&self) -> usize;
    /// Train `plan` as one worker of the group; rank 0 gets the merged measurements and the distributed
    /// section.
    fn train(
        &mut self,
        plan: &RunPlan,
        graph: &Graph,
        backend: &mut dyn Backend,
        probe: &mut dyn Probe,
        data: Option<&mut dyn BatchSource>,
    ) -> Result<(RawMeasurements, Option<DistributedResult>), BackendError>;
}

pub(crate) fn analysis_summary(a: &Analysis, graph: &Graph, plan: &RunPlan) -> AnalysisSummary {
    let m =
        memory_estimate_checkpointed(a, plan.batch_size, plan.precision, &plan.optimizer, plan.schedule.checkpointing);
    AnalysisSummary {
        parameters: a.parameters,
        trainable_parameters: (a.trainable_parameters < a.parameters).then_some(a.trainable_parameters),
        active_parameters: (a.active_parameters < a.parameters).then_some(a.active_parameters),
        buffers: a.buffers,
        forward_flops_per_sample: a.flops.forward_per_sample,
        backward_flops_per_sample: a.flops.backward_per_sample,
        train_flops_per_sample: a.flops.train_per_sample,
        model_flops: (a.model_flops.per_sample > 0).then(|| a.model_flops.clone()),
        hardware_flops_per_sample: (!plan.schedule.checkpointing.is_none())
            .then(|| a.hardware_flops(plan.schedule.checkpointing)),
        memory: MemoryEstimate {
            weights_bytes: m.weights,
            gradients_bytes: m.gradients,
            optimizer_state_bytes: m.optimizer_state,
            activations_bytes: m.activations,
            workspace_bytes: m.workspace,
            total_bytes: m.total,
        },
        notes: a.notes.clone(),
        pipeline_stages: pipeline_stages(a, graph, plan),
    }
}

/// A pipelined plan's chunks as cut for its mesh (none without a pipeline, or where the cut is impossible: the
/// spec rules refuse such plans).
fn pipeline_stages(a: &Analysis, graph: &Graph, plan: &RunPlan) -> Vec<StageRecord> {
    let mesh = plan.topology.mesh;
    if mesh.pipeline_parallel <= 1 {
        return Vec::new();
    }
    let cut =
        trainbench_graph::stages::cut_stages(graph, a, mesh.pipeline_parallel, mesh.virtual_stages, plan.given_cut());
    cut.unwrap_or_default()
        .into_iter()
        .map(|s| StageRecord {
            chunk: s.index,
            stage: s.rank,
            blocks: [s.blocks.start, s.blocks.end],
            parameters: s.parameters,
            train_flops_per_sample: s.training_flops,
            forward_flops_per_sample: s.forward_flops,
        })
        .collect()
}

/// One run of a suite being recorded: the suite and graph it belongs to, its index, the process it ran in.
pub(crate) struct RunSlot<'a> {
    pub(crate) suite: &'a Suite,
    pub(crate) graph: &'a Graph,
    pub(crate) analysis: &'a Analysis,
    pub(crate) opts: &'a RunnerOptions,
    /// The plan's index in the suite.
    pub(crate) index: usize,
    /// The process that trains (or, for a lost run, trained) the run.
    pub(crate) process: ProcessInfo,
    /// The group of ranks this process belongs to, for data-parallel plans.
    pub(crate) ranks: Option<&'a RefCell<dyn GroupRun>>,
}

impl RunSlot<'_> {
    /// A result of `plan` with every section but the measured ones filled in.
    pub(crate) fn result(
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
            analysis: Some(analysis_summary(self.analysis, self.graph, plan)),
            environment: environment(env, raw),
            distributed: None,
            data: None,
            prediction: None,
            mlperf: None,
        }
    }

    /// The result of a plan skipped because a batch no larger of its family ran out of memory.
    pub(crate) fn skipped(&self, plan: &RunPlan, backend: &dyn Backend, oom_batch: usize) -> RunResult {
        let now = SystemTime::now();
        let reason =
            format!("batch size {oom_batch} of the same model, precision and device already ran out of memory");
        self.result(plan, backend.name(), RunOutcome::Skipped { reason }, (now, now), device_of(backend, plan), None)
    }

    /// The result of a plan the backend refused.
    pub(crate) fn not_run(&self, plan: &RunPlan, backend: &dyn Backend, err: BackendError) -> RunResult {
        let now = SystemTime::now();
        self.result(plan, backend.name(), outcome_of_error(err), (now, now), device_of(backend, plan), None)
    }

    /// Train and measure `plan`; the result, and what stopped the run early (if anything).
    pub(crate) fn run(&self, plan: &RunPlan, backend: &mut dyn Backend) -> (RunResult, Option<StopCause>) {
        let device = device_of(backend, plan);
        if let Some(why) = crate::plan::unrunnable_plan(plan, backend.kind()) {
            // `run` refuses these at plan time; a plan reaching here another way fails rather than train as DP.
            let now = SystemTime::now();
            let outcome = RunOutcome::Failed { message: why };
            return (self.result(plan, backend.name(), outcome, (now, now), device, None), None);
        }
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
        let (mut loader, mut generated, throughput, eval) = match self.open_data(plan) {
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
                let data = loader
                    .as_mut()
                    .map(|l| l as &mut dyn BatchSource)
                    .or_else(|| generated.as_mut().map(|g| g as &mut dyn BatchSource));
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
                ctx.data = loader
                    .as_mut()
                    .map(|l| l as &mut dyn BatchSource)
                    .or_else(|| generated.as_mut().map(|g| g as &mut dyn BatchSource));
                ctx.eval = eval.as_ref();
                (backend.run_in(plan, self.graph, &mut ctx), None)
            }
        };
        let samples = collectors.stop();
        let finished = SystemTime::now();
        probe.finish();
        let data = self.suite.data.as_ref().zip(loader.as_ref()).map(|(d, l)| d.summary(l, throughput));
        let data = data.or_else(|| self.suite.clicks.map(|c| c.summary(plan.batch_size)));

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
            // One rank of a group: another rank's timeout or stop ended the step for all (ranks' clocks differ).
            (true, None) if distributed.is_some() => {
                (RunOutcome::Interrupted { reason: "stopped by another rank (its timeout or a stop)".into() }, None)
            }
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
        if let (Some(section), Some(a)) =
            (result.distributed.as_mut().and_then(|d| d.pipeline.as_mut()), result.analysis.as_ref())
        {
            super::dist::pipeline::replay_cut(section, &plan.topology.mesh, &a.pipeline_stages);
        }
        (result, stop)
    }
}

impl RunSlot<'_> {
    /// The run's loader when it reads a local dataset (a data-parallel worker's on its rank's shard: its slice
    /// of every global batch), the loader's throughput measured alone just before, and the evaluation split of a
    /// run with a target.
    /// On synthetic clicks: this rank's generated batches and the held-out clicks.
    fn open_data(&self, plan: &RunPlan) -> Result<OpenedData, DataError> {
        // Data is sharded over the data-parallel ranks: a tensor group's ranks read the same batches.
        let rank = match self.ranks {
            Some(r) if !plan.topology.strategy.is_single() => {
                let rank = r.borrow().rank();
                plan.topology.mesh.coords(rank, plan.topology.world_size()).map_or(rank, |c| c.dp)
            }
            _ => 0,
        };
        if let Some(clicks) = &self.suite.clicks {
            let (source, eval) = clicks.open(plan, self.graph, rank)?;
            return Ok((None, Some(source), None, eval));
        }
        let Some(local) = &self.suite.data else { return Ok((None, None, None, None)) };
        let dataset = local.open(self.graph)?;
        let throughput = local.measure(dataset.clone(), plan, self.graph)?;
        let eval = local.eval_set(plan, self.graph)?;
        Ok((Some(local.loader(dataset, plan, self.graph, rank)?), None, Some(throughput), eval))
    }
}

/// What a run reading a local dataset or clicks opens: its loader or generated batches, the loader's throughput
/// alone, its evaluation split.
type OpenedData = (Option<Loader>, Option<MemorySource>, Option<LoaderThroughput>, Option<trainbench_data::EvalSet>);

/// Why a collector's figures are missing: disabled, not asked for, or not applicable to the device.
fn absent_reason(collect: bool, group_on: bool, non_gpu_device: Option<DeviceSelector>) -> String {
    match (collect, group_on, non_gpu_device) {
        (_, _, Some(d)) => format!("the run used device `{d}`, not an NVIDIA GPU"),
        (false, _, None) => "collectors disabled (--no-collectors)".into(),
        (true, false, None) => "not collected (metrics.collect)".into(),
        (true, true, None) => "no samples".into(),
    }
}

pub(crate) fn device_of(backend: &dyn Backend, plan: &RunPlan) -> Option<DeviceInfo> {
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

pub(crate) fn outcome_of_error(e: BackendError) -> RunOutcome {
    match e {
        BackendError::OutOfMemory { batch_size, message } => RunOutcome::OutOfMemory { batch_size, message },
        other => RunOutcome::Failed { message: other.to_string() },
    }
}
