//! Tensor (and sequence) parallelism in the tch backend: one rank of a tensor group computing its share of a
//! decoder ([`TensorParallel`], over the split of `trainbench_graph::tensor_parallel`). The lowered model
//! asks it for the nodes it computes differently ([`TensorParallel::forward`]: row-parallel layers summed over
//! the group before their bias, the vocabulary-parallel embedding and cross-entropy, position embeddings on a
//! sequence shard) and for the collective where an activation enters a parallel region
//! ([`TensorParallel::enter`]); the step sums the gradients that are partial over the group
//! ([`TensorParallel::reduce_partial_grads`]) and gathers the whole weights for the digest
//! ([`TensorParallel::gather_weights`]).

use tch::{Kind, TchError, Tensor};
use trainbench_contract::TensorTraffic;
use trainbench_graph::graph::{Graph, Node, NodeId, Op};
use trainbench_graph::params::{ParamDecl, graph_tensors};
use trainbench_graph::tensor_parallel::{Role, Split, TensorShard};

use crate::diff_op::{Group, GroupTraffic, TensorCollective};

/// Label ids that do not count in the cross-entropy (PyTorch's default `ignore_index`).
const IGNORE_INDEX: i64 = -100;

/// One rank of a tensor group: its split of the model and the group's communicator.
pub struct TensorParallel {
    group: Group,
    shard: TensorShard,
    /// The full graph (initial values are sliced from its declarations).
    full: Graph,
    /// Each trained tensor of the local graph (its node and how it is split), in the order the optimizer holds
    /// them.
    trained: Vec<(NodeId, Split)>,
}

impl TensorParallel {
    /// Rank `group.rank()` of a tensor group over `group` splitting `full` (with sequence parallelism when
    /// `sequence_parallel`).
    pub fn new(full: &Graph, group: Group, sequence_parallel: bool) -> Result<Self, TchError> {
        let shard = TensorShard::new(full, group.size(), group.rank(), sequence_parallel)
            .map_err(|e| TchError::Kind(e.to_string()))?;
        let trained = graph_tensors(&shard.local)
            .into_iter()
            .filter(|(_, d)| d.trainable())
            .map(|(id, d)| (id, shard.split_of(full, id, &d)))
            .collect();
        Ok(Self { group, shard, full: full.clone(), trained })
    }

    /// The graph this rank holds (its local widths).
    pub fn local(&self) -> &Graph {
        &self.shard.local
    }

    /// Keep only the trained tensors of the nodes `owned` selects (a pipeline rank's chunks: its optimizer
    /// holds theirs only).
    pub fn keep_nodes(&mut self, owned: impl Fn(NodeId) -> bool) {
        self.trained.retain(|(id, _)| owned(*id));
    }

    /// The node of each trained tensor, in the order the optimizer holds them.
    pub fn trained_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.trained.iter().map(|(id, _)| *id)
    }

    /// The group's traffic so far.
    pub fn traffic(&self) -> GroupTraffic {
        self.group.traffic()
    }

    /// The bytes per step this rank sent over the group since its traffic was `from`, over `steps` steps, as
    /// ring algorithms move them ([`ring_bytes`]).
    pub fn traffic_per_step(&self, from: GroupTraffic, steps: u64) -> TensorTraffic {
        let now = self.traffic();
        let since = |a: (u64, u64), b: (u64, u64)| (a.0.saturating_sub(b.0), a.1.saturating_sub(b.1));
        let delta = GroupTraffic {
            all_reduce: since(now.all_reduce, from.all_reduce),
            all_gather: since(now.all_gather, from.all_gather),
            reduce_scatter: since(now.reduce_scatter, from.reduce_scatter),
            ..GroupTraffic::default()
        };
        let (all_reduce, all_gather, reduce_scatter) = ring_bytes(delta, self.degree());
        let per = |b: u64| b.checked_div(steps).unwrap_or(0);
        TensorTraffic { all_reduce: per(all_reduce), all_gather: per(all_gather), reduce_scatter: per(reduce_scatter) }
    }

    /// Ranks in the group.
    pub fn degree(&self) -> usize {
        self.group.size()
    }

    /// This rank's initial values of `decl` of node `id`: its slice of the full tensor's.
    pub fn initial_values(&self, id: NodeId, decl: &ParamDecl, seed: u64) -> Vec<f32> {
        self.shard.initial_values(&self.full, id, decl, seed)
    }

    fn leave(&self) -> TensorCollective {
        if self.shard.sequence_parallel { TensorCollective::Scatter(1) } else { TensorCollective::Reduce }
    }

    /// Whether node `id`'s output changes as it leaves its node: it enters a parallel region (copied or gathered
    /// into it), or passes between whole and sequence shards.
    pub fn enters(&self, id: NodeId) -> bool {
        let s = &self.shard;
        [&s.enters, &s.narrows, &s.gathers].iter().any(|flags| flags.get(id).copied().unwrap_or(false))
    }

    /// Node `id`'s output as its consumers read it: where it enters a parallel region, copied into it (gathered
    /// along the sequence when on sequence shards); a whole output read on shards cut to this rank's shard; a
    /// sequence shard read whole gathered.
    pub fn enter(&self, id: NodeId, out: Tensor) -> Result<Tensor, TchError> {
        let s = &self.shard;
        if s.narrows[id] {
            let len = out.size().get(1).copied().unwrap_or(0) / self.group.size() as i64;
            return out.f_narrow(1, self.group.rank() as i64 * len, len)?.f_contiguous();
        }
        if s.gathers[id] {
            return self.group.collective(TensorCollective::GatherWhole(1), &out);
        }
        if !s.enters[id] {
            return Ok(out);
        }
        let kind = if s.on_shards[id] { TensorCollective::Gather(1) } else { TensorCollective::Copy };
        self.group.collective(kind, &out)
    }

    /// Node `id`'s output where this rank computes it differently from one device; `None` where the plain
    /// lowering applies (to its local widths).
    pub fn forward(
        &self,
        id: NodeId,
        node: &Node,
        ins: &[Tensor],
        params: &[Tensor],
    ) -> Option<Result<Tensor, TchError>> {
        let x = ins.first()?;
        match self.shard.roles[id] {
            // Only linear layers are row-parallel.
            Role::Row => Some((|| {
                let y = self.group.collective(self.leave(), &x.f_linear(&params[0], None::<&Tensor>)?)?;
                let bias = params.get(1).filter(|_| matches!(node.op, Op::Linear { bias: true, .. }));
                if let Some(b) = bias { y.f_add(b) } else { Ok(y) }
            })()),
            Role::VocabEmbedding => {
                let Op::Embedding { vocab, .. } = node.op else { return None };
                Some(self.embedding(x, &params[0], vocab))
            }
            Role::VocabLoss => Some(self.cross_entropy(x, ins.get(1)?)),
            // A fused self-attention layer on this rank's heads, its output projection row-parallel.
            Role::Heads => {
                let Op::Attention { embed_dim, heads, causal, tensor_shards, .. } = node.op else { return None };
                Some((|| {
                    let local = embed_dim / tensor_shards.max(1);
                    let o = crate::ops::attention_heads(ins, params, local, heads, causal, true)?;
                    let out = params.len().checked_sub(2).and_then(|i| params.get(i..)).unwrap_or_default();
                    let [w, b] = out else {
                        return Err(TchError::Kind(format!("internal: `{}` has no output projection", node.name)));
                    };
                    self.group.collective(self.leave(), &o.f_linear(w, None::<&Tensor>)?)?.f_add(b)
                })())
            }
            Role::Replicated if self.shard.on_shards[id] && matches!(node.op, Op::LearnedPositions { .. }) => {
                Some((|| {
                    let t = x.size()[1];
                    x.f_add(&params[0].f_narrow(0, self.group.rank() as i64 * t, t)?)
                })())
            }
            Role::Replicated | Role::Local | Role::Column => None,
        }
    }

    /// Rows `rank * vocab ..` of the embedding looked up; ids outside them give zeros; summed over the group.
    fn embedding(&self, ids: &Tensor, weight: &Tensor, vocab: usize) -> Result<Tensor, TchError> {
        let start = (self.group.rank() * vocab) as i64;
        let mine = ids.f_ge(start)?.f_logical_and(&ids.f_lt(start + vocab as i64)?)?;
        let local = ids.f_sub_scalar(start)?.f_mul(&mine)?;
        let rows = Tensor::f_embedding(weight, &local, -1, false, false)?;
        let y = rows.f_mul(&mine.f_unsqueeze(-1)?.f_to_kind(rows.kind())?)?;
        self.group.collective(self.leave(), &y)
    }

    /// Mean cross-entropy of vocabulary-split logits `[B, T, V / t]` against labels `[B, T]`: the maximum over
    /// the whole vocabulary (gathered, no gradient: the result does not depend on it), then the sum of
    /// exponentials and the label's logit summed over the group in one all-reduce.
    fn cross_entropy(&self, logits: &Tensor, labels: &Tensor) -> Result<Tensor, TchError> {
        let logits = logits.f_to_kind(Kind::Float)?;
        let v = *logits.size().last().unwrap_or(&1);
        let z = logits.f_reshape([-1, v])?;
        let labels = labels.f_reshape([-1])?;
        let local_max = z.f_detach()?.f_amax([1i64].as_slice(), true)?;
        let max = self.group.all_gather(&local_max, 1)?.f_amax([1i64].as_slice(), true)?;
        let shifted = z.f_sub(&max)?;
        let start = self.group.rank() as i64 * v;
        let mine = labels.f_ge(start)?.f_logical_and(&labels.f_lt(start + v)?)?;
        let local = labels.f_sub_scalar(start)?.f_mul(&mine)?;
        let picked = shifted.f_gather(1, &local.f_unsqueeze(1)?, false)?.f_squeeze_dim(1)?;
        let picked = picked.f_mul(&mine.f_to_kind(Kind::Float)?)?;
        let sum_exp = shifted.f_exp()?.f_sum_dim_intlist([1i64].as_slice(), false, Kind::Float)?;
        let both = self.group.collective(TensorCollective::Reduce, &Tensor::f_stack(&[sum_exp, picked], 1)?)?;
        let per_token = both.f_select(1, 0)?.f_log()?.f_sub(&both.f_select(1, 1)?)?;
        let counted = labels.f_ne(IGNORE_INDEX)?.f_to_kind(Kind::Float)?;
        per_token.f_mul(&counted)?.f_sum(Kind::Float)?.f_div(&counted.f_sum(Kind::Float)?.f_clamp_min(1.0)?)
    }

    /// Each trained tensor's share of its values this rank owns, in the order the optimizer holds them: one
    /// over the group's size for a tensor every rank holds whole ([`Split::Replicated`]), 1 for a split one.
    pub fn gradient_weights(&self) -> Vec<f64> {
        let t = self.group.size().max(1) as f64;
        self.trained.iter().map(|(_, s)| if matches!(s, Split::Replicated { .. }) { 1.0 / t } else { 1.0 }).collect()
    }

    /// Whether any trained tensor's gradient is partial over the group (see [`Split::Replicated`]).
    pub fn has_partial_grads(&self) -> bool {
        self.trained.iter().any(|(_, s)| matches!(s, Split::Replicated { partial: true }))
    }

    /// Sum over the group the gradients of `params` (the optimizer's, in order) that each rank holds only its
    /// share of, in one all-reduce.
    pub fn reduce_partial_grads(&self, params: &[Tensor]) -> Result<(), TchError> {
        let partial: Vec<Tensor> = params
            .iter()
            .zip(&self.trained)
            .filter(|(_, (_, s))| matches!(s, Split::Replicated { partial: true }))
            .map(|(p, _)| p.grad())
            .filter(Tensor::defined)
            .collect();
        if partial.is_empty() {
            return Ok(());
        }
        let flat = Tensor::f_cat(&partial.iter().map(|g| g.f_reshape([-1])).collect::<Result<Vec<_>, _>>()?, 0)?;
        let summed = self.group.all_reduce(&flat)?;
        let mut at = 0;
        tch::no_grad(|| -> Result<(), TchError> {
            for g in &partial {
                let n = g.numel() as i64;
                g.shallow_clone().f_copy_(&summed.f_narrow(0, at, n)?.f_view(g.size().as_slice())?)?;
                at += n;
            }
            Ok(())
        })
    }

    /// The whole trained tensors of the model from every rank's `params` (the optimizer's, in order): split
    /// tensors gathered along their axis, replicated ones as they are. Every rank of the group calls it.
    pub fn gather_weights(&self, params: &[Tensor]) -> Result<Vec<Tensor>, TchError> {
        params
            .iter()
            .zip(&self.trained)
            .map(|(p, (_, s))| match s {
                Split::Replicated { .. } => p.f_detach(),
                Split::Sharded { axis, .. } => self.group.all_gather(&p.f_detach()?, *axis as i64),
                // Each block's rows gathered in place: the axis seen as `chunks x len`, gathered along `len`.
                Split::Chunked { axis, chunks, .. } => {
                    let size = p.size();
                    let mut blocks = size[..*axis].to_vec();
                    blocks.extend([*chunks as i64, size[*axis] / (*chunks).max(1) as i64]);
                    blocks.extend(&size[axis + 1..]);
                    let whole =
                        self.group.all_gather(&p.f_detach()?.f_reshape(blocks.as_slice())?, *axis as i64 + 1)?;
                    let mut full = size.clone();
                    full[*axis] *= self.group.size() as i64;
                    whole.f_reshape(full.as_slice())
                }
            })
            .collect()
    }
}

/// Bytes one rank sends per kind of collective for `traffic` over a group of `t` ranks, as ring algorithms
/// move them (fp32 values): an all-reduce of `n` values `2 (t - 1) / t x 4n`, an all-gather of a block of `n`
/// values `(t - 1) x 4n`, a reduce-scatter of `n` values `(t - 1) / t x 4n`.
pub fn ring_bytes(traffic: GroupTraffic, t: usize) -> (u64, u64, u64) {
    let t = t.max(1) as u64;
    let all_reduce = traffic.all_reduce.1 * 4 * 2 * (t - 1) / t;
    let all_gather = traffic.all_gather.1 * 4 * (t - 1);
    let reduce_scatter = traffic.reduce_scatter.1 * 4 * (t - 1) / t;
    (all_reduce, all_gather, reduce_scatter)
}

#[cfg(test)]
#[path = "tensor_parallel_tests.rs"]
mod tests;
