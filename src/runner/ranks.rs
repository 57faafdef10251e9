//! The rank side of a data-parallel run: this worker process is one rank of a group an engine connects
//! (`trainbench worker --ranks`, started by `mpirun` for MPI or by trainbench's own launcher for NCCL; or
//! `trainbench run` under an external launcher). The engine is chosen from where the plans run ([`Engine`]:
//! CUDA ranks through NCCL, the others through MPI) and opened in [`open_engine`]; nothing else here knows
//! which one it talks to. Workers train with a gradient exchange (`trainbench_comm`),
//! parameter-server ranks serve their shard, and afterwards every rank sends its figures to rank 0, which merges
//! them (per step, the slowest worker's phases) and writes the result.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use trainbench_comm::server::{ServerReport, serve};
use trainbench_comm::{
    AllReduceExchange, CommError, Communicator, DataParallel, ExchangeStats, GradientExchange, PsWorkerExchange,
};
use trainbench_contract::engines::Rendezvous;
use trainbench_contract::steplog::StepLog;
use trainbench_contract::{
    Backend, BackendError, DeviceSelector, PhaseTimes, Probe, RawMeasurements, RunContext, RunPlan,
};
use trainbench_data::BatchSource;
use trainbench_graph::Graph;

use crate::result::distributed::{DistributedResult, RankPhases};
use crate::stats::median;

/// The launcher variables that carry a world size, in the order they are trusted.
const WORLD_SIZE_VARIABLES: &[(&str, &str)] = &[
    ("WORLD_SIZE", "torchrun"),
    ("SLURM_NTASKS", "srun"),
    ("OMPI_COMM_WORLD_SIZE", "mpirun (Open MPI)"),
    ("PMI_SIZE", "mpiexec (MPICH)"),
];

/// The launcher variables that carry this process's rank, in the same order.
const RANK_VARIABLES: &[&str] = &["RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"];

/// This process's rank as its launcher numbered it, when a launcher started it.
pub fn launcher_rank() -> Option<usize> {
    RANK_VARIABLES.iter().find_map(|var| std::env::var(var).ok().and_then(|v| v.trim().parse().ok()))
}

/// Who started this process as a rank, and the world size the launcher promised, from its environment.
pub fn launcher_world() -> Option<(&'static str, usize)> {
    WORLD_SIZE_VARIABLES
        .iter()
        .find_map(|(var, who)| std::env::var(var).ok().and_then(|v| v.trim().parse().ok()).map(|n| (*who, n)))
}

/// The launcher variables that carry this process's rank among the ranks on its machine.
const LOCAL_RANK_VARIABLES: &[&str] = &["LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"];

/// Set by trainbench's own launcher on the ranks it starts (the NCCL path), naming it as the launcher.
pub const OWN_LAUNCHER_VARIABLE: &str = "TRAINBENCH_LAUNCHER";

/// c10d's own bound on a collective, used when the runs have no `run.timeout_s`.
const DEFAULT_COMM_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The engine that connects a group's ranks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Engine {
    /// MPI (`MPI_COMM_WORLD`, feature `mpi`): CPU ranks, and every rank that stages through the host.
    Mpi,
    /// NCCL through the tch backend's c10d shim (feature `tch`): CUDA ranks, one per GPU; local rank `r`
    /// drives CUDA device `first_device + r`.
    Nccl {
        /// The CUDA device of local rank 0 (the plans' device index).
        first_device: usize,
        /// Bound on the rendezvous and on each collective: the runs' timeout plus the hung-worker grace, or
        /// c10d's 30 minutes without one.
        timeout: Duration,
    },
}

impl Engine {
    /// The engine for a group that runs `plans`: NCCL when they run on CUDA, MPI otherwise; plans on CUDA and
    /// elsewhere, or on different CUDA devices, cannot share a group.
    pub fn for_plans<'a>(plans: impl IntoIterator<Item = &'a RunPlan>) -> Result<Engine, String> {
        let mut engine: Option<(Engine, DeviceSelector)> = None;
        let mut timeout = Some(0.0f64);
        for plan in plans {
            timeout = timeout.zip(plan.timeout_s).map(|(a, b)| a.max(b));
            let this = match plan.device {
                DeviceSelector::Cuda(index) => {
                    Engine::Nccl { first_device: index.unwrap_or(0), timeout: DEFAULT_COMM_TIMEOUT }
                }
                _ => Engine::Mpi,
            };
            match engine {
                Some((e, first)) if e != this => {
                    return Err(format!(
                        "run `{}` runs on {}, other runs of the same ranks on {first}: one group of ranks runs on one \
                         kind of device and, on CUDA, from one first device (CUDA ranks through NCCL, the others \
                         through MPI); launch them separately",
                        plan.id, plan.device
                    ));
                }
                _ => engine = Some((this, plan.device)),
            }
        }
        Ok(match engine {
            Some((Engine::Nccl { first_device, .. }, _)) => Engine::Nccl {
                first_device,
                timeout: timeout
                    .filter(|t| *t > 0.0)
                    .map_or(DEFAULT_COMM_TIMEOUT, |t| Duration::from_secs_f64(t) + super::worker::HUNG_GRACE),
            },
            _ => Engine::Mpi,
        })
    }

    /// Name as recorded in results (`mpi`, `nccl`).
    pub fn name(self) -> &'static str {
        match self {
            Engine::Mpi => "mpi",
            Engine::Nccl { .. } => "nccl",
        }
    }
}

/// This process's place in a group of ranks.
pub struct Ranks {
    comm: Box<dyn Communicator>,
    launcher: String,
    host: String,
    engine: Engine,
    /// The CUDA device this rank drives (NCCL).
    cuda_device: Option<usize>,
}

/// Whether trainbench's own launcher started this rank (the NCCL path of `trainbench run`).
fn started_by_trainbench() -> bool {
    std::env::var(OWN_LAUNCHER_VARIABLE).is_ok_and(|v| !v.trim().is_empty())
}

/// This process's rank among those on its machine, as its launcher numbered it (0 without one).
pub fn launcher_local_rank() -> usize {
    LOCAL_RANK_VARIABLES.iter().find_map(|var| std::env::var(var).ok().and_then(|v| v.trim().parse().ok())).unwrap_or(0)
}

/// What each rank sends rank 0 after a run.
#[derive(Debug, Serialize, Deserialize)]
struct RankReport {
    rank: usize,
    host: String,
    /// A worker's measured steps and losses (each the mean over its slice of the global batch), bounded
    /// whatever the run's length; empty for a server.
    steps: StepLog,
    /// A worker's digest of its trained weights.
    weights_digest: Option<String>,
    /// A worker's exchange traffic.
    bytes_sent: u64,
    exchanged_steps: u64,
    /// A server's traffic.
    server: Option<(u64, u64, u64)>,
}

impl Ranks {
    /// Join the group through the engine this build has; refuse a group whose size is not the launcher's (an
    /// MPI program started by another MPI's launcher becomes several worlds of one rank, silently).
    pub fn open(engine: Engine) -> Result<Ranks, String> {
        let Opened { comm, host, cuda_device } = open_engine(engine)?;
        let (launcher, promised) = launcher_world().unwrap_or(("unknown", comm.size()));
        let launcher = if started_by_trainbench() { "trainbench run" } else { launcher };
        if promised != comm.size() {
            let hint = if launcher == "torchrun" {
                "torchrun starts NCCL ranks (CUDA specs); start CPU ranks with `mpirun` or `srun --mpi=pmix`"
            } else {
                "the launcher and the MPI library trainbench was built with do not match (use the `mpirun` of the \
                 same MPI)"
            };
            return Err(format!(
                "{launcher} started {promised} ranks, but the {} engine sees a world of {}: {hint}",
                comm.engine().name,
                comm.size()
            ));
        }
        Ok(Ranks { comm, launcher: launcher.to_string(), host, engine, cuda_device })
    }

    /// Point `plan` at this rank's own device: with NCCL, local rank `r` trains on the `r`-th CUDA device from
    /// the plan's (rank 0's plan is unchanged).
    pub fn place(&self, plan: &mut RunPlan) {
        if let Some(d) = self.cuda_device {
            plan.device = DeviceSelector::Cuda(Some(d));
        }
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// Ranks in the group.
    pub fn size(&self) -> usize {
        self.comm.size()
    }

    /// `bytes` of rank 0 on every rank (the job, which only rank 0 reads).
    pub fn broadcast(&mut self, bytes: &mut Vec<u8>) -> Result<(), CommError> {
        self.comm.broadcast_bytes(0, bytes)
    }

    /// Refuse a plan this group cannot run: its workers and servers must be exactly the group.
    pub fn check_plan(&self, plan: &RunPlan) -> Result<(), String> {
        let engine = Engine::for_plans([plan])?;
        if engine.name() != self.engine.name() {
            return Err(format!(
                "run `{}` on {} needs the {} engine, this group was connected by {}",
                plan.id,
                plan.device,
                engine.name(),
                self.engine.name()
            ));
        }
        let needed = plan.topology.strategy.processes(plan.topology.world_size());
        if plan.topology.strategy.is_single() || needed != self.size() {
            return Err(format!(
                "run `{}` needs {needed} process(es) ({} worker(s) with {}), this group has {}",
                plan.id,
                plan.topology.world_size(),
                plan.topology.strategy.name(),
                self.size()
            ));
        }
        Ok(())
    }

    /// Whether this rank serves parameters for `plan` rather than training.
    pub fn is_server(&self, plan: &RunPlan) -> bool {
        self.rank() >= plan.topology.world_size()
    }

    /// End every rank of the group now (a rank failed mid-run: the others would wait for it forever).
    pub fn abort(&mut self, code: i32) -> ! {
        self.comm.abort(code)
    }

    /// Train `plan` as one worker, then gather every rank's figures on rank 0, which gets the merged
    /// measurements and the distributed section.
    pub fn train(
        &mut self,
        plan: &RunPlan,
        graph: &Graph,
        backend: &mut dyn Backend,
        probe: &mut dyn Probe,
        data: Option<&mut dyn BatchSource>,
    ) -> Result<(RawMeasurements, Option<DistributedResult>), BackendError> {
        let engine_error = |e: CommError| BackendError::Framework(format!("data-parallel exchange: {e}"));
        let (raw, stats) = {
            let mut exchange: Box<dyn GradientExchange + '_> = match plan.topology.strategy {
                DataParallel::ParameterServer { servers } => {
                    Box::new(PsWorkerExchange::new(self.comm.as_mut(), graph, servers).map_err(engine_error)?)
                }
                _ => Box::new(AllReduceExchange::new(self.comm.as_mut(), graph)),
            };
            let mut ctx = RunContext::new(probe);
            // Re-borrowed for this run (shortens the trait object's lifetime to the context's).
            ctx.data = data.map(|d| -> &mut dyn BatchSource { d });
            ctx.exchange = Some(exchange.as_mut());
            let raw = backend.run_in(plan, graph, &mut ctx)?;
            (raw, exchange.stats())
        };
        let report = RankReport {
            rank: self.rank(),
            host: self.host.clone(),
            steps: raw.steps.clone(),
            weights_digest: raw.weights_digest.clone(),
            bytes_sent: stats.bytes_sent,
            exchanged_steps: stats.steps,
            server: None,
        };
        let reports = self.gather(&report).map_err(engine_error)?;
        Ok(match reports {
            Some(all) => {
                let gradient_bytes = 4 * trainbench_comm::Layout::of(graph).total as u64;
                let (merged, section) = self.merge(plan, raw, &all, gradient_bytes);
                (merged, Some(section))
            }
            None => (raw, None),
        })
    }

    /// Serve `plan`'s parameters until the workers stop, then send this rank's figures to rank 0.
    pub fn serve(&mut self, plan: &RunPlan, graph: &Graph) -> Result<ServerReport, CommError> {
        let servers = plan.topology.strategy.servers();
        let served = serve(self.comm.as_mut(), graph, plan.seed, &plan.optimizer, servers)?;
        let report = RankReport {
            rank: self.rank(),
            host: self.host.clone(),
            steps: StepLog::new(),
            weights_digest: None,
            bytes_sent: served.bytes_sent,
            exchanged_steps: served.steps,
            server: Some((served.elements, served.bytes_received, served.bytes_sent)),
        };
        self.gather(&report)?;
        Ok(served)
    }

    fn gather(&mut self, report: &RankReport) -> Result<Option<Vec<RankReport>>, CommError> {
        let bytes = serde_json::to_vec(report).unwrap_or_default();
        let all = self.comm.gather_bytes(0, &bytes)?;
        Ok(all.map(|all| all.iter().filter_map(|b| serde_json::from_slice::<RankReport>(b).ok()).collect()))
    }

    /// Rank 0's measurements with each step replaced by the slowest worker's and each loss by the workers'
    /// mean ([`StepLog::slowest_of`]), and the distributed section.
    fn merge(
        &self,
        plan: &RunPlan,
        mut raw: RawMeasurements,
        all: &[RankReport],
        gradient_bytes: u64,
    ) -> (RawMeasurements, DistributedResult) {
        let workers: Vec<&RankReport> = all.iter().filter(|r| r.server.is_none()).collect();
        let logs: Vec<&StepLog> = workers.iter().map(|r| &r.steps).collect();
        if let Some(merged) = StepLog::slowest_of(&logs) {
            raw.steps = merged;
        }
        let ranks = workers.iter().map(|r| RankPhases { rank: r.rank, mean: mean_phases(&r.steps) }).collect();
        let per_step = |r: &RankReport| r.bytes_sent.checked_div(r.exchanged_steps).unwrap_or(0);
        let bytes_sent_per_step = workers.first().map_or(0, |r| per_step(r));
        let kept: Vec<PhaseTimes> = raw.steps.kept().iter().map(|k| k.phases).collect();
        let comm: Vec<f64> = kept.iter().map(|s| s.comm_s).filter(|&c| c > 0.0).collect();
        let shares: Vec<f64> = kept.iter().filter(|s| s.total_s > 0.0).map(|s| s.comm_s / s.total_s).collect();
        let algorithm = median(&comm).map(|t| gradient_bytes as f64 / t / 1e9);
        let bus = match plan.topology.strategy {
            DataParallel::AllReduce => {
                let w = plan.topology.world_size() as f64;
                algorithm.map(|a| a * 2.0 * (w - 1.0) / w)
            }
            _ => None,
        };
        let section = DistributedResult {
            world_size: plan.topology.world_size(),
            strategy: plan.topology.strategy.name().to_string(),
            parameter_servers: plan.topology.strategy.servers(),
            engine: self.comm.engine().name,
            engine_version: self.comm.engine().version,
            launcher: self.launcher.clone(),
            hosts: all.iter().map(|r| r.host.clone()).collect(),
            ranks,
            gradient_bytes,
            bytes_sent_per_step,
            algorithm_bandwidth_gb_s: algorithm,
            bus_bandwidth_gb_s: bus,
            comm_share: median(&shares),
            weights_digest: raw.weights_digest.clone(),
            weights_identical: raw
                .weights_digest
                .as_ref()
                .map(|d| workers.iter().all(|r| r.weights_digest.as_ref() == Some(d))),
        };
        (raw, section)
    }
}

/// What each worker sends per step for `strategy` (the formulas of the design notes), for tests and checks.
pub fn expected_bytes_sent(strategy: DataParallel, gradient_bytes: u64, workers: usize) -> u64 {
    match strategy {
        DataParallel::AllReduce => ExchangeStats::ring_bytes_per_step(gradient_bytes, workers),
        DataParallel::ParameterServer { .. } => gradient_bytes,
        DataParallel::Single => 0,
    }
}

/// The mean of each phase over every step of a worker's log.
fn mean_phases(steps: &StepLog) -> PhaseTimes {
    let all = steps.steady_from(0).block;
    let n = all.n.max(1) as f64;
    let sum = |f: fn(&PhaseTimes) -> f64| f(&all.sum) / n;
    PhaseTimes {
        data_s: sum(|p| p.data_s),
        stall_s: sum(|p| p.stall_s),
        copy_s: sum(|p| p.copy_s),
        forward_s: sum(|p| p.forward_s),
        backward_s: sum(|p| p.backward_s),
        comm_s: sum(|p| p.comm_s),
        optimizer_s: sum(|p| p.optimizer_s),
        total_s: sum(|p| p.total_s),
    }
}

/// An engine's group, the host this rank runs on and, for NCCL, the CUDA device it drives.
struct Opened {
    comm: Box<dyn Communicator>,
    host: String,
    cuda_device: Option<usize>,
}

/// Join the group through `engine`. A third engine is one more arm here (and a variant of [`Engine`]) that
/// returns its `Communicator`.
fn open_engine(engine: Engine) -> Result<Opened, String> {
    match engine {
        Engine::Mpi => open_mpi(),
        Engine::Nccl { first_device, timeout } => open_nccl(first_device, timeout),
    }
}

/// Why this process cannot open an engine: left out of the build (rebuild with its feature), or this process
/// links no engine at all (only `trainbench-engine` starts ranks).
fn engine_missing(what: &str, feature: &str, built: bool) -> String {
    if built {
        format!("{what} is linked into trainbench-engine, not this process; ranks run `trainbench-engine worker`")
    } else {
        format!("{what}: trainbench was built without feature `{feature}`; rebuild with `--features {feature}`")
    }
}

fn open_mpi() -> Result<Opened, String> {
    let Some(join) = crate::backends::engines().mpi else {
        return Err(engine_missing(
            "data-parallel runs on CPU ranks need the MPI engine",
            "mpi",
            cfg!(feature = "mpi"),
        ) + " (Debian packages libopenmpi-dev openmpi-bin libclang-dev)");
    };
    let joined = join().map_err(|e| e.to_string())?;
    Ok(Opened { comm: joined.comm, host: joined.host, cuda_device: None })
}

/// NCCL's rendezvous from torchrun's variables (`MASTER_ADDR`, `MASTER_PORT`) and the launcher's rank and world.
fn open_nccl(first_device: usize, timeout: Duration) -> Result<Opened, String> {
    let Some(nccl) = crate::backends::engines().nccl else {
        return Err(engine_missing(
            "data-parallel runs on CUDA ranks need the NCCL engine of the tch backend",
            "tch",
            cfg!(feature = "tch"),
        ));
    };
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let (Some(addr), Some(port)) = (var("MASTER_ADDR"), var("MASTER_PORT")) else {
        return Err("CUDA ranks meet through NCCL's TCP store at MASTER_ADDR:MASTER_PORT, which are not set: start \
                    them with `trainbench run` (one node) or `torchrun`, or set both beside the launcher's rank \
                    variables"
            .into());
    };
    let master_port = port.trim().parse::<u16>().map_err(|_| format!("MASTER_PORT `{port}` is not a TCP port"))?;
    let (Some(rank), Some((who, world))) = (launcher_rank(), launcher_world()) else {
        return Err("CUDA ranks take their rank and world size from the launcher (RANK and WORLD_SIZE, or Slurm's or \
                    MPI's variables), which are not set"
            .into());
    };
    let who = if started_by_trainbench() { "trainbench run" } else { who };
    let device = first_device + launcher_local_rank();
    let at = Rendezvous { master_addr: addr.trim().to_string(), master_port, rank, world, device, timeout };
    let comm = (nccl.open)(&at).map_err(|e| format!("rank {rank} of {world} ({who}): {e}"))?;
    Ok(Opened { comm, host: host_name(), cuda_device: Some(device) })
}

/// This machine's host name (the kernel's), for the result's list of hosts.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::unwrap_used)]
    fn plan(device: DeviceSelector, timeout_s: Option<f64>) -> RunPlan {
        let mut p = RunPlan::for_tests("p", 2);
        p.device = device;
        p.timeout_s = timeout_s;
        p
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn the_comm_share_and_bandwidth_are_medians_of_the_steps() {
        let comm = trainbench_comm::local::ThreadComm::group(1).pop().unwrap();
        let ranks = Ranks {
            comm: Box::new(comm),
            launcher: "test".into(),
            host: "h".into(),
            engine: Engine::Mpi,
            cuda_device: None,
        };
        let mut plan = plan(DeviceSelector::Cpu, None);
        plan.topology = trainbench_comm::Topology::on_one_node(DataParallel::AllReduce, 2);
        let step = |comm_s: f64| PhaseTimes { comm_s, total_s: 1.0, ..Default::default() };
        let steps = StepLog::of([0.4, 0.1, 0.2, 0.3].map(|c| (step(c), None)));
        let raw = RawMeasurements { steps, ..Default::default() };
        let (_, section) = ranks.merge(&plan, raw, &[], 1_000_000_000);
        // Four steps: the median is the mean of the two middle values, not the upper one.
        let share = section.comm_share.unwrap();
        assert!((share - 0.25).abs() < 1e-12, "{share}");
        let algorithm = section.algorithm_bandwidth_gb_s.unwrap();
        assert!((algorithm - 4.0).abs() < 1e-9, "1 GB in 0.25 s: {algorithm}");
    }

    #[test]
    fn cuda_plans_take_nccl_and_the_others_mpi() {
        assert_eq!(Engine::for_plans([&plan(DeviceSelector::Cpu, None)]), Ok(Engine::Mpi));
        assert_eq!(
            Engine::for_plans([&plan(DeviceSelector::Cuda(Some(1)), None)]),
            Ok(Engine::Nccl { first_device: 1, timeout: DEFAULT_COMM_TIMEOUT })
        );
        let mixed = Engine::for_plans([&plan(DeviceSelector::Cuda(None), None), &plan(DeviceSelector::Cpu, None)]);
        assert!(mixed.is_err_and(|e| e.contains("one kind of device")));
    }

    #[test]
    fn the_nccl_timeout_is_the_runs_timeout_plus_the_grace() {
        let plans = [plan(DeviceSelector::Cuda(None), Some(30.0)), plan(DeviceSelector::Cuda(None), Some(90.0))];
        assert_eq!(
            Engine::for_plans(&plans),
            Ok(Engine::Nccl { first_device: 0, timeout: Duration::from_secs(90) + super::super::worker::HUNG_GRACE })
        );
        let one_without = [plan(DeviceSelector::Cuda(None), Some(30.0)), plan(DeviceSelector::Cuda(None), None)];
        assert_eq!(
            Engine::for_plans(&one_without),
            Ok(Engine::Nccl { first_device: 0, timeout: DEFAULT_COMM_TIMEOUT })
        );
    }
}
