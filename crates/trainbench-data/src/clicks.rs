//! Synthetic clicks with a learnable signal, for binary click models (the `dlrm` family): each sample's dense
//! features (standard normal) and categorical ids (uniform over each table) drawn from the dataset's seed and
//! the sample's index, and its click drawn from a fixed seeded rule of them plus noise:
//! `P(click) = sigmoid(BIAS + DENSE_SCALE * w.x + SPARSE_SCALE * mean_t(mean_bag(e_t[id])))`, `w` a unit
//! vector and `e_t` one normal effect per row of table `t`, both drawn once from the seed. A model that learns
//! `w` and the effects ranks the clicks as the rule does (the rule's own AUC is about 0.85), so AUC targets
//! can be reached in seconds; a sample's values depend only on the seed and its index, so any split of the
//! indices (training, evaluation, a rank's shard) reads the same samples wherever it is generated.

use std::ops::Range;

use trainbench_graph::graph::{Graph, InputKind, LossKind, NodeId, Op};
use trainbench_graph::init::{HostTensor, SeededRng};

use crate::batch::HostBatch;

/// Constant term of the click logit (about 40% of samples click).
const BIAS: f32 = -0.4;
/// Weight of the dense features' term.
const DENSE_SCALE: f32 = 1.5;
/// Weight of the categorical features' term (each table's mean effect, averaged over tables, times the square
/// root of the table count, so it keeps unit variance however many tables there are).
const SPARSE_SCALE: f32 = 1.5;

/// Why a model cannot be fed synthetic clicks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClicksError {
    /// The graph has no binary cross-entropy loss over a one-value dense target.
    #[error(
        "model `{model}` has no binary cross-entropy loss over a one-value target: synthetic clicks feed click models (e.g. `family = \"dlrm\"`)"
    )]
    NoClickTarget {
        /// The model's name.
        model: String,
    },
    /// An input is neither dense features, categorical ids nor the click target.
    #[error(
        "model `{model}` has input `{input}`, which synthetic clicks do not fill (they fill dense features, categorical ids and the click target)"
    )]
    OtherInput {
        /// The model's name.
        model: String,
        /// The input's name.
        input: String,
    },
}

/// A categorical input: its node, ids per sample, and table rows.
#[derive(Debug, Clone, PartialEq)]
struct Table {
    node: NodeId,
    bag: usize,
    effects: Vec<f32>,
}

/// The click rule of one graph and seed (see the module docs), and the samples it generates.
#[derive(Debug, Clone, PartialEq)]
pub struct Clicks {
    /// Dense inputs and their weights (all dense weights together a unit vector).
    dense: Vec<(NodeId, Vec<f32>)>,
    tables: Vec<Table>,
    target: NodeId,
    /// Graph inputs, in [`Graph::inputs`] order.
    order: Vec<NodeId>,
    seed: u64,
}

/// The dense target of `graph`'s first binary cross-entropy loss, when it holds one value per sample.
fn click_target(graph: &Graph) -> Option<NodeId> {
    graph.losses.iter().find_map(|&l| {
        let node = &graph.nodes[l];
        let Op::Loss { loss: LossKind::BceWithLogits, .. } = node.op else { return None };
        let target = *node.inputs.get(1)?;
        let t = &graph.nodes[target];
        (matches!(t.op, Op::Input { kind: InputKind::Dense }) && t.shape.numel() == 1).then_some(target)
    })
}

impl Clicks {
    /// The rule for `graph`'s inputs, drawn from `seed`; or why the graph takes no clicks.
    pub fn new(graph: &Graph, seed: u64) -> Result<Self, ClicksError> {
        let target = click_target(graph).ok_or_else(|| ClicksError::NoClickTarget { model: graph.name.clone() })?;
        let (mut dense, mut tables, mut order) = (Vec::new(), Vec::new(), Vec::new());
        for (id, node) in graph.inputs() {
            order.push(id);
            if id == target {
                continue;
            }
            let per_sample = node.shape.numel() as usize;
            match node.op.input_kind() {
                Some(InputKind::Dense) => {
                    let mut rng = SeededRng::new(seed, &format!("clicks.weights.{}", node.name));
                    dense.push((id, (0..per_sample).map(|_| rng.normal()).collect::<Vec<f32>>()));
                }
                Some(InputKind::Tokens { vocab }) => {
                    let mut rng = SeededRng::new(seed, &format!("clicks.effects.{}", node.name));
                    let effects = (0..*vocab).map(|_| rng.normal()).collect();
                    tables.push(Table { node: id, bag: per_sample, effects });
                }
                Some(InputKind::Labels { .. }) | None => {
                    return Err(ClicksError::OtherInput { model: graph.name.clone(), input: node.name.clone() });
                }
            }
        }
        let norm = dense.iter().flat_map(|(_, w)| w.iter()).map(|w| w * w).sum::<f32>().sqrt();
        if norm > 0.0 {
            dense.iter_mut().flat_map(|(_, w)| w.iter_mut()).for_each(|w| *w /= norm);
        }
        Ok(Self { dense, tables, target, order, seed })
    }

    /// Sample `index`'s features, appended to `dense` (one vector per dense input) and `ids` (one per table),
    /// and its click probability under the rule.
    fn sample(&self, index: u64, dense: &mut [Vec<f32>], ids: &mut [Vec<i64>]) -> (f32, SeededRng) {
        let mut rng = SeededRng::new(self.seed ^ index.wrapping_mul(0xd6e8_feb8_6659_fd93), "clicks.sample");
        let mut logit = BIAS;
        for ((_, weights), out) in self.dense.iter().zip(dense.iter_mut()) {
            for w in weights {
                let x = rng.normal();
                out.push(x);
                logit += DENSE_SCALE * w * x;
            }
        }
        let mut sparse = 0.0f32;
        for (table, out) in self.tables.iter().zip(ids.iter_mut()) {
            let mut sum = 0.0f32;
            for _ in 0..table.bag {
                let id = rng.below(table.effects.len() as u64) as usize;
                out.push(id as i64);
                sum += table.effects[id];
            }
            sparse += sum / table.bag.max(1) as f32;
        }
        if !self.tables.is_empty() {
            logit += SPARSE_SCALE * sparse / (self.tables.len() as f32).sqrt();
        }
        (1.0 / (1.0 + (-logit).exp()), rng)
    }

    /// The samples of `indices` as one batch, every graph input filled in [`Graph::inputs`] order.
    pub fn batch(&self, indices: Range<u64>) -> HostBatch {
        let mut dense = vec![Vec::new(); self.dense.len()];
        let mut ids = vec![Vec::new(); self.tables.len()];
        let mut clicks = Vec::new();
        for index in indices {
            let (p, mut rng) = self.sample(index, &mut dense, &mut ids);
            clicks.push(if rng.uniform() < p { 1.0 } else { 0.0 });
        }
        let mut dense = self.dense.iter().map(|(id, _)| *id).zip(dense.into_iter().map(HostTensor::Dense));
        let mut ids = self.tables.iter().map(|t| t.node).zip(ids.into_iter().map(HostTensor::Ids));
        let mut inputs: Vec<(NodeId, HostTensor)> = dense.by_ref().chain(ids.by_ref()).collect();
        inputs.push((self.target, HostTensor::Dense(clicks)));
        inputs.sort_by_key(|(id, _)| self.order.iter().position(|o| o == id));
        HostBatch { inputs }
    }

    /// The samples of `indices` in consecutive batches of `batch` (the last one smaller when `batch` does not
    /// divide them), as an evaluation split reads them.
    pub fn batches(&self, indices: Range<u64>, batch: usize) -> Vec<HostBatch> {
        let step = batch.max(1) as u64;
        (indices.start..indices.end)
            .step_by(step as usize)
            .map(|from| self.batch(from..(from + step).min(indices.end)))
            .collect()
    }

    /// One epoch of training batches over samples `0..samples` for rank `rank` of `world`: global batch `k`
    /// covers samples `k * global .. (k + 1) * global` and the rank reads its `global / world` slice of it; the
    /// last partial global batch is dropped.
    pub fn shard(&self, samples: u64, global: usize, world: usize, rank: usize) -> Vec<HostBatch> {
        let per_rank = (global / world.max(1)).max(1) as u64;
        let global = global.max(1) as u64;
        (0..samples / global)
            .map(|k| {
                let from = k * global + rank as u64 * per_rank;
                self.batch(from..from + per_rank)
            })
            .collect()
    }

    /// The rule's click probability of each sample of `indices` (what a perfect model would score).
    pub fn probabilities(&self, indices: Range<u64>) -> Vec<f32> {
        let mut dense = vec![Vec::new(); self.dense.len()];
        let mut ids = vec![Vec::new(); self.tables.len()];
        indices.map(|i| self.sample(i, &mut dense, &mut ids).0).collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "clicks_tests.rs"]
mod tests;
