//! Builder methods for products, positional encodings, the WGAN-GP critic batch, weight tying, RoI align and
//! losses, and finishing the graph.

use super::{GraphBuilder, ShapeError};
use crate::graph::{FrozenDtype, Graph, InputKind, LossKind, NodeId, Op, Shape};

impl GraphBuilder {
    /// Batched matrix product `a @ b` (or `a @ b^T` when `transpose_b`) over the last two axes.
    pub fn matmul(&mut self, name: &str, a: NodeId, b: NodeId, transpose_b: bool) -> Result<NodeId, ShapeError> {
        let (sa, sb) = (self.shape(a).clone(), self.shape(b).clone());
        if sa.rank() < 2 || sa.rank() != sb.rank() || sa.0[..sa.rank() - 2] != sb.0[..sb.rank() - 2] {
            return Err(self.err(
                name,
                "matmul",
                format!("operands {sa} and {sb} are not batched matrices of the same rank"),
            ));
        }
        let r = sa.rank();
        let (m, k) = (sa.0[r - 2], sa.0[r - 1]);
        let (kb, n) = if transpose_b { (sb.0[r - 1], sb.0[r - 2]) } else { (sb.0[r - 2], sb.0[r - 1]) };
        if k != kb {
            return Err(self.err(
                name,
                "matmul",
                format!(
                    "inner dimensions differ: `{}` {sa} has {k} columns but `{}` {sb} gives {kb} rows",
                    self.nodes[a].name, self.nodes[b].name
                ),
            ));
        }
        let mut out = sa.0[..r - 2].to_vec();
        out.extend([m, n]);
        self.add(name, Op::MatMul { transpose_b }, vec![a, b], out)
    }

    /// Fixed sinusoidal positions over `[T, E]`: `scale * x + PE[:T]`.
    pub fn sinusoidal_positions(&mut self, name: &str, x: NodeId, scale: f32) -> Result<NodeId, ShapeError> {
        let s = self.shape(x).0.clone();
        if s.len() != 2 || s[1] % 2 != 0 {
            return Err(self.err(
                name,
                "sinusoidal_positions",
                format!("expects [time, even width], got {}", Shape(s)),
            ));
        }
        self.add(name, Op::SinusoidalPositions { scale }, vec![x], s)
    }

    /// Learned positions over `[T, E]` from a table of `max_positions` rows.
    pub fn learned_positions(&mut self, name: &str, x: NodeId, max_positions: usize) -> Result<NodeId, ShapeError> {
        let s = self.shape(x).0.clone();
        if s.len() != 2 || s[0] > max_positions {
            return Err(self.err(
                name,
                "learned_positions",
                format!("expects [time, width] with time <= max_positions = {max_positions}, got {}", Shape(s)),
            ));
        }
        self.add(name, Op::LearnedPositions { max_positions, dim: s[1] }, vec![x], s)
    }

    /// WGAN-GP critic input: stack (real, fake, interpolated) -> `[3, ..]` (see [`Op::CriticBatch`]).
    pub fn critic_batch(&mut self, name: &str, real: NodeId, fake: NodeId) -> Result<NodeId, ShapeError> {
        let mut s = self.same_shapes(name, "critic_batch", &[real, fake])?;
        s.insert(0, 3);
        self.add(name, Op::CriticBatch, vec![real, fake], s)
    }

    /// Tie `node`'s `weight` to `owner`'s (see [`crate::graph::Node::tied_to`]): both must hold a weight of the same shape
    /// (`Embedding [vocab, dim]`, `Linear [out, in]`), and `owner` must not itself be tied.
    pub fn tie(&mut self, node: NodeId, owner: NodeId) -> Result<(), ShapeError> {
        fn weight_shape(op: &Op) -> Option<[usize; 2]> {
            match op {
                Op::Embedding { vocab, dim } => Some([*vocab, *dim]),
                Op::Linear { in_features, out_features, .. } => Some([*out_features, *in_features]),
                Op::Input { .. }
                | Op::Conv { .. }
                | Op::BatchNorm { .. }
                | Op::LayerNorm { .. }
                | Op::RmsNorm { .. }
                | Op::Rnn { .. }
                | Op::Attention { .. }
                | Op::Rotary { .. }
                | Op::Sdpa { .. }
                | Op::ClassToken { .. }
                | Op::EmbeddingBag { .. }
                | Op::Pool { .. }
                | Op::AdaptivePool { .. }
                | Op::Act { .. }
                | Op::Softmax
                | Op::Dropout { .. }
                | Op::Add
                | Op::Mul
                | Op::Concat { .. }
                | Op::Reshape { .. }
                | Op::Transpose { .. }
                | Op::Slice { .. }
                | Op::Mean { .. }
                | Op::MatMul { .. }
                | Op::SinusoidalPositions { .. }
                | Op::LearnedPositions { .. }
                | Op::CriticBatch
                | Op::RoiAlign { .. }
                | Op::Lora { .. }
                | Op::Moe { .. }
                | Op::Loss { .. } => None,
            }
        }
        let (n, o) = (&self.nodes[node], &self.nodes[owner]);
        let err = |m: String| ShapeError { layer: n.name.clone(), op: n.op.kind_name(), message: m };
        if owner >= node || o.tied_to.is_some() {
            return Err(err(format!("cannot tie to `{}`: the owner must be an earlier, untied layer", o.name)));
        }
        match (weight_shape(&n.op), weight_shape(&o.op)) {
            (Some(a), Some(b)) if a == b => {}
            (a, b) => {
                return Err(err(format!("cannot tie its weight {a:?} to the weight {b:?} of `{}`", o.name)));
            }
        }
        self.nodes[node].tied_to = Some(owner);
        Ok(())
    }

    /// RoI align of `proposals` fixed boxes over a `[C, H, W]` feature map.
    pub fn roi_align(
        &mut self,
        name: &str,
        x: NodeId,
        proposals: usize,
        output: [usize; 2],
        spatial_scale: f32,
    ) -> Result<NodeId, ShapeError> {
        let s = self.shape(x).0.clone();
        if s.len() != 3 {
            return Err(self.err(name, "roi_align", format!("expects a [C, H, W] feature map, got {}", Shape(s))));
        }
        let out = vec![proposals, s[0], output[0], output[1]];
        self.add(
            name,
            Op::RoiAlign { proposals, output: output.to_vec(), spatial_scale, sampling_ratio: 2 },
            vec![x],
            out,
        )
    }

    /// A loss node over `inputs` (see [`LossKind`] for the expected inputs); it is registered as a loss.
    pub fn loss(&mut self, name: &str, loss: LossKind, inputs: &[NodeId]) -> Result<NodeId, ShapeError> {
        self.loss_weighted(name, loss, inputs, 1.0)
    }

    /// A loss node with a weight in the total loss (e.g. 0.4 for an auxiliary classifier).
    pub fn loss_weighted(
        &mut self,
        name: &str,
        loss: LossKind,
        inputs: &[NodeId],
        weight: f32,
    ) -> Result<NodeId, ShapeError> {
        let need = match loss {
            LossKind::CrossEntropy
            | LossKind::Ctc
            | LossKind::Mse
            | LossKind::SmoothL1 { .. }
            | LossKind::BceWithLogits
            | LossKind::Wasserstein { .. } => 2,
            LossKind::ActorCritic { .. } => 4,
        };
        if inputs.len() != need {
            return Err(self.err(name, "loss", format!("expects {need} inputs, got {}", inputs.len())));
        }
        match loss {
            LossKind::CrossEntropy => {
                let (l, t) = (self.shape(inputs[0]), self.shape(inputs[1]));
                if l.rank() == 0 || l.0[..l.rank() - 1] != t.0[..] {
                    return Err(self.err(
                        name,
                        "loss",
                        format!(
                            "cross-entropy logits {l} do not match labels {t} (expected labels of shape {})",
                            Shape(l.0[..l.rank().saturating_sub(1)].to_vec())
                        ),
                    ));
                }
                if let Op::Input { kind: InputKind::Labels { classes } } = self.nodes[inputs[1]].op {
                    if classes != l.last() {
                        return Err(self.err(
                            name,
                            "loss",
                            format!("the model outputs {} classes but the labels have {classes}", l.last()),
                        ));
                    }
                }
            }
            LossKind::Mse | LossKind::SmoothL1 { .. } | LossKind::BceWithLogits => {
                self.same_shapes(name, "loss", inputs)?;
            }
            LossKind::Ctc => {
                if self.shape(inputs[0]).rank() != 2 || self.shape(inputs[1]).rank() != 1 {
                    return Err(self.err(name, "loss", "CTC expects logits [time, classes] and labels [label_len]"));
                }
                if self.shape(inputs[1]).0[0] > self.shape(inputs[0]).0[0] {
                    return Err(self.err(
                        name,
                        "loss",
                        format!(
                            "CTC labels ({}) are longer than the output sequence ({})",
                            self.shape(inputs[1]).0[0],
                            self.shape(inputs[0]).0[0]
                        ),
                    ));
                }
            }
            LossKind::Wasserstein { .. } => {
                if !matches!(self.nodes[inputs[1]].op, Op::CriticBatch) || self.shape(inputs[0]).0 != [3, 1] {
                    return Err(self.err(name, "loss", format!(
                        "the Wasserstein loss expects critic scores [3, 1] and the critic_batch node, got {} and `{}`",
                        self.shape(inputs[0]), self.nodes[inputs[1]].name)));
                }
            }
            LossKind::ActorCritic { .. } => {
                let actions = self.shape(inputs[0]).clone();
                if actions.rank() != 1 || self.shape(inputs[1]).0 != [1] || self.shape(inputs[3]).0 != [1] {
                    return Err(self.err(
                        name,
                        "loss",
                        "actor-critic expects policy logits [actions], value [1], actions [] and returns [1]",
                    ));
                }
                if let Op::Input { kind: InputKind::Labels { classes } } = self.nodes[inputs[2]].op {
                    if classes != actions.last() || self.shape(inputs[2]).rank() != 0 {
                        return Err(self.err(
                            name,
                            "loss",
                            format!("the policy has {} actions but the action input has {classes}", actions.last()),
                        ));
                    }
                }
            }
        }
        if !(weight.is_finite() && weight > 0.0) {
            return Err(self.err(name, "loss", format!("loss weight {weight} must be positive")));
        }
        let id = self.add(name, Op::Loss { loss, weight }, inputs.to_vec(), vec![])?;
        self.losses.push(id);
        Ok(id)
    }

    /// Finish the graph; `items_per_sample`/`item_unit` define the throughput unit.
    pub fn finish(self, items_per_sample: u64, item_unit: &str) -> Result<Graph, ShapeError> {
        if self.losses.is_empty() {
            return Err(ShapeError {
                layer: self.name.clone(),
                op: "graph",
                message: "the model has no loss layer".into(),
            });
        }
        self.check_blocks()?;
        Ok(Graph {
            name: self.name,
            nodes: self.nodes,
            losses: self.losses,
            items_per_sample,
            item_unit: item_unit.into(),
            blocks: self.blocks,
            decoder: self.decoder,
            frozen_dtype: FrozenDtype::Fp32,
        })
    }
}
