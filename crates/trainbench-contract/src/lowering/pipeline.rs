//! What the tch backend's pipeline-parallel runtime refuses of a plan whose mesh has `pipeline_parallel` > 1
//! ([`pipeline_refusal`]), decided from the plan alone (a run on a dataset is refused when the
//! run starts, where the dataset is known). `run` asks it before anything starts; `validate`, `plan` and
//! `predict` accept every mesh (a layout is priced whether or not it runs here).

use trainbench_comm::PipelineSchedule;
use trainbench_graph::Precision;

use crate::plan::RunPlan;

/// Why the tch backend cannot train `plan` as a pipeline (`None`: it can, or the plan has no pipeline): a
/// pipeline runs fp32 on CPU ranks, without activation checkpointing, gradient accumulation, experts or a
/// target, with all-reduce along the data-parallel dimension (tensor parallelism inside each stage allowed), on a
/// batch its micro-batches divide.
pub fn pipeline_refusal(plan: &RunPlan) -> Option<String> {
    let mesh = plan.topology.mesh;
    let (p, m) = (mesh.pipeline_parallel, mesh.microbatches.max(1));
    if p <= 1 {
        return None;
    }
    let not_yet = |what: &str, fix: &str| {
        let fix = if fix.is_empty() { String::new() } else { format!("; {fix}") };
        Some(format!("pipeline-parallel runs do not support {what} yet{fix}"))
    };
    let (t, dp) = (mesh.tensor_parallel.max(1), plan.topology.data_parallel());
    if plan.topology.world_size() != t * p * dp {
        return Some(format!(
            "tensor_parallel {t} x pipeline_parallel {p} does not divide the world of {} ranks",
            plan.topology.world_size()
        ));
    }
    if plan.topology.strategy.is_single() {
        return Some(format!(
            "a pipeline's {} ranks start as a group with `strategy = \"all-reduce\"` (along its data-parallel degree \
             of {dp}), not `single`",
            plan.topology.world_size()
        ));
    }
    if dp > 1 && plan.topology.strategy != trainbench_comm::DataParallel::AllReduce {
        return not_yet(
            &format!(
                "`{}` along the data-parallel dimension (data-parallel degree {dp})",
                plan.topology.strategy.name()
            ),
            "set `topology.strategy = \"all-reduce\"`",
        );
    }
    if plan.device.family() != crate::device::DeviceFamily::Cpu {
        return not_yet(
            &format!("`topology.device = \"{}\"` (pipeline ranks run on CPU ranks over MPI)", plan.device),
            "set `topology.device = \"cpu\"`",
        );
    }
    if plan.precision != Precision::Fp32 {
        let precision = plan.precision.as_str();
        return not_yet(
            &format!("{precision} (`training.precision = \"{precision}\"`; they train in fp32)"),
            "set `training.precision = \"fp32\"`",
        );
    }
    if !plan.schedule.checkpointing.is_none() {
        return not_yet(
            "`training.activation_checkpointing` (each stage keeps its micro-batches' activations)",
            "remove it",
        );
    }
    if plan.schedule.micro_batches() > 1 {
        return not_yet(
            "`training.grad_accumulation` (their micro-batches are `topology.microbatches`)",
            "set `topology.microbatches` instead",
        );
    }
    if plan.target.is_some() {
        return not_yet("a training target", "remove `[training.target]`");
    }
    if plan.batch_size % (m * dp) != 0 {
        return Some(format!(
            "{m} micro-batches over {dp} data-parallel replica(s) do not divide the batch of {}",
            plan.batch_size
        ));
    }
    if mesh.pipeline_schedule == PipelineSchedule::Interleaved1F1B && m % p != 0 {
        return Some(format!("interleaved 1F1B over {p} stages needs a multiple of {p} micro-batches, not {m}"));
    }
    None
}
