//! Rules about expert parallelism (`topology.expert_parallel` and its `sweep.topologies` entries): a
//! mixture-of-experts model, a degree dividing the experts and the data-parallel degree (a pipeline's stages
//! shard their experts over their replicas, a tensor group's ranks over the replicas of their tensor index),
//! all-reduce or a ZeRO stage without overlap, the tch backend. Each refusal names the field, the numbers and a
//! fix. CUDA ranks meet through NCCL, whose groups split like MPI's.

use std::collections::HashSet;

use trainbench_graph::ModelSpec;

use super::finding::Finding;
use super::topology::effective_topologies;
use crate::spec::path::FieldPath;
use crate::spec::wire::{BackendChoice, Strategy, SweepSpec, TopologySpec};

/// Routed experts per MoE layer of `model`; `None` for a model without a mixture of experts.
fn experts_of(model: &ModelSpec) -> Option<usize> {
    match model {
        ModelSpec::Gpt(g) => g.moe.as_ref().map(|m| m.experts),
        ModelSpec::Vit(_)
        | ModelSpec::Resnet(_)
        | ModelSpec::InceptionV3(_)
        | ModelSpec::Seq2seq(_)
        | ModelSpec::Transformer(_)
        | ModelSpec::DeepSpeech2(_)
        | ModelSpec::FasterRcnn(_)
        | ModelSpec::WganGp(_)
        | ModelSpec::A3c(_)
        | ModelSpec::Ncf(_)
        | ModelSpec::Bert(_)
        | ModelSpec::Dlrm(_)
        | ModelSpec::Mlp(_)
        | ModelSpec::Custom(_) => None,
    }
}

/// The largest degree at most `degree` dividing every count; 1 always does.
fn largest_dividing(degree: usize, counts: &[usize]) -> usize {
    (1..=degree).rev().find(|d| counts.iter().all(|c| c % d == 0)).unwrap_or(1)
}

/// Every expert-parallel rule over the spec's topologies (each message once).
pub(super) fn check_expert_parallel(
    out: &mut Vec<Finding>,
    topology: &TopologySpec,
    sweep: &SweepSpec,
    model: Option<&ModelSpec>,
) {
    let mut said: HashSet<String> = HashSet::new();
    let mut push = |out: &mut Vec<Finding>, f: Finding| {
        if said.insert(f.message.clone()) {
            out.push(f);
        }
    };
    for (ti, t) in effective_topologies(topology, sweep).iter().enumerate() {
        let ep = t.mesh.expert_parallel;
        if ep <= 1 {
            continue;
        }
        let in_sweep = sweep.topologies.get(ti).is_some_and(|o| o.expert_parallel.is_some());
        let path = t.field("expert_parallel", in_sweep);
        let world = t.world_size().unwrap_or(0);
        let experts = model.and_then(experts_of);
        match (model, experts) {
            (Some(m), None) => push(
                out,
                Finding::new(
                    path.clone(),
                    format!(
                        "`expert_parallel = {ep}` shards a mixture of experts, and this `{}` model has none",
                        m.family()
                    ),
                )
                .or_at(FieldPath::keys(&["model"]))
                .hint("remove `expert_parallel`, or give the model a `[model.moe]` table"),
            ),
            (_, Some(e)) if e % ep != 0 => push(
                out,
                Finding::new(path.clone(), format!("`expert_parallel = {ep}` does not divide the model's {e} experts"))
                    .or_at(FieldPath::keys(&["model", "moe", "experts"]))
                    .expected(format!("a divisor of {e} that divides the world size {world}"))
                    .hint(format!("use `expert_parallel = {}`", largest_dividing(ep, &[e, world.max(1)]))),
            ),
            _ => {}
        }
        // Experts are sharded over data-parallel ranks: with a pipeline, over each stage's replicas; with a tensor
        // degree, over the replicas of one tensor index.
        let (stages, tensor) = (t.mesh.pipeline_parallel.max(1), t.mesh.tensor_parallel.max(1));
        let replicas = world / (stages * tensor).min(world.max(1));
        if world % ep != 0 || replicas % ep != 0 {
            let mut data = String::new();
            if stages * tensor > 1 {
                let mut over = Vec::new();
                if tensor > 1 {
                    over.push(format!("tensor_parallel {tensor}"));
                }
                if stages > 1 {
                    over.push(format!("{stages} pipeline stages"));
                }
                data = format!(" over {}: {replicas} data-parallel replicas", over.join(" x "));
            }
            push(
                out,
                Finding::new(
                    path.clone(),
                    format!(
                        "`expert_parallel = {ep}` does not divide the world size {world} ({} node(s) x {} device(s) in \
                         `{}`){data}",
                        t.nodes, t.devices_per_node, t.path
                    ),
                )
                .or_at(t.field("devices_per_node", sweep.topologies.get(ti).is_some()))
                .expected(format!("a divisor of {replicas}"))
                .hint(format!(
                    "use `expert_parallel = {}`, or a world size that is a multiple of {}",
                    largest_dividing(ep, &[replicas.max(1), experts.unwrap_or(ep)]),
                    ep * stages * tensor
                )),
            );
        }
        if world > 1
            && !matches!(
                t.strategy,
                Strategy::AllReduce | Strategy::Zero1 | Strategy::Zero2 | Strategy::Zero3 | Strategy::Fsdp
            )
        {
            push(
                out,
                Finding::new(
                    t.field("strategy", sweep.topologies.get(ti).is_some_and(|o| o.strategy.is_some())),
                    format!(
                        "expert parallelism runs beside `all-reduce` or a ZeRO stage (`zero-1`, `zero-2`, `zero-3`), \
                         not `{}`",
                        t.strategy.name()
                    ),
                )
                .or_at(path.clone())
                .hint("set `strategy = \"all-reduce\"` (or `zero-1`, `zero-2`, `zero-3`), or remove `expert_parallel`"),
            );
        }
        if topology.overlap == Some(true) {
            push(
                out,
                Finding::new(
                    FieldPath::keys(&["topology", "overlap"]),
                    "an overlapped exchange calls the engine from a second thread while expert parallelism's \
                     all-to-alls run inside the backward pass on the first (MPI is initialised for one thread at a \
                     time)",
                )
                .or_at(path.clone())
                .hint("remove `overlap` (it defaults to false with expert parallelism) or set `overlap = false`"),
            );
        }
        if matches!(topology.backend, BackendChoice::Wgpu | BackendChoice::Mock) {
            push(
                out,
                Finding::new(
                    FieldPath::keys(&["topology", "backend"]),
                    format!("`expert_parallel = {ep}` is trained by the tch backend only"),
                )
                .or_at(path.clone())
                .hint("set `backend = \"tch\"`, or remove `expert_parallel`"),
            );
        }
    }
}

#[cfg(test)]
#[path = "expert_tests.rs"]
mod tests;
