//! Rules about the device mesh (`topology.tensor_parallel`, `pipeline_parallel`, `sequence_parallel`,
//! `pipeline_schedule`, `microbatches`, `virtual_stages`, `pipeline_layers`): degrees that divide the world size
//! and what the model splits (heads, key/value heads, FFN width, vocabulary, blocks, or a given cut of them),
//! micro-batches that divide each
//! data-parallel rank's batch, and every pipeline or sequence knob refused where no topology reads it.

use std::collections::HashSet;

use trainbench_comm::PipelineSchedule;
use trainbench_graph::ModelSpec;
use trainbench_graph::graph::Graph;

use super::finding::Finding;
use super::topology::{EffectiveTopology, effective_topologies};
use crate::spec::path::FieldPath;
use crate::spec::wire::{Strategy, SweepSpec, TopologySpec};

/// What a tensor-parallel degree must divide in a model: `(what, how many)`; `None` for a family whose blocks
/// tensor parallelism does not split (only decoders and ViTs are).
fn tensor_split(model: &ModelSpec) -> Option<Vec<(&'static str, usize)>> {
    match model {
        ModelSpec::Gpt(g) => Some(vec![
            ("query heads", g.heads),
            ("key/value heads", g.kv_heads.unwrap_or(g.heads)),
            ("FFN width", g.ffn.unwrap_or(4 * g.d_model)),
            ("vocabulary", g.vocab),
        ]),
        ModelSpec::Vit(v) => Some(vec![("heads", v.heads), ("MLP width", v.mlp_dim)]),
        ModelSpec::Resnet(_)
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

/// Tokens per sample a sequence-parallel group splits, where the family has a sequence.
fn sequence_length(model: &ModelSpec) -> Option<usize> {
    match model {
        ModelSpec::Gpt(g) => Some(g.seq_len),
        ModelSpec::Vit(v) => Some((v.image_size / v.patch_size.max(1)).pow(2) + 1),
        _ => None,
    }
}

/// The largest degree at most `degree` dividing every count; 1 always does.
fn largest_dividing(degree: usize, counts: &[usize]) -> usize {
    (1..=degree).rev().find(|d| counts.iter().all(|c| c % d == 0)).unwrap_or(1)
}

/// A knob of `[topology]` written although no topology of the spec reads it.
fn unread(out: &mut Vec<Finding>, key: &str, needs: &str, hint: &str) {
    out.push(
        Finding::new(
            FieldPath::keys(&["topology", key]),
            format!("`{key}` is only read {needs}, and this spec has none"),
        )
        .hint(hint.to_string()),
    );
}

/// The mesh rules that need the spec only (the model's blocks are [`check_mesh_graph`]'s).
pub(super) fn check_mesh(
    out: &mut Vec<Finding>,
    topology: &TopologySpec,
    sweep: &SweepSpec,
    model: Option<&ModelSpec>,
) {
    let topologies = effective_topologies(topology, sweep);
    let tensor = topologies.iter().any(|t| t.mesh.tensor_parallel > 1);
    let pipeline = topologies.iter().any(|t| t.mesh.pipeline_parallel > 1);
    if topology.sequence_parallel && !tensor {
        unread(
            out,
            "sequence_parallel",
            "with `tensor_parallel` > 1",
            "set `tensor_parallel`, or remove `sequence_parallel`",
        );
    }
    for key in ["pipeline_schedule", "microbatches", "virtual_stages", "pipeline_layers"] {
        let set = match key {
            "pipeline_schedule" => topology.pipeline_schedule.is_some(),
            "microbatches" => topology.microbatches.is_some(),
            "virtual_stages" => topology.virtual_stages.is_some(),
            _ => topology.pipeline_layers.is_some(),
        };
        if set && !pipeline {
            unread(out, key, "with `pipeline_parallel` > 1", &format!("set `pipeline_parallel`, or remove `{key}`"));
        }
    }
    let interleaved = topology.pipeline_schedule == Some(PipelineSchedule::Interleaved1F1B);
    match topology.virtual_stages {
        Some(v) if v > 1 && !interleaved => out.push(
            Finding::new(
                FieldPath::keys(&["topology", "virtual_stages"]),
                format!("`virtual_stages = {v}` is only read by the `interleaved-1f1b` schedule"),
            )
            .or_at(FieldPath::keys(&["topology", "pipeline_schedule"]))
            .hint("set `pipeline_schedule = \"interleaved-1f1b\"`, or remove `virtual_stages`"),
        ),
        v if interleaved && pipeline && v.unwrap_or(1) < 2 => out.push(
            Finding::new(
                FieldPath::keys(&["topology", "virtual_stages"]),
                format!("`interleaved-1f1b` needs at least 2 virtual stages per rank, found {}", v.unwrap_or(1)),
            )
            .or_at(FieldPath::keys(&["topology", "pipeline_schedule"]))
            .expected("`virtual_stages` of 2 or more")
            .hint("set `virtual_stages = 2`, or use `pipeline_schedule = \"1f1b\"`"),
        ),
        _ => {}
    }
    let mut said: HashSet<String> = HashSet::new();
    for (ti, t) in topologies.iter().enumerate() {
        let mut found = Vec::new();
        check_one(&mut found, t, sweep.topologies.get(ti).is_some(), sweep, model);
        for f in found {
            if said.insert(f.message.clone()) {
                out.push(f);
            }
        }
    }
}

/// The rules for one effective topology: degrees against its world size, its strategy, the batch sizes and
/// the model.
fn check_one(
    out: &mut Vec<Finding>,
    t: &EffectiveTopology,
    in_sweep: bool,
    sweep: &SweepSpec,
    model: Option<&ModelSpec>,
) {
    let (tp, pp) = (t.mesh.tensor_parallel, t.mesh.pipeline_parallel);
    if !t.mesh.splits_model() {
        return;
    }
    let tp_path = t.field("tensor_parallel", in_sweep);
    let pp_path = t.field("pipeline_parallel", in_sweep);
    let degree_path = if tp > 1 { tp_path.clone() } else { pp_path.clone() };
    let Some(world) = t.world_size() else { return };
    let Some(dp) = t.data_parallel() else {
        let fits = largest_dividing(tp, &[world]);
        out.push(
            Finding::new(
                degree_path,
                format!(
                    "tensor_parallel {tp} x pipeline_parallel {pp} = {} ranks per model replica does not divide the \
                     world size {world} ({} node(s) x {} device(s) in `{}`)",
                    tp * pp,
                    t.nodes,
                    t.devices_per_node,
                    t.path
                ),
            )
            .or_at(pp_path)
            .expected(format!("a tensor x pipeline product dividing {world}"))
            .hint(format!("use e.g. `tensor_parallel = {fits}`, or a world size that is a multiple of {}", tp * pp)),
        );
        return;
    };
    if t.strategy == Strategy::ParameterServer {
        out.push(
            Finding::new(
                t.field("strategy", in_sweep),
                format!("`parameter-server` cannot run along a mesh with tensor {tp} x pipeline {pp} ranks"),
            )
            .or_at(degree_path.clone())
            .hint("use `all-reduce` or `zero-1`..`zero-3` for the data-parallel dimension"),
        );
    }
    if tp > 1 && t.devices_per_node % tp != 0 {
        out.push(
            Finding::new(
                tp_path.clone(),
                format!(
                    "a tensor group of {tp} ranks spans machines of {} device(s) each in `{}`: its all-reduces run per \
                     layer over the link between nodes",
                    t.devices_per_node, t.path
                ),
            )
            .hint(format!("use a `tensor_parallel` dividing {}", t.devices_per_node))
            .warning(),
        );
    }
    let m = t.mesh.microbatches;
    if pp > 1 {
        if t.mesh.pipeline_schedule == PipelineSchedule::Interleaved1F1B && m % pp != 0 {
            out.push(
                Finding::new(
                    FieldPath::keys(&["topology", "microbatches"]),
                    format!("`interleaved-1f1b` over {pp} stages needs a multiple of {pp} micro-batches, found {m}"),
                )
                .or_at(pp_path.clone())
                .expected(format!("a multiple of {pp}"))
                .hint(format!("set `microbatches = {}`", m.div_ceil(pp) * pp)),
            );
        }
        let batches = FieldPath::keys(&["sweep", "batch_sizes"]);
        for (bi, &b) in sweep.batch_sizes.iter().enumerate() {
            if b % dp != 0 {
                continue; // the topology rules' finding
            }
            let per_rank = b / dp;
            if per_rank % m != 0 {
                out.push(
                    Finding::new(
                        FieldPath::keys(&["topology", "microbatches"]),
                        format!(
                            "{m} micro-batches do not divide batch size {b} over {dp} data-parallel rank(s) ({per_rank} \
                             samples per rank in `{}`)",
                            t.path
                        ),
                    )
                    .or_at(batches.index(bi))
                    .expected(format!("micro-batches dividing {per_rank}"))
                    .hint(format!(
                        "use `microbatches = {}`, or batch sizes that are multiples of {}",
                        largest_dividing(m, &[per_rank]),
                        dp * m
                    )),
                );
            }
        }
    }
    let Some(model) = model else { return };
    if tp > 1 {
        match tensor_split(model) {
            None => out.push(
                Finding::new(
                    tp_path.clone(),
                    format!("tensor parallelism splits decoder and ViT blocks; a `{}` model has none", model.family()),
                )
                .or_at(FieldPath::keys(&["model", "family"]))
                .hint("remove `tensor_parallel` (data parallelism or `pipeline_parallel` split other models)"),
            ),
            Some(counts) => {
                let bad: Vec<String> =
                    counts.iter().filter(|(_, n)| n % tp != 0).map(|(what, n)| format!("{n} {what}")).collect();
                if !bad.is_empty() {
                    let mut all: Vec<usize> = counts.iter().map(|(_, n)| *n).collect();
                    all.push(world / pp);
                    let fits = largest_dividing(tp, &all);
                    let listed: Vec<String> = counts.iter().map(|(what, n)| format!("{n} {what}")).collect();
                    out.push(
                        Finding::new(
                            tp_path.clone(),
                            format!("`tensor_parallel = {tp}` does not divide the model's {}", bad.join(", ")),
                        )
                        .or_at(FieldPath::keys(&["model"]))
                        .expected(format!("a divisor of each of {}", listed.join(", ")))
                        .hint(format!("use `tensor_parallel = {fits}`, the largest degree up to {tp} dividing them")),
                    );
                }
            }
        }
        if let ModelSpec::Vit(v) = model {
            vit_rules(out, t, tp, v);
        }
        let seq = sequence_length(model);
        if let (true, Some(seq), false) = (t.mesh.sequence_parallel, seq, matches!(model, ModelSpec::Vit(_)))
            && seq % tp != 0
        {
            out.push(
                Finding::new(
                    FieldPath::keys(&["topology", "sequence_parallel"]),
                    format!("sequence parallelism over {tp} ranks splits each sequence, but it has {seq} positions"),
                )
                .or_at(tp_path)
                .expected(format!("a sequence length that is a multiple of {tp}"))
                .hint("remove `sequence_parallel`, or change the sequence length"),
            );
        }
    }
}

/// A ViT over a tensor group: its classifier is split over the classes (the vocabulary-parallel loss), and
/// sequence parallelism cuts its blocks' activations along the sequence of patches and the class token, which
/// the group's size must divide (the stem runs whole on every rank).
fn vit_rules(out: &mut Vec<Finding>, t: &EffectiveTopology, tp: usize, v: &trainbench_graph::model::VitSpec) {
    if v.classes % tp != 0 {
        let up = v.classes.div_ceil(tp) * tp;
        out.push(
            Finding::new(
                FieldPath::keys(&["model", "classes"]),
                format!(
                    "`tensor_parallel = {tp}` splits the classifier's {} classes over its ranks, which does not divide",
                    v.classes
                ),
            )
            .or_at(FieldPath::keys(&["topology", "tensor_parallel"]))
            .expected(format!("a multiple of {tp} classes"))
            .hint(format!(
                "use a multiple of {tp} classes (e.g. `classes = {up}`), or `tensor_parallel = {}`",
                largest_dividing(tp, &[v.classes, v.heads, v.mlp_dim])
            )),
        );
    }
    let side = v.image_size / v.patch_size.max(1);
    let tokens = side * side + 1;
    if t.mesh.sequence_parallel && tokens % tp != 0 {
        out.push(
            Finding::new(
                FieldPath::keys(&["topology", "sequence_parallel"]),
                format!(
                    "sequence parallelism over {tp} ranks splits the ViT's sequence, its {} patches and the class \
                     token ({tokens} positions), which does not divide",
                    side * side
                ),
            )
            .or_at(FieldPath::keys(&["topology", "tensor_parallel"]))
            .expected(format!("(image_size / patch_size)^2 + 1 a multiple of {tp}"))
            .hint("remove `sequence_parallel`, or pick an image and patch size giving an odd number of patches for two ranks (e.g. 12 and 4: 9 patches + 1)"),
        );
    }
}

/// The mesh rules that need the model's graph: pipeline stages are cut between its recomputable blocks, so a
/// model without blocks cannot be pipelined, and the block count must be a multiple of stages x virtual stages
/// unless the cut is given (`pipeline_layers`: one count per chunk, summing to the blocks).
pub fn check_mesh_graph(topology: &TopologySpec, sweep: &SweepSpec, graph: &Graph) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut said: HashSet<usize> = HashSet::new();
    for (ti, t) in effective_topologies(topology, sweep).iter().enumerate() {
        let (pp, v) = (t.mesh.pipeline_parallel, t.mesh.virtual_stages);
        let chunks = pp * v;
        if pp <= 1 || !said.insert(chunks) {
            continue;
        }
        let path = t.field("pipeline_parallel", sweep.topologies.get(ti).is_some());
        let blocks = graph.blocks.len();
        let what = if v > 1 { format!("{pp} stages x {v} virtual stages") } else { format!("{pp} stages") };
        if blocks == 0 {
            out.push(
                Finding::new(
                    path,
                    format!(
                        "`pipeline_parallel = {pp}` cuts a model between its blocks, and `{}` has none",
                        graph.name
                    ),
                )
                .or_at(FieldPath::keys(&["model"]))
                .hint("remove `pipeline_parallel`; pipelines cut decoders, ViTs and the other block-structured models"),
            );
        } else if let Some(given) = &topology.pipeline_layers {
            if let Some(f) = given_cut_finding(given, chunks, blocks, &what) {
                out.push(f.or_at(path));
            }
        } else if blocks % chunks != 0 {
            out.push(
                Finding::new(path, format!("{what} = {chunks} chunks do not divide the model's {blocks} layers"))
                    .or_at(FieldPath::keys(&["model"]))
                    .expected(format!("a number of chunks dividing {blocks}"))
                    .hint(format!(
                        "use `pipeline_parallel = {}`{}, or give the cut: `pipeline_layers = {:?}`",
                        (1..=pp).rev().find(|p| blocks % (p * v) == 0).unwrap_or(1),
                        if v > 1 { " or fewer virtual stages" } else { "" },
                        even_cut(blocks, chunks)
                    )),
            );
        }
    }
    out
}

/// What is wrong with a given cut (`topology.pipeline_layers`) of `blocks` blocks into `chunks` chunks (`what`
/// names the chunks), if anything: one entry per chunk, each at least 1, summing to the blocks.
fn given_cut_finding(given: &[usize], chunks: usize, blocks: usize, what: &str) -> Option<Finding> {
    let at = FieldPath::keys(&["topology", "pipeline_layers"]);
    let fix =
        format!("`pipeline_layers = {:?}`, or remove it to balance the blocks by FLOPs", even_cut(blocks, chunks));
    let sum: usize = given.iter().sum();
    let message = if given.len() != chunks {
        format!("`pipeline_layers` gives {} chunk(s), and {what} make {chunks}", given.len())
    } else if given.contains(&0) {
        format!("`pipeline_layers = {given:?}` leaves a chunk without blocks")
    } else if sum != blocks {
        format!("`pipeline_layers = {given:?}` holds {sum} blocks, and the model has {blocks}")
    } else {
        return None;
    };
    Some(
        Finding::new(at, message)
            .expected(format!("{chunks} block counts of at least 1 summing to {blocks}"))
            .hint(format!("for example {fix}")),
    )
}

/// `blocks` cut into `chunks` counts as even as they can be, the larger ones first (`[16, 16, 16, 16, 16, 16,
/// 15, 15]` for 126 over 8): the example a refusal offers.
fn even_cut(blocks: usize, chunks: usize) -> Vec<usize> {
    let chunks = chunks.max(1);
    (0..chunks).map(|c| blocks / chunks + usize::from(c < blocks % chunks)).collect()
}

#[cfg(test)]
#[path = "mesh_tests.rs"]
mod tests;
