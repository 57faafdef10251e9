//! A pipeline-parallel run in the tch backend (what it refuses is the contract's
//! `lowering::pipeline::pipeline_refusal`): the model cut into chunks by
//! FLOPs (`cut_stages`), this rank's schedule ([`trainbench_comm::schedule`]), the shared training loop over
//! its steps, and what it measured: idle time per step (the bubble), bytes sent, memory held, and (on rank 0)
//! the digest of the whole model's weights and the routing of its mixture-of-experts layers gathered from every
//! stage.
//!
//! Each rank generates the same synthetic global batch of `batch_size` samples a one-rank run trains on, cut
//! into `microbatches` micro-batches; each micro-batch's loss is divided by their count, so the gradients
//! accumulated over a step are those of the global batch's mean loss. The step's loss (the last stage's, and
//! each stage's load-balancing losses of its mixture-of-experts layers, which that stage trains from) and the
//! ranks' wishes to stop are summed over the pipeline in one all-reduce at the end of every step.
//!
//! With tensor parallelism (a pipeline of tensor groups) the cut is made on the whole graph and each rank
//! lowers its chunks from its tensor group's local graph: its stage's layers split over the group, the
//! gradients each rank holds only its share of summed over the group after the backward passes, its tensor
//! traffic per step measured, and the digest taken over the gathered whole weights.

use std::time::Instant;

use tch::{Device, TchError};
use trainbench_comm::schedule::{peak_in_flight, stage_actions, stage_steps};
use trainbench_comm::{Communicator, ExpertGroups};
use trainbench_contract::routing::{LayerRouting, RoutingTally};
use trainbench_contract::steady_loop::{EndWish, LoopSettings, SteadyLoop, SteadyStep, StepOutcome};
use trainbench_contract::{
    BackendError, GradientSquares, MemoryMeasured, PhaseTimes, PipelineMeasured, Probe, RawMeasurements, RunPlan,
};
use trainbench_graph::graph::{Graph, Op};

use crate::autograd::CpuMemory;
use crate::diff_op::GroupTraffic;
use crate::expert_state::ExpertState;
use crate::lower::DataPool;
use crate::optim::Optim;
use crate::pipeline::{StageRank, StepFigures};
use crate::tensor_parallel::TensorParallel;

fn map(e: TchError, batch: usize) -> BackendError {
    crate::error::map_error(e, batch)
}

/// Train `plan` as pipeline rank `comm.rank()` of `comm.size()` (`comms.0`, its replica's stages of its tensor
/// index), its gradients averaged over `comms.1` (the same stage of every replica) when there are several
/// replicas, its chunks split over its tensor group (`tensor`) with tensor parallelism, reporting each step to
/// `probe`.
pub fn run<'c>(
    plan: &RunPlan,
    graph: &Graph,
    device: Device,
    comms: (&'c mut dyn Communicator, Option<&'c mut dyn Communicator>),
    tensor: Option<TensorParallel>,
    probe: &mut dyn Probe,
) -> Result<RawMeasurements, BackendError> {
    let (comm, mut data) = comms;
    let batch = plan.batch_size;
    let refuse = |reason: String| BackendError::Unsupported {
        backend: "tch",
        layer: graph.name.clone(),
        op: "pipeline_parallel".into(),
        reason,
    };
    if let Some(why) = trainbench_contract::lowering::pipeline::pipeline_refusal(plan) {
        return Err(refuse(why));
    }
    let mesh = plan.topology.mesh;
    let (p, m) = (mesh.pipeline_parallel, mesh.microbatches.max(1));
    let v = mesh.chunks_per_rank();
    if comm.size() != p {
        return Err(refuse(format!("the pipeline has {} ranks, the plan {p} stages", comm.size())));
    }
    let dp = plan.topology.data_parallel();
    let replica = match &data {
        Some(d) if d.size() == dp => d.rank(),
        None if dp == 1 => 0,
        _ => return Err(refuse(format!("the plan has {dp} data-parallel replicas, the ranks another number"))),
    };
    let stage = comm.rank();
    // Expert parallelism along the data dimension: its groups split from this stage's replicas.
    let ep = mesh.expert_parallel.max(1);
    let expert = match data.as_deref_mut() {
        Some(d) if ep > 1 => Some(ExpertGroups::split(d, ep).map_err(|e| refuse(e.to_string()))?),
        None if ep > 1 => return Err(refuse(format!("expert_parallel {ep} needs {ep} data-parallel replicas"))),
        _ => None,
    };
    let analysis = trainbench_graph::analysis::analyze(graph);
    let cut = trainbench_graph::stages::cut_stages(graph, &analysis, p, v, plan.given_cut())
        .map_err(|e| refuse(e.to_string()))?;
    let starts: Vec<usize> = cut.iter().map(|c| c.nodes.start).chain([graph.nodes.len()]).collect();
    let ranges: Vec<(usize, std::ops::Range<usize>)> =
        (0..cut.len()).filter(|c| c % p == stage).map(|c| (c, starts[c]..starts[c + 1])).collect();
    let actions = stage_actions(mesh.pipeline_schedule, p, stage, m, v).map_err(|e| refuse(e.to_string()))?;
    let steps = stage_steps(&actions, p, p * v);
    tch::manual_seed(plan.seed as i64);
    // A rank of a tensor group lowers its chunks from its local graph (the same nodes, its widths).
    let local = tensor.as_ref().map(|tp| tp.local().clone());
    let graph = local.as_ref().unwrap_or(graph);
    let (rank, opt, expert) = build(plan, graph, device, ranges.clone(), (p * v, m), (replica, dp), (tensor, expert))
        .map_err(|e| map(e, batch))?;
    let cpu_memory = CpuMemory::track().map_err(|e| map(e, batch))?;
    // A stage idles by design: its waits leave the core to the stages it waits for.
    comm.wait_politely(true);
    if let Some(d) = data.as_deref_mut() {
        d.wait_politely(true);
    }
    let settings = LoopSettings { distributed: true, ..LoopSettings::of(plan) };
    let mut steady = SteadyLoop::new(plan, settings, false, None)?;
    let mut out = RawMeasurements::default();
    let mut steps_run = PipelineSteps {
        rank,
        opt,
        comm,
        data,
        host: Vec::new(),
        steps,
        microbatches: m,
        routed: Vec::new(),
        expert,
        grad_bytes: 0,
        sums: Sums::default(),
        traffic_from: GroupTraffic::default(),
        gradient_squares: None,
    };
    let end = steady.run(&mut steps_run, probe, &mut out);
    // Counting ends before the tensors allocated before it are freed.
    drop(cpu_memory);
    let PipelineSteps {
        rank, opt, comm, data, sums, grad_bytes, traffic_from, gradient_squares, routed, expert, ..
    } = steps_run;
    comm.wait_politely(false);
    if let Some(d) = data {
        d.wait_politely(false);
    }
    if end?.in_warmup {
        return Ok(out);
    }
    let n = sums.steps.max(1) as f64;
    out.memory = MemoryMeasured {
        weights: rank.model.weight_bytes(),
        gradients: grad_bytes,
        optimizer_state: opt.state_bytes().unwrap_or_else(|| plan.optimizer.state_buffers() * opt.param_bytes()),
        peak_allocated: None,
        reserved: None,
        activations: Some(sums.activations_peak),
    };
    out.pipeline = Some(PipelineMeasured {
        stage,
        chunks: ranges.iter().map(|(c, _)| *c).collect(),
        idle_s: sums.idle_s / n,
        step_s: sums.total_s / n,
        bytes_sent_per_step: sums.bytes_sent / sums.steps.max(1),
        microbatches_held: peak_in_flight(&actions),
        data_bytes_per_step: trainbench_comm::ExchangeStats::ring_bytes_per_step(
            4 * sums.data_values.checked_div(sums.steps).unwrap_or(0),
            dp,
        ),
    });
    if let Some(tp) = rank.model.tensor_parallel() {
        out.tensor_traffic = Some(tp.traffic_per_step(traffic_from, sums.steps));
    }
    out.gradient_squares = gradient_squares;
    out.expert = expert.as_ref().map(ExpertState::traffic);
    let whole = whole_model(comm, &ranges, (&rank, expert.as_ref()), opt.params(), graph).map_err(|e| map(e, batch))?;
    if let Some((digest, norms)) = whole {
        out.weights_digest = Some(digest);
        out.weight_norms = Some(norms);
    }
    if graph.nodes.iter().any(|n| matches!(n.op, Op::Moe { .. })) {
        out.routing = whole_routing(comm, &routed, graph).map_err(|e| map(e, batch))?;
    }
    Ok(out)
}

/// The routing of every stage's mixture-of-experts layers, on rank 0 (`None` elsewhere): each rank sends its
/// measured steps' layers; rank 0 joins each step's layers of every stage in model order and tallies them.
fn whole_routing(
    comm: &mut dyn Communicator,
    routed: &[Vec<LayerRouting>],
    graph: &Graph,
) -> Result<Option<RoutingTally>, TchError> {
    let fail = |what: String| TchError::Kind(format!("pipeline: gathering the routing: {what}"));
    let bytes = serde_json::to_vec(routed).map_err(|e| fail(e.to_string()))?;
    let Some(all) = comm.gather_bytes(0, &bytes).map_err(|e| fail(e.to_string()))? else { return Ok(None) };
    let stages: Vec<Vec<Vec<LayerRouting>>> =
        all.iter().map(|b| serde_json::from_slice(b).map_err(|e| fail(e.to_string()))).collect::<Result<_, _>>()?;
    let position = |layer: &str| graph.nodes.iter().position(|n| n.name == layer).unwrap_or(usize::MAX);
    let mut tally = RoutingTally::new();
    for step in 0..stages.iter().map(Vec::len).max().unwrap_or(0) {
        let mut layers: Vec<LayerRouting> = stages.iter().filter_map(|s| s.get(step)).flatten().cloned().collect();
        layers.sort_by_key(|l| position(&l.layer));
        tally.record_step(&layers);
    }
    Ok(tally.into_recorded())
}

/// This rank's chunks (`ranges`, of `chunks` in all; its share of them over `tensor`, its experts' shard over
/// `expert`'s groups) built with the synthetic batches of `plan` cut into `m` micro-batches, and the optimizer
/// over their parameters.
fn build<'g>(
    plan: &RunPlan,
    graph: &'g Graph,
    device: Device,
    ranges: Vec<(usize, std::ops::Range<usize>)>,
    (chunks, m): (usize, usize),
    replicas: (usize, usize),
    (tensor, expert): (Option<TensorParallel>, Option<ExpertGroups>),
) -> Result<(StageRank<'g>, Optim, Option<ExpertState>), TchError> {
    // Every replica generates the same global micro-batches and keeps its share of each.
    let micro_size = plan.batch_size / m / replicas.1.max(1);
    let count = DataPool::steps_for(graph, plan.batch_size / m, m, replicas.1);
    let pool = DataPool::new_micro(graph, plan.batch_size / m, m, replicas, plan.seed, count, device)?;
    let mut rank = StageRank::new(graph, device, plan.seed, ranges, chunks, (m, micro_size), pool, tensor)?;
    let expert = expert.map(|g| ExpertState::shard(g, &mut rank.model, graph)).transpose()?;
    let opt = Optim::new(&plan.optimizer, rank.model.parameters(graph, |_| true), device)?;
    Ok((rank, opt, expert))
}

/// The measured steps' figures, summed.
#[derive(Debug, Default)]
struct Sums {
    steps: u64,
    idle_s: f64,
    total_s: f64,
    bytes_sent: u64,
    activations_peak: u64,
    /// Gradient values averaged over the replicas.
    data_values: u64,
}

/// The shared loop's view of a pipeline rank.
struct PipelineSteps<'g, 'c> {
    rank: StageRank<'g>,
    opt: Optim,
    comm: &'c mut dyn Communicator,
    /// The same stage of the other replicas (`None` with one replica).
    data: Option<&'c mut dyn Communicator>,
    /// Staged gradients for their average over the replicas.
    host: Vec<f32>,
    steps: Vec<trainbench_comm::schedule::Step>,
    microbatches: usize,
    /// Each measured step's routing of this rank's mixture-of-experts layers, per layer.
    routed: Vec<Vec<LayerRouting>>,
    /// Expert parallelism over this stage's replicas: its groups and this rank's experts' shard.
    expert: Option<ExpertState>,
    /// Gradient bytes held at the end of a step's backward passes (measured once).
    grad_bytes: u64,
    sums: Sums,
    /// The tensor group's traffic when measuring began.
    traffic_from: GroupTraffic,
    /// The measured steps' gradient squares, as this rank owns them.
    gradient_squares: Option<GradientSquares>,
}

impl SteadyStep for PipelineSteps<'_, '_> {
    type Error = BackendError;

    fn step(&mut self, index: u64, measured: bool, wish: EndWish) -> Result<StepOutcome, BackendError> {
        let replicas = self.data.as_ref().map_or(1, |d| d.size());
        let batch = self.rank.micro_size * self.microbatches * replicas;
        let start = Instant::now();
        let installed = self.expert.as_ref().map(|e| crate::expert_parallel::install(e.parallel().clone()));
        let f: StepFigures = self.rank.run_steps(&self.steps, &mut *self.comm, index).map_err(|e| map(e, batch))?;
        drop(installed);
        if let Some(e) = self.expert.as_mut() {
            e.reduce_gradients().map_err(|e| map(e, batch))?;
        }
        let records = std::mem::take(&mut self.rank.routing);
        if measured && !records.is_empty() {
            self.routed.push(crate::moe_stats::per_layer(records, &self.rank.graph.nodes));
        }
        // Gradients each rank of a tensor group holds only its share of, summed over the group.
        if let Some(tp) = self.rank.model.tensor_parallel().filter(|tp| tp.has_partial_grads()) {
            tp.reduce_partial_grads(self.opt.params()).map_err(|e| map(e, batch))?;
        }
        if self.grad_bytes == 0 {
            self.grad_bytes = self.opt.grad_bytes();
        }
        let exchanged = Instant::now();
        let mut data_values = 0;
        if let Some(d) = self.data.as_deref_mut() {
            // With expert parallelism the experts' are summed over their replicas above; the rest averaged here.
            let dense = self.expert.as_ref().map_or(self.opt.params(), |e| e.dense.as_slice());
            average_gradients(d, dense, &mut self.host).map_err(|e| map(e, batch))?;
            data_values = self.host.len() as u64;
        }
        let exchange_s = exchanged.elapsed().as_secs_f64();
        if measured {
            // This stage's gradient, averaged over its replicas: each replica's counts for its share.
            let squares = match &self.expert {
                Some(e) => e.gradient_squares(1.0),
                None => {
                    let weight = crate::norms::owned_share(self.rank.model.tensor_parallel(), replicas);
                    crate::norms::squares(self.opt.params(), &weight, 1.0)
                }
            }
            .map_err(|e| map(e, batch))?;
            GradientSquares::record(&mut self.gradient_squares, squares);
        }
        let before_opt = Instant::now();
        self.opt.step(None).map_err(|e| map(e, batch))?;
        let optimizer_s = before_opt.elapsed().as_secs_f64();
        // The ranks' wishes and the last stage's loss, summed over the pipeline: every rank ends together.
        let flags = match wish {
            EndWish::Continue => [0.0, 0.0],
            EndWish::Finished => [1.0, 0.0],
            EndWish::Interrupted => [0.0, 1.0],
        };
        // The last stage's loss, and every stage's load-balancing losses (mixture-of-experts layers).
        let loss = (f.loss_sum / self.microbatches as f64) as f32;
        let mut agreed = [0f32; 3];
        let waited = Instant::now();
        let agree_error = |e| BackendError::Framework(format!("pipeline: the end of step {index}: {e}"));
        self.comm.all_reduce_sum(&[flags[0], flags[1], loss], &mut agreed).map_err(agree_error)?;
        if let Some(d) = self.data.as_deref_mut() {
            // Over the replicas: any wish to stop, and the mean of their losses.
            let mine = agreed;
            d.all_reduce_sum(&mine, &mut agreed).map_err(agree_error)?;
            agreed[2] /= replicas as f32;
        }
        let idle_s = f.idle_s + waited.elapsed().as_secs_f64();
        let total_s = start.elapsed().as_secs_f64();
        if measured {
            let s = &mut self.sums;
            s.steps += 1;
            s.idle_s += idle_s;
            s.total_s += total_s;
            s.bytes_sent += f.bytes_sent;
            s.activations_peak = s.activations_peak.max(f.activations_peak);
            s.data_values += data_values;
        }
        let phases = PhaseTimes {
            forward_s: f.forward_s,
            backward_s: f.backward_s,
            comm_s: idle_s + exchange_s,
            optimizer_s,
            total_s,
            ..PhaseTimes::default()
        };
        let stop = agreed[0] > 0.0 || agreed[1] > 0.0;
        Ok(StepOutcome {
            phases,
            loss: measured.then_some(f64::from(agreed[2])),
            agreed_end: stop.then_some(agreed[1] > 0.0),
        })
    }

    fn measuring(&mut self) -> Result<(), BackendError> {
        self.sums = Sums::default();
        self.routed.clear();
        self.traffic_from = self.rank.model.tensor_parallel().map(TensorParallel::traffic).unwrap_or_default();
        Ok(())
    }
}

/// The gradients of `params` replaced by their mean over the replicas of `data` (staged through `host`).
fn average_gradients(data: &mut dyn Communicator, params: &[tch::Tensor], host: &mut Vec<f32>) -> Result<(), TchError> {
    let total: usize = params.iter().map(tch::Tensor::numel).sum();
    host.resize(total, 0.0);
    crate::dist::stage_grads(params.iter(), host)?;
    let mut summed = vec![0f32; total];
    data.all_reduce_sum(host, &mut summed)
        .map_err(|e| TchError::Kind(format!("pipeline: averaging the gradients over the replicas: {e}")))?;
    let n = data.size() as f32;
    summed.iter_mut().for_each(|g| *g /= n);
    let kept = trainbench_comm::StepExchange { stop: false, interrupted: false, weights_updated: false };
    crate::dist::apply(params, &kept, &summed, &[])
}

/// The digest of the whole model's trained weights and each tensor's norm, on rank 0 (`None` elsewhere): every
/// rank sends its chunks' tensors (gathered whole over its tensor group first), rank 0 puts them in model order
/// (a one-rank run's order).
fn whole_model(
    comm: &mut dyn Communicator,
    ranges: &[(usize, std::ops::Range<usize>)],
    (rank, expert): (&StageRank<'_>, Option<&ExpertState>),
    params: &[tch::Tensor],
    graph: &Graph,
) -> Result<Option<(String, Vec<f64>)>, TchError> {
    // Every rank of a tensor group (and of an expert-parallel group) gathers, in the same order; then each
    // tensor index's stages digest alike.
    let whole: Option<Vec<(usize, tch::Tensor)>> = match (rank.model.tensor_parallel(), expert) {
        (Some(tp), _) => {
            let whole = ExpertState::whole_weights(expert, &rank.model, graph, params)?;
            Some(tp.trained_nodes().zip(whole).collect())
        }
        (None, Some(e)) => Some(e.whole_by_node(&rank.model, graph)?),
        (None, None) => None,
    };
    // Per chunk: its index, its tensors' count and lengths, then their values.
    let mut bytes = Vec::new();
    for (chunk, nodes) in ranges {
        let params: Vec<tch::Tensor> = match &whole {
            Some(w) => w.iter().filter(|(id, _)| nodes.contains(id)).map(|(_, t)| t.shallow_clone()).collect(),
            None => rank.model.parameters(graph, |n| graph.nodes[nodes.clone()].iter().any(|o| std::ptr::eq(o, n))),
        };
        bytes.extend((*chunk as u64).to_le_bytes());
        bytes.extend((params.len() as u64).to_le_bytes());
        for p in &params {
            bytes.extend((p.numel() as u64).to_le_bytes());
        }
        for v in crate::dist::flat_values(&params)? {
            bytes.extend(v.to_le_bytes());
        }
    }
    let gathered =
        comm.gather_bytes(0, &bytes).map_err(|e| TchError::Kind(format!("pipeline: gathering the weights: {e}")))?;
    let Some(all) = gathered else { return Ok(None) };
    let truncated = || TchError::Kind("pipeline: a stage sent truncated weights".into());
    // Each chunk's tensors, as (chunk, values of each tensor).
    let mut chunks: Vec<(u64, Vec<Vec<f32>>)> = Vec::new();
    for b in &all {
        let mut at = 0;
        let word = |at: &mut usize| -> Result<u64, TchError> {
            let w = b.get(*at..*at + 8).ok_or_else(truncated)?;
            *at += 8;
            Ok(u64::from_le_bytes(w.try_into().map_err(|_| truncated())?))
        };
        while at < b.len() {
            let (chunk, count) = (word(&mut at)?, word(&mut at)?);
            let lens = (0..count).map(|_| word(&mut at)).collect::<Result<Vec<u64>, _>>()?;
            let mut tensors = Vec::with_capacity(lens.len());
            for len in lens {
                let end = at + 4 * len as usize;
                let values = b.get(at..end).ok_or_else(truncated)?;
                tensors.push(values.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect());
                at = end;
            }
            chunks.push((chunk, tensors));
        }
    }
    chunks.sort_by_key(|(c, _)| *c);
    let tensors: Vec<&[f32]> = chunks.iter().flat_map(|(_, t)| t.iter().map(Vec::as_slice)).collect();
    let norms = tensors.iter().map(|t| t.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>().sqrt()).collect();
    Ok(Some((trainbench_contract::backend::weights_digest(tensors.iter().copied()), norms)))
}
