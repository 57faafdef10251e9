//! A rank of a device mesh ([`MeshGroups`]): its tensor group and data-parallel group split from the world's
//! communicator, its coordinates and its share of the model; a pipelined mesh rank's groups and its run
//! ([`train_pipelined`]); and what rank 0 records of a mesh run (the bytes
//! per dimension and collective, [`mesh_bytes`]; the headline memory, the most any rank held, [`max_memory`];
//! expert parallelism's figures, [`expert_section`]).

use trainbench_comm::{Communicator, DataParallel, MeshCoords, MeshDim};
use trainbench_contract::{
    Backend, BackendError, ExpertTraffic, MemoryMeasured, PipelineGroups, Probe, RawMeasurements, RunContext, RunPlan,
    TensorTraffic,
};
use trainbench_data::BatchSource;
use trainbench_graph::Graph;
use trainbench_graph::tensor_parallel::TensorShard;

use crate::result::distributed::{BytesByKind, ExpertParallelResult, MeshBytes, RankMemory};

/// This rank's groups along a mesh with tensor parallelism.
pub(crate) struct MeshGroups {
    /// Where this rank sits.
    pub(crate) coords: MeshCoords,
    /// Its tensor group (ranks of the same data-parallel index, in tensor order), until the backend takes it.
    pub(crate) tensor: Option<Box<dyn Communicator>>,
    /// Its data-parallel group (ranks of the same tensor index, in data order): the strategy runs along it.
    pub(crate) data: Box<dyn Communicator>,
}

impl MeshGroups {
    /// The groups of this rank of `world` for `plan` and the graph of its share of the model (the tensors its
    /// data-parallel exchange carries); `None` without tensor parallelism. Every rank of the world calls it for
    /// the same plan: the splits are collectives.
    pub(crate) fn split(
        world: &mut dyn Communicator,
        plan: &RunPlan,
        graph: &Graph,
    ) -> Result<Option<(MeshGroups, Graph)>, BackendError> {
        let mesh = plan.topology.mesh;
        if mesh.tensor_parallel <= 1 {
            return Ok(None);
        }
        let fail = |what: &str, e: &dyn std::fmt::Display| BackendError::Framework(format!("device mesh: {what}: {e}"));
        let size = world.size();
        let coords = mesh.coords(world.rank(), size).map_err(|e| fail("placing this rank", &e))?;
        let dp = mesh.data_parallel(size).map_err(|e| fail("placing this rank", &e))?;
        let tensor = world.split(coords.pp * dp + coords.dp, coords.tp).map_err(|e| fail("the tensor group", &e))?;
        let data = world
            .split(coords.pp * mesh.tensor_parallel + coords.tp, coords.dp)
            .map_err(|e| fail("the data-parallel group", &e))?;
        let shard = TensorShard::new(graph, mesh.tensor_parallel, coords.tp, mesh.sequence_parallel)
            .map_err(|e| fail("splitting the model", &e))?;
        Ok(Some((MeshGroups { coords, tensor: Some(tensor), data }, shard.local)))
    }
}

/// Train `plan` as this rank of `world` on a pipelined mesh, returning its measurements and coordinates. Every
/// rank splits the world in the same order: with tensor parallelism its tensor group (same replica and stage,
/// in tensor order), which goes to the backend; then, unless the world is one pipeline, its replica's stages of
/// its tensor index (between which activations travel) and, with several replicas, its stage's replicas of its
/// tensor index (over which gradients are averaged).
pub(crate) fn train_pipelined(
    world: &mut dyn Communicator,
    plan: &RunPlan,
    graph: &Graph,
    backend: &mut dyn Backend,
    (probe, data): (&mut dyn Probe, Option<&mut dyn BatchSource>),
) -> Result<(RawMeasurements, MeshCoords), BackendError> {
    let fail = |what: &str, e: &dyn std::fmt::Display| BackendError::Framework(format!("device mesh: {what}: {e}"));
    let mesh = plan.topology.mesh;
    let (rank, size) = (world.rank(), world.size());
    let at = mesh.coords(rank, size).map_err(|e| fail("placing this rank", &e))?;
    let dp = mesh.data_parallel(size).map_err(|e| fail("placing this rank", &e))?;
    let (t, p) = (mesh.tensor_parallel.max(1), mesh.pipeline_parallel);
    let mut ctx = RunContext::new(&mut *probe);
    // Re-borrowed for this run (shortens the trait object's lifetime to the context's).
    ctx.data = data.map(|d| -> &mut dyn BatchSource { d });
    if t > 1 {
        ctx.tensor = Some(world.split(at.dp * p + at.pp, at.tp).map_err(|e| fail("the tensor group", &e))?);
    }
    if dp == 1 && t == 1 {
        // One replica of whole stages: the group is the pipeline, rank `s` its stage `s`.
        ctx.pipeline = Some(PipelineGroups { stages: world, data: None });
        return Ok((backend.run_in(plan, graph, &mut ctx)?, at));
    }
    let mut stages = world.split(at.dp * t + at.tp, at.pp).map_err(|e| fail("the pipeline's stages", &e))?;
    let mut replicas = match dp {
        1 => None,
        _ => Some(world.split(at.pp * t + at.tp, at.dp).map_err(|e| fail("the stage's replicas", &e))?),
    };
    let data = replicas.as_deref_mut().map(|r| -> &mut dyn Communicator { r });
    ctx.pipeline = Some(PipelineGroups { stages: stages.as_mut(), data });
    Ok((backend.run_in(plan, graph, &mut ctx)?, at))
}

/// The bytes per step along each mesh dimension by collective, the busiest rank's, from each worker's tensor
/// traffic per step and its data-parallel exchange (`by_kind` over `steps` exchanged steps).
pub(crate) fn mesh_bytes(
    workers: impl Iterator<Item = (Option<TensorTraffic>, BytesByKind, u64)>,
    strategy: DataParallel,
) -> Vec<MeshBytes> {
    let mut most = [0u64; 6];
    for (tensor, data, steps) in workers {
        let t = tensor.unwrap_or_default();
        let per = |b: u64| b.checked_div(steps).unwrap_or(0);
        let row = [
            t.all_reduce,
            t.all_gather,
            t.reduce_scatter,
            per(data.all_reduce),
            per(data.all_gather),
            per(data.reduce_scatter),
        ];
        for (m, v) in most.iter_mut().zip(row) {
            *m = (*m).max(v);
        }
    }
    let kinds = ["all-reduce", "all-gather", "reduce-scatter"];
    let mut out = Vec::new();
    for (i, bytes) in most.into_iter().enumerate() {
        let dimension = if i < 3 { MeshDim::Tensor } else { MeshDim::Data };
        if bytes > 0 && !(dimension == MeshDim::Data && strategy.is_single()) {
            out.push(MeshBytes { dimension, collective: kinds[i % 3].to_string(), bytes_per_rank: bytes });
        }
    }
    out
}

/// `rank0`'s memory with weights, gradients, optimizer state and peak replaced by the most any rank held.
pub(crate) fn max_memory(rank0: MemoryMeasured, ranks: impl Iterator<Item = RankMemory>) -> MemoryMeasured {
    let mut m = rank0;
    for r in ranks {
        m.weights = m.weights.max(r.weights);
        m.gradients = m.gradients.max(r.gradients);
        m.optimizer_state = m.optimizer_state.max(r.optimizer_state);
        m.peak_allocated = match (m.peak_allocated, r.peak_allocated) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    m
}

/// The expert-parallel figures of the workers' reports, each `(pipeline stage, traffic, memory)` (stage 0
/// without a pipeline); `None` without expert parallelism. The all-to-all bytes are the mean over a stage's ranks
/// (routing moves bytes between them; their sum it does not change), the busiest stage's; the time the slowest
/// rank's.
pub(crate) fn expert_section(
    workers: &[(usize, Option<ExpertTraffic>, Option<RankMemory>)],
) -> Option<ExpertParallelResult> {
    let first = workers.iter().find_map(|w| w.1)?;
    let per_step = |t: &ExpertTraffic, v: u64| v.checked_div(t.steps).unwrap_or(0);
    let stages = workers.iter().map(|w| w.0).max().unwrap_or(0) + 1;
    let stage_mean = |s: usize| -> u64 {
        let mine: Vec<ExpertTraffic> = workers.iter().filter(|w| w.0 == s).filter_map(|w| w.1).collect();
        let n = mine.len().max(1) as u64;
        mine.iter().map(|t| t.all_to_all_bytes).sum::<u64>() / (n * first.steps.max(1))
    };
    Some(ExpertParallelResult {
        degree: first.degree,
        all_to_all_bytes_per_step: (0..stages).map(stage_mean).max().unwrap_or(0),
        all_to_all_s_per_step: workers
            .iter()
            .filter_map(|w| w.1)
            .map(|t| t.all_to_all_s / t.steps.max(1) as f64)
            .fold(0.0, f64::max),
        all_to_all_calls_per_step: per_step(&first, first.all_to_all_calls),
        expert_gradient_bytes_per_step: per_step(&first, first.expert_gradient_bytes),
        max_rank_state_bytes: workers
            .iter()
            .filter_map(|w| w.2)
            .map(|m| m.weights + m.gradients + m.optimizer_state)
            .max()
            .unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busiest_rank_is_recorded_per_dimension_and_collective() {
        let t = |all_reduce| Some(TensorTraffic { all_reduce, all_gather: 8, reduce_scatter: 0 });
        let data = BytesByKind { all_reduce: 400, ..BytesByKind::default() };
        let rows = mesh_bytes([(t(100), data, 4), (t(120), data, 4)].into_iter(), DataParallel::AllReduce);
        let got: Vec<(MeshDim, &str, u64)> =
            rows.iter().map(|r| (r.dimension, r.collective.as_str(), r.bytes_per_rank)).collect();
        assert_eq!(
            got,
            [
                (MeshDim::Tensor, "all-reduce", 120),
                (MeshDim::Tensor, "all-gather", 8),
                (MeshDim::Data, "all-reduce", 100)
            ]
        );
        let m = max_memory(
            MemoryMeasured { weights: 5, ..MemoryMeasured::default() },
            [RankMemory { weights: 7, gradients: 1, optimizer_state: 2, peak_allocated: None }].into_iter(),
        );
        assert_eq!((m.weights, m.gradients, m.optimizer_state), (7, 1, 2));
    }
}
