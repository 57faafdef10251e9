//! The rank group: this process's place in a group of ranks an engine connects ([`Ranks`]). Workers train with
//! a gradient exchange (`trainbench_comm`), parameter-server ranks serve their shard, and afterwards
//! every rank sends its figures to rank 0, which merges them (per step, the slowest worker's phases) into the
//! result's distributed section.

use serde::{Deserialize, Serialize};
use trainbench_comm::server::{ServerReport, serve};
use trainbench_comm::{
    AllReduceExchange, CommError, Communicator, DataParallel, ExchangeStats, ExpertGroups, GradientExchange, Layout,
    MeshCoords, PsWorkerExchange, ShardedExchange,
};
use trainbench_contract::steplog::StepLog;
use trainbench_contract::{
    Backend, BackendError, DeviceSelector, ExpertTraffic, GradientSquares, PhaseTimes, PipelineMeasured, Probe,
    RawMeasurements, RunContext, RunPlan, TensorTraffic,
};
use trainbench_data::BatchSource;
use trainbench_graph::Graph;

use super::launcher::LauncherEnv;
use super::mesh::MeshGroups;
use super::pipeline::{self, StageReport};
use super::transport::{Opened, Transport, TransportError, open_transport};

use crate::result::distributed::{BytesByKind, DistributedResult, PipelineResult, RankMemory, RankPhases};
use crate::runner::plan_run::GroupRun;
use crate::stats::median;

/// This process's place in a group of ranks.
pub struct Ranks {
    comm: Box<dyn Communicator>,
    launcher: String,
    host: String,
    engine: Transport,
    /// The CUDA device this rank drives (NCCL).
    cuda_device: Option<usize>,
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
    /// Of it, by collective.
    #[serde(default)]
    by_kind: BytesByKind,
    /// A worker's memory held.
    #[serde(default)]
    memory: Option<RankMemory>,
    /// Seconds inside its collectives.
    #[serde(default)]
    busy_s: f64,
    /// Steps it exchanged during the backward pass.
    #[serde(default)]
    overlapped_steps: u64,
    /// A server's traffic.
    server: Option<(u64, u64, u64)>,
    /// A pipeline stage's figures and the activations it held at its peak.
    #[serde(default)]
    pipeline: Option<(PipelineMeasured, Option<u64>)>,
    /// A mesh rank's coordinates.
    #[serde(default)]
    coords: Option<MeshCoords>,
    /// A worker's squares of the gradient values it owns, at its first and last measured step.
    #[serde(default)]
    gradient_squares: Option<GradientSquares>,
    /// A tensor-parallel rank's traffic over its tensor group per step.
    #[serde(default)]
    tensor_traffic: Option<TensorTraffic>,
    /// An expert-parallel worker's all-to-alls and expert gradients.
    #[serde(default)]
    expert: Option<ExpertTraffic>,
}

/// Why this process could not join its group of ranks, or the group cannot run a plan.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GroupError {
    /// The engine could not connect this rank (the engine's message).
    #[error("{0}")]
    Join(String),
    /// The launcher promised a world of another size than the engine sees.
    #[error("{launcher} started {promised} ranks, but the {engine} engine sees a world of {seen}: {hint}")]
    WorldMismatch {
        /// The launcher's name.
        launcher: String,
        /// Ranks the launcher started.
        promised: usize,
        /// The engine's name.
        engine: String,
        /// Ranks the engine sees.
        seen: usize,
        /// What to do.
        hint: &'static str,
    },
    /// The plans need a group of another kind (see [`TransportError`]).
    #[error(transparent)]
    Plans(#[from] TransportError),
    /// The plan needs another engine than the one that connected this group.
    #[error("run `{run}` on {device} needs the {needed} engine, this group was connected by {connected}")]
    WrongEngine {
        /// The run.
        run: String,
        /// Its device.
        device: DeviceSelector,
        /// The engine it needs.
        needed: &'static str,
        /// The engine of this group.
        connected: &'static str,
    },
    /// The plan's workers and servers are not exactly this group.
    #[error("run `{run}` needs {needed} process(es) ({workers} worker(s) with {strategy}), this group has {size}")]
    WrongSize {
        /// The run.
        run: String,
        /// Processes it needs.
        needed: usize,
        /// Its workers.
        workers: usize,
        /// Its strategy's name.
        strategy: String,
        /// Ranks in this group.
        size: usize,
    },
}

impl Ranks {
    /// Join the group through the engine this build has; refuse a group whose size is not the launcher's (an
    /// MPI program started by another MPI's launcher becomes several worlds of one rank, silently).
    pub fn open(engine: Transport) -> Result<Ranks, GroupError> {
        let Opened { comm, host, cuda_device } = open_transport(engine).map_err(GroupError::Join)?;
        let env = LauncherEnv::get();
        let launcher = env.launcher_name("unknown");
        let promised = env.world.map_or(comm.size(), |(_, n)| n);
        if promised != comm.size() {
            let hint = if launcher == "torchrun" {
                "torchrun starts NCCL ranks (CUDA specs); start CPU ranks with `mpirun` or `srun --mpi=pmix`"
            } else {
                "the launcher and the MPI library trainbench was built with do not match (use the `mpirun` of the \
                 same MPI)"
            };
            return Err(GroupError::WorldMismatch {
                launcher: launcher.to_string(),
                promised,
                engine: comm.engine().name.to_string(),
                seen: comm.size(),
                hint,
            });
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
    pub fn check_plan(&self, plan: &RunPlan) -> Result<(), GroupError> {
        let engine = Transport::for_plans([plan])?;
        if engine.name() != self.engine.name() {
            return Err(GroupError::WrongEngine {
                run: plan.id.to_string(),
                device: plan.device,
                needed: engine.name(),
                connected: self.engine.name(),
            });
        }
        let needed = plan.topology.processes();
        if plan.topology.strategy.is_single() || needed != self.size() {
            return Err(GroupError::WrongSize {
                run: plan.id.to_string(),
                needed,
                workers: plan.topology.world_size(),
                strategy: plan.topology.strategy.name().to_string(),
                size: self.size(),
            });
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
        // Over a tensor-parallel mesh, this rank's tensor group goes to the backend and the strategy runs along its
        // data group, over the tensors of its share of the model (a pipeline makes its own groups:
        // `mesh::train_pipelined`).
        let pipelined = plan.topology.mesh.pipeline_parallel > 1;
        let (mut split, local) = match pipelined {
            true => (None, None),
            false => match MeshGroups::split(self.comm.as_mut(), plan, graph)? {
                Some((groups, local)) => (Some(groups), Some(local)),
                None => (None, None),
            },
        };
        let graph_here = local.as_ref().unwrap_or(graph);
        let tensor = split.as_mut().and_then(|m| m.tensor.take());
        // Expert parallelism: its groups split from the data-parallel ranks (the world, or with a tensor degree
        // the replicas of this rank's tensor index), every rank in the same order, and the exchange left with the
        // non-expert tensors (a pipeline splits them from each stage's replicas).
        let degree = plan.topology.mesh.expert_parallel;
        let expert = if degree > 1 && !pipelined {
            Some(ExpertGroups::split(data_group(&mut split, &mut self.comm), degree).map_err(engine_error)?)
        } else {
            None
        };
        let layout = if degree > 1 { Layout::without_experts(graph_here) } else { Layout::of(graph_here) };
        let mut pipeline_coords = None;
        let gradient_bytes = 4 * layout.total as u64;
        let (raw, stats) = if pipelined {
            let data = data.map(|d| -> &mut dyn BatchSource { d });
            let (raw, at) = super::mesh::train_pipelined(self.comm.as_mut(), plan, graph, backend, (probe, data))?;
            pipeline_coords = Some(at);
            // The stage's gradient average over its replicas, per step: the data dimension's traffic.
            let data = raw.pipeline.as_ref().map_or(0, |p| p.data_bytes_per_step);
            let stats = ExchangeStats {
                steps: u64::from(data > 0),
                bytes_sent: data,
                all_reduce_bytes: data,
                ..ExchangeStats::default()
            };
            (raw, stats)
        } else {
            let comm = data_group(&mut split, &mut self.comm);
            let mut exchange: Box<dyn GradientExchange + '_> = match plan.topology.strategy {
                DataParallel::ParameterServer { servers } => {
                    Box::new(PsWorkerExchange::new(comm, graph_here, servers).map_err(engine_error)?)
                }
                // Beside expert parallelism ZeRO shards the non-expert tensors only (stage 3: each block's).
                s @ (DataParallel::Zero1 | DataParallel::Zero2 | DataParallel::Zero3) if degree > 1 => Box::new(
                    ShardedExchange::with_layout(
                        comm,
                        (graph_here, layout),
                        s,
                        &plan.optimizer,
                        plan.topology.bucket_bytes,
                    )
                    .map_err(engine_error)?,
                ),
                DataParallel::Zero1 | DataParallel::Zero2 | DataParallel::Zero3 => Box::new(
                    ShardedExchange::new(
                        comm,
                        graph_here,
                        plan.topology.strategy,
                        &plan.optimizer,
                        plan.topology.bucket_bytes,
                    )
                    .map_err(engine_error)?,
                ),
                _ => Box::new(AllReduceExchange::with_layout(comm, layout, plan.topology.bucket_bytes)),
            };
            let mut ctx = RunContext::new(probe);
            // Re-borrowed for this run (shortens the trait object's lifetime to the context's).
            ctx.data = data.map(|d| -> &mut dyn BatchSource { d });
            ctx.exchange = Some(exchange.as_mut());
            ctx.tensor = tensor;
            ctx.expert = expert;
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
            by_kind: BytesByKind {
                all_reduce: stats.all_reduce_bytes,
                reduce_scatter: stats.reduce_scatter_bytes,
                all_gather: stats.all_gather_bytes,
            },
            busy_s: stats.busy_s,
            overlapped_steps: stats.overlapped_steps,
            memory: Some(RankMemory {
                weights: raw.memory.weights,
                gradients: raw.memory.gradients,
                optimizer_state: raw.memory.optimizer_state,
                peak_allocated: raw.memory.peak_allocated,
            }),
            server: None,
            pipeline: raw.pipeline.clone().map(|p| (p, raw.memory.activations)),
            coords: split.as_ref().map(|m| m.coords).or(pipeline_coords),
            tensor_traffic: raw.tensor_traffic,
            expert: raw.expert,
            gradient_squares: raw.gradient_squares,
        };
        let reports = self.gather(&report).map_err(engine_error)?;
        Ok(match reports {
            Some(all) => {
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
            by_kind: BytesByKind::default(),
            memory: None,
            busy_s: 0.0,
            overlapped_steps: 0,
            server: Some((served.elements, served.bytes_received, served.bytes_sent)),
            pipeline: None,
            coords: None,
            tensor_traffic: None,
            expert: None,
            gradient_squares: None,
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
        // Each worker's share of the gradient's squares: their sum is the whole mesh's.
        raw.gradient_squares = GradientSquares::sum(workers.iter().map(|r| r.gradient_squares.as_ref()));
        let ranks = workers
            .iter()
            .map(|r| RankPhases { rank: r.rank, mean: mean_phases(&r.steps), memory: r.memory, coords: r.coords })
            .collect();
        if plan.topology.mesh.splits_model() {
            // The headline memory of a split model is the most any rank held.
            raw.memory = super::mesh::max_memory(raw.memory, workers.iter().filter_map(|r| r.memory));
        }
        let per_step = |r: &RankReport| r.bytes_sent.checked_div(r.exchanged_steps).unwrap_or(0);
        let bytes_sent_per_step = workers.first().map_or(0, |r| per_step(r));
        let bytes_by_kind = workers.first().filter(|r| r.exchanged_steps > 0).map(|r| {
            let per = |b: u64| b / r.exchanged_steps;
            BytesByKind {
                all_reduce: per(r.by_kind.all_reduce),
                reduce_scatter: per(r.by_kind.reduce_scatter),
                all_gather: per(r.by_kind.all_gather),
            }
        });
        let kept: Vec<PhaseTimes> = raw.steps.kept().iter().map(|k| k.phases).collect();
        let comm: Vec<f64> = kept.iter().map(|s| s.comm_s).filter(|&c| c > 0.0).collect();
        let shares: Vec<f64> = kept.iter().filter(|s| s.total_s > 0.0).map(|s| s.comm_s / s.total_s).collect();
        let algorithm = median(&comm).map(|t| gradient_bytes as f64 / t / 1e9);
        let bus = match plan.topology.strategy {
            DataParallel::AllReduce => {
                let w = plan.topology.world_size() as f64;
                algorithm.map(|a| a * 2.0 * (w - 1.0) / w)
            }
            // What each worker's links carried: its reduce-scatters and all-gathers over the exchange time.
            s if s.zero_stage().is_some() => median(&comm).map(|t| bytes_sent_per_step as f64 / t / 1e9),
            _ => None,
        };
        let pipeline = self.pipeline_section(plan, &mut raw, &workers);
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
            bytes_by_kind,
            algorithm_bandwidth_gb_s: algorithm,
            bus_bandwidth_gb_s: bus,
            comm_share: median(&shares),
            overlapped: workers.first().map(|r| r.overlapped_steps > 0),
            comm_total_s: workers
                .first()
                .filter(|r| r.exchanged_steps > 0)
                .map(|r| r.busy_s / r.exchanged_steps as f64),
            weights_digest: raw.weights_digest.clone(),
            // A pipeline's stages hold different weights: each replica's first stage digests its whole model,
            // gathered; with several replicas or tensor indices, theirs must agree.
            weights_identical: raw.weights_digest.as_ref().and_then(|d| match &pipeline {
                None => Some(workers.iter().all(|r| r.weights_digest.as_ref() == Some(d))),
                Some(_) if plan.topology.data_parallel() > 1 || plan.topology.mesh.tensor_parallel > 1 => {
                    Some(workers.iter().filter_map(|r| r.weights_digest.as_ref()).all(|o| o == d))
                }
                Some(_) => None,
            }),
            pipeline,
            mesh_bytes: if plan.topology.mesh.splits_model() {
                super::mesh::mesh_bytes(
                    workers.iter().map(|r| (r.tensor_traffic, r.by_kind, r.exchanged_steps)),
                    plan.topology.strategy,
                )
            } else {
                Vec::new()
            },
            expert_parallel: super::mesh::expert_section(
                &workers
                    .iter()
                    .map(|r| (r.pipeline.as_ref().map_or(0, |p| p.0.stage), r.expert, r.memory))
                    .collect::<Vec<_>>(),
            ),
        };
        (raw, section)
    }

    /// A pipeline's section from its stages' reports, and the headline memory of `raw` made the stage's that
    /// held the most (`None` without a pipeline).
    fn pipeline_section(
        &self,
        plan: &RunPlan,
        raw: &mut RawMeasurements,
        workers: &[&RankReport],
    ) -> Option<PipelineResult> {
        let stages: Vec<StageReport<'_>> = workers
            .iter()
            .filter_map(|r| {
                let (measured, activations) = r.pipeline.as_ref()?;
                Some(StageReport {
                    rank: r.rank,
                    measured,
                    memory: r.memory.unwrap_or_default(),
                    activations: *activations,
                })
            })
            .collect();
        if stages.is_empty() {
            return None;
        }
        let section = pipeline::section(&plan.topology.mesh, &stages);
        if let Some(top) = section.per_stage.iter().find(|s| s.stage == section.max_memory_stage) {
            raw.memory.weights = top.memory.weights;
            raw.memory.gradients = top.memory.gradients;
            raw.memory.optimizer_state = top.memory.optimizer_state;
            raw.memory.activations = top.activations;
        }
        Some(section)
    }
}

impl GroupRun for Ranks {
    fn rank(&self) -> usize {
        Ranks::rank(self)
    }

    fn train(
        &mut self,
        plan: &RunPlan,
        graph: &Graph,
        backend: &mut dyn Backend,
        probe: &mut dyn Probe,
        data: Option<&mut dyn BatchSource>,
    ) -> Result<(RawMeasurements, Option<DistributedResult>), BackendError> {
        Ranks::train(self, plan, graph, backend, probe, data)
    }
}

/// What each worker sends per step for `strategy` (the formulas of the design notes), for tests and checks.
pub fn expected_bytes_sent(strategy: DataParallel, gradient_bytes: u64, workers: usize) -> u64 {
    match strategy {
        DataParallel::AllReduce => ExchangeStats::ring_bytes_per_step(gradient_bytes, workers),
        DataParallel::ParameterServer { .. } => gradient_bytes,
        // A reduce-scatter and an all-gather of the (padded) gradients: what a ring all-reduce sends.
        DataParallel::Zero1 | DataParallel::Zero2 => ExchangeStats::ring_bytes_per_step(gradient_bytes, workers),
        // The all-gather again before each block's backward: half as much again.
        DataParallel::Zero3 => 3 * ExchangeStats::ring_bytes_per_step(gradient_bytes, workers) / 2,
        DataParallel::Single => 0,
    }
}

/// The ranks the data-parallel strategy (and expert parallelism) run along: a tensor mesh's data group, else
/// the world.
fn data_group<'a>(split: &'a mut Option<MeshGroups>, world: &'a mut Box<dyn Communicator>) -> &'a mut dyn Communicator {
    match split {
        Some(m) => m.data.as_mut(),
        None => world.as_mut(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::unwrap_used)]
    fn the_comm_share_and_bandwidth_are_medians_of_the_steps() {
        let comm = trainbench_comm::local::ThreadComm::group(1).pop().unwrap();
        let ranks = Ranks {
            comm: Box::new(comm),
            launcher: "test".into(),
            host: "h".into(),
            engine: Transport::Mpi,
            cuda_device: None,
        };
        let mut plan = RunPlan::for_tests("p", 2);
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
}
