//! The mixture-of-experts feed-forward ([`Op::Moe`]) on libtorch: the router (softmax or sigmoid, top-k, the
//! chosen weights normalised), the dispatch (assignments sorted by expert, each expert's beyond its capacity
//! dropped in token order), the experts' SwiGLU products, the combine (the experts' outputs weighted by the router
//! and added back at their tokens), the shared feed-forward, and the load-balancing loss.
//!
//! The experts run as one grouped matrix product per projection (`_grouped_mm` over the assignments sorted by
//! expert) where libtorch takes it, and as a loop over experts otherwise ([`ExpertKernel`]). The load-balancing
//! losses of a forward pass and the routing figures of a step are collected per thread ([`take_aux_losses`],
//! [`take_routing`]): the step adds the former to its loss and reports the latter.

use std::cell::RefCell;

use tch::{Kind, TchError, Tensor};
use trainbench_graph::graph::{MoeRouter, Node, Op};

/// How the experts' products run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpertKernel {
    /// One `_grouped_mm` per projection over every assignment, sorted by expert.
    Grouped,
    /// One product per expert and projection over the expert's assignments.
    Loop,
}

/// Routing figures of one mixture-of-experts layer's forward pass.
#[derive(Debug, Clone, PartialEq)]
pub struct Routing {
    /// Node name.
    pub layer: String,
    /// Assignments each expert took (after dropping).
    pub tokens_per_expert: Vec<u64>,
    /// Assignments dropped over capacity.
    pub dropped: u64,
    /// The load-balancing loss before its coefficient (1 for a perfectly balanced router).
    pub balance: f64,
    /// How the experts' products ran (the grouped product falls back to the loop where libtorch refuses it).
    pub kernel: ExpertKernel,
}

thread_local! {
    static AUX_LOSSES: RefCell<Vec<Tensor>> = const { RefCell::new(Vec::new()) };
    static ROUTING: RefCell<Vec<Routing>> = const { RefCell::new(Vec::new()) };
    static KERNEL: RefCell<ExpertKernel> = const { RefCell::new(ExpertKernel::Grouped) };
}

/// The load-balancing losses (coefficient applied) the forward passes on this thread recorded since the last
/// call; the step adds their sum to its loss.
pub fn take_aux_losses() -> Vec<Tensor> {
    AUX_LOSSES.with(|a| std::mem::take(&mut *a.borrow_mut()))
}

/// `loss` plus the load-balancing losses the forward passes on this thread recorded since the last call
/// (taken), added in the order they were recorded.
pub fn add_aux_losses(loss: Tensor) -> Result<Tensor, TchError> {
    take_aux_losses().iter().try_fold(loss, |total, aux| total.f_add(aux))
}

/// The sum of the load-balancing losses the forward passes on this thread recorded since the last call (taken);
/// `None` when there were none.
pub fn aux_loss_sum() -> Result<Option<Tensor>, TchError> {
    let mut losses = take_aux_losses().into_iter();
    let Some(first) = losses.next() else { return Ok(None) };
    losses.try_fold(first, |total, aux| total.f_add(&aux)).map(Some)
}

/// The routing figures the forward passes on this thread recorded since the last call.
pub fn take_routing() -> Vec<Routing> {
    ROUTING.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

/// Choose how the experts' products run on this thread (the grouped product by default).
pub fn set_expert_kernel(kernel: ExpertKernel) {
    KERNEL.with(|k| *k.borrow_mut() = kernel);
}

fn internal(node: &Node, what: &str) -> TchError {
    TchError::Kind(format!("internal: `{}` ({}): {what}", node.name, node.op.kind_name()))
}

/// `down(silu(x gate^T) * (x up^T))` of one expert, weights `[F, d]`, `[F, d]`, `[d, F]`.
fn swiglu(x: &Tensor, gate: &Tensor, up: &Tensor, down: &Tensor) -> Result<Tensor, TchError> {
    let h = x.f_linear(gate, None::<&Tensor>)?.f_silu()?.f_mul(&x.f_linear(up, None::<&Tensor>)?)?;
    h.f_linear(down, None::<&Tensor>)
}

/// The mixture-of-experts output of `x` `[B, .., d]`; `params` in `params::tensors` order.
pub fn forward(node: &Node, x: &Tensor, params: &[Tensor]) -> Result<Tensor, TchError> {
    let Op::Moe { features, experts, top_k, router, capacity_factor, aux_loss, shared_ffn, .. } = &node.op else {
        return Err(internal(node, "not a mixture-of-experts node"));
    };
    if params.len() < 4 || (*shared_ffn > 0 && params.len() < 7) {
        return Err(internal(node, "missing parameters"));
    }
    let (d, e, k) = (*features as i64, *experts as i64, *top_k as i64);
    let size = x.size();
    let flat = x.f_reshape([-1, d])?;
    // Router in fp32 (as Mixtral's and DeepSeek's reference code), weights back in the activations' type.
    let logits = flat.f_linear(&params[0], None::<&Tensor>)?.f_to_kind(Kind::Float)?;
    let scores = match router {
        MoeRouter::Softmax => logits.f_softmax(-1, Kind::Float)?,
        MoeRouter::Sigmoid => logits.f_sigmoid()?,
    };
    let (top, chosen) = scores.f_topk(k, -1, true, true)?;
    let weights = top.f_div(&top.f_sum_dim_intlist(-1, true, Kind::Float)?.f_clamp_min(1e-20)?)?.f_to_kind(x.kind())?;
    // Dispatch: assignments sorted by expert (stable: token order within an expert), counted per expert.
    let flat_expert = chosen.f_reshape([-1])?;
    let (_, order) = flat_expert.f_sort_stable(true, 0, false)?;
    let counts: Vec<i64> = Vec::<i64>::try_from(&flat_expert.f_bincount(None::<&Tensor>, e)?)?;
    // Capacity ceil(factor x assignments / experts), each expert's first assignments in token order kept; with
    // expert parallelism over the global batch (`expert_parallel::keep`).
    let ep = crate::expert_parallel::current();
    let routed = crate::expert_parallel::keep(ep.as_ref(), &counts, *capacity_factor)?;
    let kept = routed.kept;
    let dropped: i64 = counts.iter().zip(&kept).map(|(c, k)| c - k).sum();
    // The kept assignments' positions in `order`: the first `kept[e]` of each expert's run.
    let order = if dropped > 0 {
        let mut keep_idx = Vec::with_capacity(kept.iter().sum::<i64>() as usize);
        let mut start = 0;
        for (c, k) in counts.iter().zip(&kept) {
            keep_idx.extend(start..start + k);
            start += c;
        }
        order.f_index_select(0, &Tensor::f_from_slice(&keep_idx)?.f_to_device(x.device())?)?
    } else {
        order
    };
    let token = order.f_div_scalar_mode(k, "floor")?;
    let gathered = flat.f_index_select(0, &token)?;
    let (expert_out, kernel) = match &ep {
        Some(ep) => ep.experts(&gathered, &kept, params, run_experts)?,
        None => run_experts(&gathered, &kept, params)?,
    };
    // Combine: each output weighted by its router weight, added back at its token.
    let w = weights.f_reshape([-1])?.f_index_select(0, &order)?.f_unsqueeze(1)?;
    let mut out = flat.f_zeros_like()?.f_index_add(0, &token, &expert_out.f_mul(&w)?)?;
    if *shared_ffn > 0 {
        out = out.f_add(&swiglu(&flat, &params[4], &params[5], &params[6])?)?;
    }
    // Switch Transformer's balance: experts x sum_e (share of the assignments) x (mean router probability).
    let probs = match router {
        MoeRouter::Softmax => scores.shallow_clone(),
        MoeRouter::Sigmoid => scores.f_div(&scores.f_sum_dim_intlist(-1, true, Kind::Float)?)?,
    };
    let assignments = routed.counts.iter().sum::<i64>().max(1);
    let share = Tensor::f_from_slice(&routed.counts)?
        .f_to_device(x.device())?
        .f_to_kind(Kind::Float)?
        .f_div_scalar(assignments as f64)?;
    let balance = probs.f_mean_dim(0, false, Kind::Float)?.f_mul(&share)?.f_sum(Kind::Float)?.f_mul_scalar(e as f64)?;
    if *aux_loss > 0.0 && out.requires_grad() {
        let aux = balance.f_mul_scalar(f64::from(*aux_loss))?;
        AUX_LOSSES.with(|a| a.borrow_mut().push(aux));
    }
    // The load recorded: the global batch's with expert parallelism (every rank's counts are known), else this
    // rank's own tokens'.
    let (load, dropped) = match &routed.global_kept {
        Some(g) => (g.clone(), routed.counts.iter().sum::<i64>() - g.iter().sum::<i64>()),
        None => (kept.clone(), dropped),
    };
    let record = Routing {
        layer: node.name.clone(),
        tokens_per_expert: load.iter().map(|&c| c.max(0) as u64).collect(),
        dropped: dropped.max(0) as u64,
        balance: balance.f_double_value(&[])?,
        kernel,
    };
    ROUTING.with(|r| r.borrow_mut().push(record));
    out.f_reshape(size)
}

/// The experts over `gathered` (assignments sorted by expert, `kept[e]` rows each, `params` the experts' tensors
/// in `params::tensors` order), as this thread's kernel says; the grouped product falls back to the loop.
fn run_experts(gathered: &Tensor, kept: &[i64], params: &[Tensor]) -> Result<(Tensor, ExpertKernel), TchError> {
    Ok(match KERNEL.with(|k| *k.borrow()) {
        ExpertKernel::Grouped => match grouped(gathered, kept, params) {
            Ok(y) => (y, ExpertKernel::Grouped),
            Err(_) => (looped(gathered, kept, params)?, ExpertKernel::Loop),
        },
        ExpertKernel::Loop => (looped(gathered, kept, params)?, ExpertKernel::Loop),
    })
}

/// The experts over `gathered` (assignments sorted by expert, `kept[e]` rows each) as a loop over experts.
fn looped(gathered: &Tensor, kept: &[i64], params: &[Tensor]) -> Result<Tensor, TchError> {
    let mut parts = Vec::with_capacity(kept.len());
    let mut start = 0;
    for (e, &rows) in kept.iter().enumerate() {
        if rows == 0 {
            continue;
        }
        let x = gathered.f_narrow(0, start, rows)?;
        let idx = e as i64;
        parts.push(swiglu(
            &x,
            &params[1].f_select(0, idx)?,
            &params[2].f_select(0, idx)?,
            &params[3].f_select(0, idx)?,
        )?);
        start += rows;
    }
    if parts.is_empty() {
        return gathered.f_zeros_like();
    }
    Tensor::f_cat(&parts, 0)
}

/// The experts over `gathered` as three grouped products (`_grouped_mm`, offsets the cumulative `kept`).
fn grouped(gathered: &Tensor, kept: &[i64], params: &[Tensor]) -> Result<Tensor, TchError> {
    let mut ends = Vec::with_capacity(kept.len());
    let mut total = 0i32;
    for &rows in kept {
        total += rows as i32;
        ends.push(total);
    }
    let offs = Tensor::f_from_slice(&ends)?.f_to_device(gathered.device())?;
    // Weights `[E, F, d]` as `[E, d, F]` for `x W^T`; the down projection `[E, d, F]` as `[E, F, d]`.
    let mm = |x: &Tensor, w: &Tensor| x.f_internal_grouped_mm(&w.f_transpose(1, 2)?, Some(&offs), None, None::<Kind>);
    let h = mm(gathered, &params[1])?.f_silu()?.f_mul(&mm(gathered, &params[2])?)?;
    mm(&h, &params[3])
}
