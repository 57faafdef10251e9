//! The plan file of a Slurm submission (`<out>/_slurm/plan.json`): every planned run of the submitted specs as one
//! numbered task, with what the task needs to run it exactly as a local run would (the canonical spec, the
//! backend, the resolved local dataset, the [`RunPlan`]) and the resources Slurm must give it. Array task `N` of
//! a batch script runs task `N` of this file (`trainbench slurm-task --plan-file F --task N`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use trainbench_contract::mock::MockConfig;
use trainbench_contract::{BackendKind, DeviceSelector, RunPlan};

use super::SlurmError;
use crate::runner::Suite;
use crate::runner::data::LocalData;
use crate::runner::output::{result_path, write_json};

/// Version of the plan file's layout; a task refuses a file of another version.
pub const PLAN_FORMAT_VERSION: u32 = 1;

/// A Slurm submission's runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// [`PLAN_FORMAT_VERSION`].
    pub format_version: u32,
    /// The results folder every task writes to (absolute).
    pub out: PathBuf,
    /// The `trainbench` executable the batch scripts start (absolute; it must be reachable on every node).
    pub exe: PathBuf,
    /// The specs, each once.
    pub suites: Vec<PlanSuite>,
    /// Every planned run, in plan order; a task's number is its index here.
    pub tasks: Vec<PlanTask>,
    /// Collectors off (`run --no-collectors`).
    pub no_collectors: bool,
    /// Settings of the mock backend (`run --mock-slowdown`).
    pub mock: MockConfig,
}

/// One spec of a submission.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanSuite {
    /// The spec file as given on the command line.
    pub source: String,
    /// Spec name (results go to `<out>/<spec_name>/`).
    pub spec_name: String,
    /// The canonical spec (overrides applied); a task validates it again and checks its hash.
    pub spec_canonical: String,
    /// The backend every run of the spec goes to (`auto` resolved and `--backend` applied when submitting).
    pub backend: BackendKind,
    /// The local dataset, resolved when submitting (the canonical spec's path is relative to the spec's folder).
    pub data: Option<LocalData>,
}

/// One run of a submission: one Slurm array task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanTask {
    /// Index into [`PlanFile::suites`].
    pub suite: usize,
    /// The run, as planned when submitting.
    pub plan: RunPlan,
    /// What Slurm must give it.
    pub resources: Resources,
    /// The batch script (in the submission folder) whose job array holds it.
    pub script: String,
}

/// The Slurm resources of one task.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// Processes of the run: 1, or for a data-parallel run on a real backend its workers plus parameter servers,
    /// each a rank of an `srun` step (`--ntasks`).
    pub ntasks: usize,
    /// Machines (`--nodes`): the topology's `nodes` for a multi-rank run, else 1.
    pub nodes: usize,
    /// GPUs per machine (`--gpus-per-node`) for CUDA runs: the topology's devices per node; 0 elsewhere.
    pub gpus_per_node: usize,
    /// CPUs per process (`--cpus-per-task`): the spec's `run.cpu_threads`, when it sets them.
    pub cpus_per_task: Option<u32>,
    /// The time limit in minutes (`--time`) derived from `run.timeout_s`; `None` without a timeout.
    pub minutes: Option<u64>,
}

/// Seconds a task may need beyond its run's `timeout_s`: starting the process, building the model, the process
/// warm-up, the hung-worker grace of a run in a worker process, and writing the result.
pub const TIME_MARGIN_S: f64 = 180.0;

impl Resources {
    /// The resources of `plan` on `backend`, placed on the machines of its topology. The mock backend
    /// simulates every topology in one process (as in a local run), so its runs are one process.
    pub fn of(plan: &RunPlan, backend: BackendKind) -> Self {
        let nodes = plan.topology.nodes;
        let ranked = backend != BackendKind::Mock && !plan.topology.strategy.is_single();
        let ntasks = if ranked { plan.topology.processes().max(1) } else { 1 };
        let nodes = if ntasks > 1 { nodes.clamp(1, ntasks) } else { 1 };
        let gpus_per_node = match plan.device {
            DeviceSelector::Cuda(_) if ntasks > 1 => plan.topology.world_size().div_ceil(nodes),
            DeviceSelector::Cuda(_) => 1,
            _ => 0,
        };
        let minutes = plan
            .timeout_s
            .filter(|t| t.is_finite() && *t >= 0.0)
            .map(|t| ((t + TIME_MARGIN_S) / 60.0).ceil().max(1.0) as u64);
        Resources { ntasks, nodes, gpus_per_node, cpus_per_task: plan.cpu_threads, minutes }
    }
}

impl PlanFile {
    /// The plan file of `suites` (each with the spec file it came from), whose results go to `out`.
    pub fn new(out: PathBuf, exe: PathBuf, suites: &[(String, Suite)], no_collectors: bool, mock: MockConfig) -> Self {
        let mut file = PlanFile {
            format_version: PLAN_FORMAT_VERSION,
            out,
            exe,
            suites: Vec::new(),
            tasks: Vec::new(),
            no_collectors,
            mock,
        };
        for (source, suite) in suites {
            let index = file.suites.len();
            file.suites.push(PlanSuite {
                source: source.clone(),
                spec_name: suite.spec_name.clone(),
                spec_canonical: suite.spec_canonical.clone(),
                backend: suite.backend,
                data: suite.data.clone(),
            });
            for plan in &suite.plans {
                let resources = Resources::of(plan, suite.backend);
                file.tasks.push(PlanTask { suite: index, plan: plan.clone(), resources, script: String::new() });
            }
        }
        file
    }

    /// Read a plan file.
    pub fn read(path: &Path) -> Result<Self, SlurmError> {
        let text = std::fs::read_to_string(path).map_err(|source| SlurmError::io(path, source))?;
        let file: PlanFile = serde_json::from_str(&text)
            .map_err(|e| SlurmError::Invalid(format!("{}: not a trainbench Slurm plan file: {e}", path.display())))?;
        if file.format_version != PLAN_FORMAT_VERSION {
            return Err(SlurmError::Invalid(format!(
                "{}: plan file format {} (this trainbench reads {PLAN_FORMAT_VERSION}); submit the specs again",
                path.display(),
                file.format_version
            )));
        }
        Ok(file)
    }

    /// Write it atomically.
    pub fn write(&self, path: &Path) -> Result<(), SlurmError> {
        write_json(path, self).map_err(|source| SlurmError::io(path, source))
    }

    /// Task `n`, with its spec.
    pub fn task(&self, n: usize) -> Result<(&PlanTask, &PlanSuite), SlurmError> {
        let task = self.tasks.get(n).ok_or_else(|| {
            SlurmError::Invalid(format!(
                "task {n} is not in the plan file, which has tasks 0 to {}",
                self.tasks.len().saturating_sub(1)
            ))
        })?;
        let suite = self.suites.get(task.suite).ok_or_else(|| {
            SlurmError::Invalid(format!("task {n} names spec {}, which the plan file lacks", task.suite))
        })?;
        Ok((task, suite))
    }

    /// Where task `n`'s result goes (as a local run would write it).
    pub fn result_path(&self, task: &PlanTask) -> PathBuf {
        let name = self.suites.get(task.suite).map_or("", |s| s.spec_name.as_str());
        result_path(&self.out, name, &task.plan.id)
    }
}

#[cfg(test)]
mod tests {
    use trainbench_comm::{DataParallel, Topology};
    use trainbench_contract::RunPlan;

    use super::*;

    fn plan(
        nodes: usize,
        world: usize,
        strategy: DataParallel,
        device: DeviceSelector,
        timeout_s: Option<f64>,
    ) -> RunPlan {
        let mut p = RunPlan::for_tests("r", 8);
        p.topology = Topology { nodes, devices_per_node: world / nodes, ..Topology::on_one_node(strategy, world) };
        p.device = device;
        p.timeout_s = timeout_s;
        p
    }

    #[test]
    fn one_process_unless_a_real_backend_runs_ranks() {
        let p = plan(1, 1, DataParallel::Single, DeviceSelector::Cpu, None);
        let r = Resources::of(&p, BackendKind::Tch);
        assert_eq!((r.ntasks, r.nodes, r.gpus_per_node, r.minutes), (1, 1, 0, None));
        let p = plan(2, 4, DataParallel::AllReduce, DeviceSelector::Cpu, Some(60.0));
        // The mock simulates the topology in one process, as locally.
        assert_eq!(Resources::of(&p, BackendKind::Mock).ntasks, 1);
        let r = Resources::of(&p, BackendKind::Tch);
        assert_eq!((r.ntasks, r.nodes, r.gpus_per_node, r.minutes), (4, 2, 0, Some(4)));
    }

    #[test]
    fn servers_are_ranks_and_cuda_asks_for_gpus() {
        let p = plan(2, 4, DataParallel::ParameterServer { servers: 2 }, DeviceSelector::Cuda(None), None);
        let r = Resources::of(&p, BackendKind::Tch);
        assert_eq!((r.ntasks, r.nodes, r.gpus_per_node), (6, 2, 2));
        let p = plan(1, 1, DataParallel::Single, DeviceSelector::Cuda(Some(0)), Some(0.5));
        let r = Resources::of(&p, BackendKind::Tch);
        assert_eq!((r.ntasks, r.gpus_per_node, r.minutes), (1, 1, Some(4)));
    }
}
