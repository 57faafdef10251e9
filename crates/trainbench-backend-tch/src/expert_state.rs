//! An expert-parallel run's state beside the model ([`ExpertState`]): its groups, the trained tensors split into
//! the non-expert ones (exchanged over the world by the data-parallel exchange) and this rank's expert shards
//! (summed over the ranks holding the same experts), and what its communication moved. The MoE layer's side is
//! [`crate::expert_parallel`].

use tch::{TchError, Tensor};
use trainbench_comm::ExpertGroups;
use trainbench_comm::layout::is_expert_tensor;
use trainbench_contract::ExpertTraffic;
use trainbench_graph::graph::{Graph, Op};

use crate::diff_op::Group;
use crate::expert_parallel::ExpertParallel;
use crate::lower::Lowered;

/// An expert-parallel run's state beside the model: the groups, the trained tensors split into the
/// non-expert ones (exchanged over the world) and the experts' shards (summed over their replicas), and the
/// steps taken.
pub struct ExpertState {
    ep: ExpertParallel,
    replicas: Group,
    world_size: usize,
    /// Non-expert trained tensors, in layout order ([`trainbench_comm::Layout::without_experts`]).
    pub dense: Vec<Tensor>,
    /// The experts' shards this rank trains.
    pub experts: Vec<Tensor>,
    /// The share of each of `dense` and of `experts` a rank of its tensor group owns (one over the group's size
    /// for a tensor every rank of it holds whole, a mixture of experts included; 1 without one).
    tensor_shares: (Vec<f64>, Vec<f64>),
    steps: u64,
    grad_values: u64,
    host: Vec<f32>,
}

impl ExpertState {
    /// The state over `groups`, with `model`'s experts narrowed to this rank's shard (every expert was
    /// initialised as one rank initialises it; the shard is a copy, a new trained tensor).
    pub fn shard(groups: ExpertGroups, model: &mut Lowered, graph: &Graph) -> Result<ExpertState, TchError> {
        let world_size = groups.world.size();
        let ep = ExpertParallel::new(Group::new(groups.experts), Group::new(groups.world));
        let replicas = Group::new(groups.replicas);
        for (i, node) in graph.nodes.iter().enumerate() {
            let Op::Moe { experts, .. } = &node.op else { continue };
            if experts % ep.degree() != 0 {
                return Err(TchError::Kind(format!(
                    "`{}`: expert_parallel {} does not divide its {experts} experts",
                    node.name,
                    ep.degree()
                )));
            }
            let held = ep.held(*experts);
            for (d, t) in model.decls[i].iter().zip(model.tensors[i].iter_mut()) {
                if is_expert_tensor(node, d) {
                    let shard = t.f_narrow(0, held.start as i64, held.len() as i64)?.f_detach()?.f_contiguous()?;
                    *t = shard.copy().set_requires_grad(true);
                }
            }
        }
        // The trained tensors split into the experts' and the rest, each with its tensor group's share.
        let weights = model.tensor_parallel().map(crate::tensor_parallel::TensorParallel::gradient_weights);
        let (mut dense, mut experts, mut tensor_shares) = (Vec::new(), Vec::new(), (Vec::new(), Vec::new()));
        for (i, (node, decl, t)) in model.trained(graph).into_iter().enumerate() {
            let share = weights.as_ref().and_then(|w| w.get(i)).copied().unwrap_or(1.0);
            if is_expert_tensor(node, decl) {
                experts.push(t);
                tensor_shares.1.push(share);
            } else {
                dense.push(t);
                tensor_shares.0.push(share);
            }
        }
        Ok(ExpertState {
            ep,
            replicas,
            world_size,
            dense,
            experts,
            tensor_shares,
            steps: 0,
            grad_values: 0,
            host: Vec::new(),
        })
    }

    /// The expert parallelism the forward pass uses.
    pub fn parallel(&self) -> &ExpertParallel {
        &self.ep
    }

    /// After the backward pass: each expert's gradient summed over the ranks holding it and divided by the world
    /// size (see the module documentation); counted as a step.
    pub fn reduce_gradients(&mut self) -> Result<(), TchError> {
        let total: usize = self.experts.iter().map(Tensor::numel).sum();
        self.host.resize(total, 0.0);
        crate::dist::stage_grads(self.experts.iter(), &mut self.host)?;
        if self.replicas.size() > 1 {
            self.replicas.all_reduce_values(&mut self.host)?;
            self.grad_values += total as u64;
        }
        let scale = 1.0 / self.world_size.max(1) as f32;
        self.host.iter_mut().for_each(|v| *v *= scale);
        let mut at = 0;
        tch::no_grad(|| -> Result<(), TchError> {
            for p in &self.experts {
                let n = p.numel();
                // Defined on every rank after a training step ([`ExpertParallel::experts`] ties the experts into
                // the graph even without local rows).
                let g = p.grad();
                if g.defined() {
                    crate::dist::write_into(&g, &self.host[at..at + n])?;
                }
                at += n;
            }
            Ok(())
        })?;
        self.steps += 1;
        Ok(())
    }

    /// The squares of the gradients the optimizer steps with (after [`ExpertState::reduce_gradients`] and the
    /// exchange of the rest), each value counted once over the world: the non-expert tensors' (every data-parallel
    /// rank holds them) over the data-parallel ranks, the experts' over their replicas, and each over the tensor
    /// group's ranks holding it whole; the gradients divided by `scale`.
    pub fn gradient_squares(&self, scale: f64) -> Result<f64, TchError> {
        let share = |i: usize| self.tensor_shares.0.get(i).copied().unwrap_or(1.0);
        let dense = crate::norms::squares(&self.dense, &|i| share(i) / self.world_size.max(1) as f64, scale)?;
        Ok(dense + self.expert_squares(scale)?)
    }

    /// Bytes of the experts' shards this rank trains.
    pub fn expert_bytes(&self) -> u64 {
        self.experts.iter().map(crate::lower::tensor_bytes).sum()
    }

    /// The experts' share of [`ExpertState::gradient_squares`] (alone beside ZeRO, whose shards hold the rest).
    pub fn expert_squares(&self, scale: f64) -> Result<f64, TchError> {
        let share = |i: usize| self.tensor_shares.1.get(i).copied().unwrap_or(1.0);
        crate::norms::squares(&self.experts, &|i| share(i) / self.replicas.size().max(1) as f64, scale)
    }

    /// Every trained tensor whole, in the order one rank holds them, from `params` (the optimizer's): the experts
    /// gathered over the expert-parallel group first (every tensor rank holds them whole), then the
    /// tensor-split ones over `model`'s tensor group. Every rank of both groups calls it.
    pub fn whole_weights(
        expert: Option<&ExpertState>,
        model: &Lowered,
        graph: &Graph,
        params: &[Tensor],
    ) -> Result<Vec<Tensor>, TchError> {
        let params = match expert {
            Some(e) => e.whole_parameters(model, graph)?,
            None => params.iter().map(Tensor::shallow_clone).collect(),
        };
        match model.tensor_parallel() {
            Some(tp) => tp.gather_weights(&params),
            None => Ok(params),
        }
    }

    /// Every trained tensor with the experts whole (each gathered over the expert-parallel group), in the order
    /// one rank holds them: what the weights' digest is taken over, so every rank digests the same model.
    pub fn whole_parameters(&self, model: &Lowered, graph: &Graph) -> Result<Vec<Tensor>, TchError> {
        Ok(self.whole_by_node(model, graph)?.into_iter().map(|(_, t)| t).collect())
    }

    /// [`ExpertState::whole_parameters`] with each tensor's node: what a pipeline stage sends rank 0 for the
    /// whole model's digest (every rank of the expert-parallel group gathers, in the same order).
    pub fn whole_by_node(&self, model: &Lowered, graph: &Graph) -> Result<Vec<(usize, Tensor)>, TchError> {
        let mut out = Vec::new();
        for (node, decl, t) in model.trained(graph) {
            let id = graph.nodes.iter().position(|o| std::ptr::eq(o, node)).unwrap_or(usize::MAX);
            let t = if is_expert_tensor(node, decl) { self.ep.group().all_gather(&t.f_detach()?, 0)? } else { t };
            out.push((id, t));
        }
        Ok(out)
    }

    /// What this rank's communication moved and took so far.
    pub fn traffic(&self) -> ExpertTraffic {
        let t = self.ep.group().traffic();
        ExpertTraffic {
            degree: self.ep.degree(),
            steps: self.steps,
            all_to_all_calls: t.all_to_all.0,
            all_to_all_bytes: 4 * t.all_to_all.1,
            all_to_all_s: t.all_to_all_nanos as f64 * 1e-9,
            expert_gradient_bytes: 4 * self.grad_values,
        }
    }
}
