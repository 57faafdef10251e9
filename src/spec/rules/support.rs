//! The plan-time backend check: the runs a validated spec expands to are put to the backend that will run
//! them ([`crate::backend_registry::refusals`], which asks [`trainbench_contract::Backend::supports`]: the backend's
//! declared capabilities, this host's CPU features, then its lowering), so a layer, loss or precision the
//! backend cannot execute here is refused when the spec is validated or planned, with a message naming the
//! layer and the backend, never in the middle of a run.

use super::finding::Finding;
use trainbench_graph::tensor_parallel::TensorShard;

use crate::backend_registry;
use crate::plan::{PlacementOverride, placement, plan_on, unrunnable_plan};
use crate::spec::path::FieldPath;
use crate::spec::validated::ValidatedSpec;

/// What the spec's backend (`auto` resolved by [`placement`], as for the suite that runs it) refuses of the
/// spec's runs.
pub fn check_support(spec: &ValidatedSpec) -> Vec<Finding> {
    check_support_on(spec, PlacementOverride::default())
}

/// What the backend the spec runs on with the command line's `--backend` / `--device` would refuse of its runs.
pub fn check_support_on(spec: &ValidatedSpec, over: PlacementOverride) -> Vec<Finding> {
    let placed = placement(spec, over);
    let name = placed.backend.name();
    backend_registry::refusals(placed.backend, &plan_on(spec, placed), spec.graph())
        .into_iter()
        .map(|e| {
            Finding::new(FieldPath::keys(&["topology", "backend"]), e.to_string())
                .or_at(FieldPath::keys(&["model"]))
                .hint(format!(
                    "the {name} backend refuses this before anything runs; choose another backend \
                     (`topology.backend` or `--backend`), or change the model or precision"
                ))
        })
        .collect()
}

/// What stops the spec's runs from starting on this machine (the engine a data-parallel group needs, missing
/// here: [`backend_registry::launch_refusals`]), with `--backend` / `--device` applied. `plan` and `run` refuse these
/// (exit 2); `validate` does not, since the spec itself is sound. [`backend_registry::NeedsEngine`] in a process
/// without the engines when only they can tell.
pub fn check_launch(
    spec: &ValidatedSpec,
    over: PlacementOverride,
) -> Result<Vec<Finding>, backend_registry::NeedsEngine> {
    let placed = placement(spec, over);
    Ok(backend_registry::launch_refusals(placed.backend, &plan_on(spec, placed))?
        .into_iter()
        .map(|why| {
            Finding::new(FieldPath::keys(&["topology", "device"]), why).hint(
                "this machine cannot start these ranks; run the spec where it can, or choose another device \
                 (`topology.device` or `--device`)",
            )
        })
        .collect())
}

/// The runs the spec's backend (with `--backend` / `--device` applied) cannot train: [`unrunnable_plan`] (tensor
/// parallelism outside the tch backend, what a pipeline's runtime refuses, with or without tensor parallelism
/// inside its stages), tensor parallelism over a model whose layers the tensor split does not cover yet, FP8
/// products (`training.float8`: no backend has FP8 kernels); `run` refuses these before anything starts, while
/// `validate`, `analyze`, `predict` and `plan` accept them.
pub fn check_runnable(spec: &ValidatedSpec, over: PlacementOverride) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    let placed = placement(spec, over);
    for plan in plan_on(spec, placed) {
        let mesh = plan.topology.mesh;
        if plan.numerics.float8 && !out.iter().any(|f| f.paths[0] == FieldPath::keys(&["training", "float8"])) {
            out.push(
                Finding::new(
                    FieldPath::keys(&["training", "float8"]),
                    "`training.float8 = true`: no backend of this tool has FP8 kernels yet, so no run can train it",
                )
                .expected("no `training.float8`, or `float8 = false`")
                .hint("remove `training.float8` to measure the bf16 run; `trainbench predict` prices FP8 products"),
            );
        }
        let split = || {
            TensorShard::new(spec.graph(), mesh.tensor_parallel, 0, mesh.sequence_parallel).err().map(|e| {
                format!("{e}: the runtime splits decoder (`gpt`) and ViT blocks today; `predict` prices this layout")
            })
        };
        let why = unrunnable_plan(&plan, placed.backend).or_else(|| (mesh.tensor_parallel > 1).then(split)?);
        if let Some(why) = why
            && !out.iter().any(|f| f.message == why)
        {
            let (key, hint) = if mesh.tensor_parallel > 1 {
                (
                    "tensor_parallel",
                    "`trainbench predict` prices this layout; to measure, change what the message names (tensor \
                     parallelism runs on the tch backend's CPU ranks, alone or inside a pipeline's stages; data \
                     parallelism and ZeRO on every backend)",
                )
            } else {
                (
                    "pipeline_parallel",
                    "`trainbench predict` prices this layout; to measure it, change what the message names, or \
                     run without `pipeline_parallel`",
                )
            };
            out.push(Finding::new(FieldPath::keys(&["topology", key]), why).hint(hint));
        }
    }
    out
}
