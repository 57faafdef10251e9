//! LoRA fine-tuning of a built graph (`[training.lora]`): [`adapt`] freezes every parameter of the model and
//! puts an [`Op::Lora`] adapter beside each targeted projection, summed with its output.
//!
//! The adapter follows PEFT's `LoraLayer` (Hu et al. 2021): `W x + (alpha / r) B A dropout(x)`, `A` `[r, d_in]`
//! Kaiming-uniform, `B` `[d_out, r]` zeros; the base weights (embeddings, norms and the head included) hold no
//! gradient and no optimizer state. Targets are named by projection: `q` is every linear layer named
//! `q_proj`, and so on.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::graph::{Block, FrozenDtype, Graph, Node, NodeId, Op, Shape};

/// A projection LoRA can adapt, by the name of its linear layers (`q` adapts every `q_proj`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LoraTarget {
    /// The attention's query projection (`q_proj`).
    Q,
    /// The attention's key projection (`k_proj`).
    K,
    /// The attention's value projection (`v_proj`).
    V,
    /// The attention's output projection (`o_proj`).
    O,
    /// The SwiGLU feed-forward's gate projection (`gate_proj`).
    Gate,
    /// The feed-forward's up projection (`up_proj`).
    Up,
    /// The feed-forward's down projection (`down_proj`).
    Down,
}

impl LoraTarget {
    /// Every target, in the order the spec documents them.
    pub const ALL: [LoraTarget; 7] = [
        LoraTarget::Q,
        LoraTarget::K,
        LoraTarget::V,
        LoraTarget::O,
        LoraTarget::Gate,
        LoraTarget::Up,
        LoraTarget::Down,
    ];

    /// The name as written in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            LoraTarget::Q => "q",
            LoraTarget::K => "k",
            LoraTarget::V => "v",
            LoraTarget::O => "o",
            LoraTarget::Gate => "gate",
            LoraTarget::Up => "up",
            LoraTarget::Down => "down",
        }
    }

    /// The last segment of the linear layers' names this target adapts.
    pub fn projection(self) -> &'static str {
        match self {
            LoraTarget::Q => "q_proj",
            LoraTarget::K => "k_proj",
            LoraTarget::V => "v_proj",
            LoraTarget::O => "o_proj",
            LoraTarget::Gate => "gate_proj",
            LoraTarget::Up => "up_proj",
            LoraTarget::Down => "down_proj",
        }
    }
}

/// `[training.lora]`: fine-tune low-rank adapters on the named projections, the base model frozen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoraSpec {
    /// Rank r of each adapter (at least 1, at most the projection's smaller width).
    pub rank: usize,
    /// Scale numerator: the update is multiplied by `alpha / rank` (default: `rank`, a scale of 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
    /// Dropout probability on each adapter's input, in [0, 1).
    #[serde(default)]
    pub dropout: f64,
    /// Projections adapted, among `q`, `k`, `v`, `o`, `gate`, `up`, `down`.
    pub targets: Vec<LoraTarget>,
    /// The type the frozen base weights are kept in: `fp32` (default) or `bf16` (half the bytes; the base layers
    /// compute in bf16 while the adapters and their optimizer state stay fp32). The tch backend only.
    #[serde(default, skip_serializing_if = "FrozenDtype::is_fp32")]
    pub base_dtype: FrozenDtype,
}

impl LoraSpec {
    /// The scale numerator in effect (`alpha`, or `rank` when left out).
    pub fn alpha(&self) -> f64 {
        self.alpha.unwrap_or(self.rank as f64)
    }
}

/// Why LoRA cannot adapt a model as specified, at a field of `[training.lora]`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct LoraError {
    /// The field of `[training.lora]` at fault (`rank`, `targets`, ...).
    pub field: &'static str,
    /// What is wrong, with the value.
    pub message: String,
    /// How to fix it.
    pub hint: String,
}

fn refuse(field: &'static str, message: String, hint: impl Into<String>) -> LoraError {
    LoraError { field, message, hint: hint.into() }
}

/// The target a node is, when it is a linear layer named after one.
fn target_of(node: &Node) -> Option<LoraTarget> {
    let Op::Linear { .. } = node.op else { return None };
    let last = node.name.rsplit('.').next().unwrap_or(&node.name);
    LoraTarget::ALL.into_iter().find(|t| t.projection() == last)
}

fn check(graph: &Graph, spec: &LoraSpec) -> Result<(), LoraError> {
    if spec.rank == 0 {
        return Err(refuse(
            "rank",
            "rank = 0 leaves no adapter to train".into(),
            "set rank to at least 1 (8 or 16 are usual)",
        ));
    }
    let alpha = spec.alpha();
    if !(alpha.is_finite() && alpha > 0.0) {
        return Err(refuse(
            "alpha",
            format!("alpha = {alpha} must be above 0"),
            "use alpha = 2 x rank, or leave it out for rank",
        ));
    }
    if !(0.0..1.0).contains(&spec.dropout) {
        return Err(refuse(
            "dropout",
            format!("dropout = {} must be in [0, 1)", spec.dropout),
            "0.1 is usual; 0 for none",
        ));
    }
    if spec.targets.is_empty() {
        return Err(refuse(
            "targets",
            "targets is empty: nothing would be trained".into(),
            "name projections, e.g. targets = [\"q\", \"v\"]",
        ));
    }
    let present: Vec<LoraTarget> =
        LoraTarget::ALL.into_iter().filter(|t| graph.nodes.iter().any(|n| target_of(n) == Some(*t))).collect();
    let names = |ts: &[LoraTarget]| ts.iter().map(|t| format!("\"{}\"", t.as_str())).collect::<Vec<_>>().join(", ");
    for (i, t) in spec.targets.iter().enumerate() {
        if spec.targets[..i].contains(t) {
            return Err(refuse(
                "targets",
                format!("target \"{}\" is listed twice", t.as_str()),
                "list each projection once",
            ));
        }
        if !present.contains(t) {
            let hint = if present.is_empty() {
                "LoRA adapts decoder projections (model.family = \"gpt\"); remove [training.lora] for this model"
                    .to_string()
            } else {
                format!("this model has {}; remove \"{}\"", names(&present), t.as_str())
            };
            return Err(refuse(
                "targets",
                format!(
                    "target \"{}\": model `{}` has no linear layer named {}",
                    t.as_str(),
                    graph.name,
                    t.projection()
                ),
                hint,
            ));
        }
    }
    for node in graph.nodes.iter().filter(|n| target_of(n).is_some_and(|t| spec.targets.contains(&t))) {
        if let Op::Linear { in_features, out_features, .. } = node.op {
            let widest = in_features.min(out_features);
            if spec.rank > widest {
                return Err(refuse(
                    "rank",
                    format!(
                        "rank = {} exceeds the smaller width ({widest}) of `{}` ({in_features} -> {out_features})",
                        spec.rank, node.name
                    ),
                    format!("use a rank of at most {widest}: a larger one is no longer low-rank"),
                ));
            }
        }
    }
    Ok(())
}

/// `graph` with every node frozen and an adapter beside each targeted projection: the projection's readers read
/// the sum of the projection and its adapter instead. Node ids shift; losses, blocks and ties follow.
pub fn adapt(graph: &Graph, spec: &LoraSpec) -> Result<Graph, LoraError> {
    check(graph, spec)?;
    let n = graph.nodes.len();
    // `moved[i]`: where node i now is; `read[i]`: what its readers now read (the sum, for a targeted node).
    let (mut moved, mut read) = (vec![0; n], vec![0; n]);
    let mut nodes = Vec::with_capacity(n + 2 * n / 4);
    for (i, node) in graph.nodes.iter().enumerate() {
        let mut base = node.clone();
        base.inputs = node.inputs.iter().map(|&j| read[j]).collect();
        base.tied_to = node.tied_to.map(|j| moved[j]);
        base.frozen = true;
        moved[i] = nodes.len();
        read[i] = nodes.len();
        let targeted = target_of(node).is_some_and(|t| spec.targets.contains(&t));
        let adapted = if let (true, &Op::Linear { in_features, out_features, .. }) = (targeted, &node.op) {
            Some((in_features, out_features))
        } else {
            None
        };
        let inputs = base.inputs.clone();
        nodes.push(base);
        if let Some((in_features, out_features)) = adapted {
            let op = Op::Lora {
                in_features,
                out_features,
                rank: spec.rank,
                alpha: spec.alpha() as f32,
                dropout: spec.dropout as f32,
            };
            let side = |name: &str, op: Op, inputs: Vec<NodeId>| Node {
                name: format!("{}.{name}", node.name),
                op,
                inputs,
                shape: Shape(node.shape.0.clone()),
                part: node.part.clone(),
                tied_to: None,
                frozen: false,
            };
            nodes.push(side("lora", op, inputs));
            nodes.push(side("adapted", Op::Add, vec![moved[i], moved[i] + 1]));
            read[i] = moved[i] + 2;
        }
    }
    let blocks = graph
        .blocks
        .iter()
        .map(|b| Block { name: b.name.clone(), input: read[b.input], first: moved[b.first], last: read[b.last] })
        .collect();
    let losses = graph.losses.iter().map(|&l| moved[l]).collect();
    Ok(Graph { nodes, losses, blocks, frozen_dtype: spec.base_dtype, ..graph.clone() })
}

#[cfg(test)]
#[path = "lora_tests.rs"]
mod tests;
