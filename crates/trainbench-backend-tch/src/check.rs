//! What the tch backend refuses of a data-parallel run before it starts, with the layer and the reason
//! ([`exchange_for`], [`expert_groups_for`]); and the roles of a WGAN-GP graph's nodes (real input, generator output, critic scores)
//! that its training step needs. The whole check of a plan (device, world size, capabilities) is the backend's
//! own, in `backend.rs`.

use trainbench_comm::{Communicator, GradientExchange};
use trainbench_contract::capability::TCH;
use trainbench_contract::{BackendError, RunPlan};
use trainbench_graph::Precision;
use trainbench_graph::graph::Graph;

use crate::diff_op::Group;
use crate::tensor_parallel::TensorParallel;

pub use trainbench_contract::lowering::tch::{WganRoles, wgan_roles, wgan_roles_if_any};

const BACKEND: &str = TCH.name;

fn unsupported(layer: &str, op: &str, reason: impl Into<String>) -> BackendError {
    BackendError::Unsupported { backend: BACKEND, layer: layer.to_string(), op: op.to_string(), reason: reason.into() }
}

/// The exchange a data-parallel plan trains with, checked against the plan: `None` for a single worker; for
/// more, the exchange the runner set up for exactly this strategy and world size. WGAN-GP's two-optimizer step
/// and fp16 loss scaling with parameter servers (which apply unscaled gradients) are refused.
pub fn exchange_for<'x>(
    plan: &RunPlan,
    graph: &Graph,
    given: Option<&'x mut dyn GradientExchange>,
) -> Result<Option<&'x mut dyn GradientExchange>, BackendError> {
    let refuse = |reason: String| Err(unsupported(&graph.name, "data_parallel", reason));
    if plan.topology.strategy.is_single() {
        return match given {
            None => Ok(None),
            Some(_) => refuse("a single-worker plan was handed a data-parallel exchange".into()),
        };
    }
    let Some(x) = given else {
        return refuse(format!(
            "`{}` with world size {} runs in ranks started by `trainbench run` (CPU ranks through mpirun, CUDA \
             ranks itself) or by a launcher; this process has no ranks",
            plan.topology.strategy.name(),
            plan.topology.world_size()
        ));
    };
    // Along a mesh the strategy runs over the data-parallel ranks only.
    let workers = plan.topology.data_parallel();
    if x.workers() != workers || x.strategy() != plan.topology.strategy {
        return refuse(format!(
            "the plan asks for {} with {} worker(s), the ranks provide {} with {}",
            plan.topology.strategy.name(),
            workers,
            x.strategy().name(),
            x.workers()
        ));
    }
    if wgan_roles_if_any(graph)?.is_some() {
        return refuse("WGAN-GP's critic and generator steps are not data-parallel yet; run it with one worker".into());
    }
    if plan.topology.strategy.servers() > 0 && plan.precision == Precision::Fp16 {
        return refuse(
            "parameter servers apply plain gradients, and fp16 needs loss scaling on the workers; use fp32 or bf16"
                .into(),
        );
    }
    if plan.batch_size % workers != 0 {
        return refuse(format!("the global batch {} does not split evenly over {} workers", plan.batch_size, workers));
    }
    Ok(Some(x))
}

/// This rank's share of a tensor-parallel plan (`tensor_parallel` > 1) over the communicator of its tensor
/// group (`given`, which the runner splits from the mesh; with a pipeline, the group of this rank's stage);
/// `None` for a plan without tensor parallelism. A
/// plan with it but no group, a group of another size, and a model the split does not apply to are refused.
pub fn tensor_parallel_for(
    plan: &RunPlan,
    graph: &Graph,
    given: Option<Box<dyn Communicator>>,
) -> Result<Option<TensorParallel>, BackendError> {
    let mesh = plan.topology.mesh;
    let refuse = |reason: String| Err(unsupported(&graph.name, "tensor_parallel", reason));
    match given {
        None if mesh.tensor_parallel <= 1 => Ok(None),
        None => refuse(format!(
            "tensor_parallel = {} runs in ranks started by `trainbench run` or a launcher, which hand each rank its \
             tensor group; this process has none",
            mesh.tensor_parallel
        )),
        Some(comm) if comm.size() != mesh.tensor_parallel => refuse(format!(
            "the plan asks for a tensor group of {}, the ranks provide one of {}",
            mesh.tensor_parallel,
            comm.size()
        )),
        Some(comm) => {
            let tp = TensorParallel::new(graph, Group::new(comm), mesh.sequence_parallel);
            let tp = match tp {
                Ok(tp) => tp,
                Err(e) => return refuse(e.to_string()),
            };
            // Those gradients are summed over the tensor group at the step's end; ZeRO-3 and an overlapped
            // ZeRO exchange would have sent them during the backward pass already.
            let zero = plan.topology.strategy.zero_stage();
            if tp.has_partial_grads() && (zero == Some(3) || (zero.is_some() && plan.topology.overlap)) {
                return refuse(format!(
                    "with sequence parallelism (or per-head norms) some gradients are summed over the tensor \
                     group after the backward pass, which {} with overlap exchanges during it; use zero-1 or \
                     zero-2 with `overlap = false`, or all-reduce",
                    plan.topology.strategy.name()
                ));
            }
            Ok(Some(tp))
        }
    }
}

/// The expert-parallel groups an expert-parallel plan trains with, checked against the plan: `None` without
/// expert parallelism; with it, the groups the runner split for exactly this degree, beside plain all-reduce
/// (not overlapped) without activation checkpointing.
pub fn expert_groups_for(
    plan: &RunPlan,
    graph: &Graph,
    given: Option<trainbench_comm::ExpertGroups>,
) -> Result<Option<trainbench_comm::ExpertGroups>, BackendError> {
    let refuse = |reason: String| Err(unsupported(&graph.name, "expert_parallel", reason));
    let degree = plan.topology.mesh.expert_parallel;
    if degree <= 1 {
        return match given {
            None => Ok(None),
            Some(_) => refuse("a plan without expert parallelism was handed expert-parallel groups".into()),
        };
    }
    let Some(groups) = given else {
        return refuse(format!(
            "expert_parallel {degree} runs in ranks started by `trainbench run` (CPU ranks through mpirun); this \
             process has no expert-parallel groups"
        ));
    };
    if groups.degree != degree || groups.experts.size() != degree {
        return refuse(format!("the plan asks for expert_parallel {degree}, the ranks provide {}", groups.degree));
    }
    use trainbench_comm::DataParallel::{AllReduce, Zero1, Zero2, Zero3};
    if !matches!(plan.topology.strategy, AllReduce | Zero1 | Zero2 | Zero3) || plan.topology.overlap {
        return refuse(format!(
            "expert parallelism runs beside all-reduce or a ZeRO stage without overlap, not `{}`{}",
            plan.topology.strategy.name(),
            if plan.topology.overlap { " overlapped" } else { "" }
        ));
    }
    // A recomputed block replays its MoE layers' exchanges inside the backward pass: every rank replays the same
    // blocks in the same order, so the all-to-alls meet.
    Ok(Some(groups))
}

/// How this rank's model is split over its peers, as checked above: a tensor group's share
/// ([`tensor_parallel_for`]) or expert-parallel groups ([`expert_groups_for`]); the plan never has both.
pub struct ModelSplit {
    /// This rank's share of a tensor-parallel model.
    pub tensor: Option<TensorParallel>,
    /// The expert-parallel groups.
    pub expert: Option<trainbench_comm::ExpertGroups>,
}
