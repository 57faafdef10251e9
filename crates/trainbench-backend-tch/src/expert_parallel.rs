//! Expert parallelism on libtorch: a mixture-of-experts layer whose experts are sharded over an expert-parallel
//! group ([`ExpertParallel`]). Every rank routes its own tokens; the assignments, sorted by expert, go to the
//! rank holding their expert with a differentiable all-to-all (after the counts are exchanged), the local experts
//! run as on one rank (grouped product or loop), and the outputs come back with the reverse all-to-all, in the
//! order they left, for the combine. Gradients follow the same path backwards.
//!
//! Equivalence with one rank on the same global batch (each rank holding its contiguous slice of it, in rank
//! order, as data parallelism deals it):
//! - **Capacity** is the global batch's: every rank's per-expert counts are gathered over the world, the
//!   capacity is `ceil(capacity_factor x global assignments / experts)` as one rank computes it, and rank `r`
//!   keeps, of expert `e`'s assignments, what is left of the capacity after ranks `0..r` (in token order within
//!   the rank). The assignments one rank keeps are the first `capacity` of each expert in token order, so the
//!   same assignments are dropped.
//! - **Balance loss**: each expert's share of the assignments is the global batch's (the same gather), the mean
//!   router probability the rank's own; averaged over the ranks, as data parallelism averages gradients, it is
//!   one rank's loss and gradient.
//! - **Gradients**: the non-expert tensors' are averaged over the world by the data-parallel exchange; an expert
//!   receives, through the backward all-to-all, every token of its group's ranks, so its gradient is summed over
//!   the ranks holding the same expert and divided by the world size (`expert_state::ExpertState`).
//! - **Weights**: every rank initialises every expert exactly as one rank does and keeps its shard
//!   (`expert_state::ExpertState::shard`).

use std::cell::RefCell;
use std::ops::Range;

use tch::{TchError, Tensor};
use trainbench_comm::ExpertGroups;

use crate::diff_op::Group;

/// This rank's place in an expert-parallel run: its expert-parallel group, the world (for global counts) and
/// the degree. Installed for the thread that runs the forward pass ([`install`]).
#[derive(Clone)]
pub struct ExpertParallel {
    experts: Group,
    world: Group,
}

thread_local! {
    static CURRENT: RefCell<Option<ExpertParallel>> = const { RefCell::new(None) };
}

/// Removes the installed [`ExpertParallel`] when dropped.
pub struct Installed(());

impl Drop for Installed {
    fn drop(&mut self) {
        CURRENT.with(|c| *c.borrow_mut() = None);
    }
}

/// Make `ep` the expert parallelism of the mixture-of-experts layers this thread runs, until the guard drops.
pub fn install(ep: ExpertParallel) -> Installed {
    CURRENT.with(|c| *c.borrow_mut() = Some(ep));
    Installed(())
}

/// The expert parallelism installed on this thread, if any.
pub fn current() -> Option<ExpertParallel> {
    CURRENT.with(|c| c.borrow().clone())
}

/// The assignments each expert keeps (`kept`, of this rank's tokens) and each expert's count over the batch the
/// balance loss is computed on (`counts` of the global batch with expert parallelism, this rank's without).
pub struct Kept {
    /// Assignments of this rank's tokens each expert keeps.
    pub kept: Vec<i64>,
    /// Each expert's assignments (before dropping) over the batch the capacity and balance are defined on.
    pub counts: Vec<i64>,
    /// With expert parallelism, what each expert keeps of the global batch (every rank's kept assignments
    /// summed): the layer's load as one rank of the whole batch sees it. `None` without.
    pub global_kept: Option<Vec<i64>>,
}

/// The capacity of `assignments` spread over `experts` at `factor`: `ceil(factor x assignments / experts)`.
fn capacity(factor: f32, assignments: i64, experts: usize) -> i64 {
    ((f64::from(factor) * assignments as f64) / experts.max(1) as f64).ceil() as i64
}

/// What each expert keeps of this rank's `counts` (assignments per expert) at `capacity_factor` (`None`:
/// dropless): with `ep`, of the global batch (see the module documentation; the counts are gathered even when
/// dropless: the balance loss and the recorded load are the global batch's), and the global batch's load;
/// without, of these tokens alone.
pub fn keep(ep: Option<&ExpertParallel>, counts: &[i64], capacity_factor: Option<f32>) -> Result<Kept, TchError> {
    let e = counts.len();
    let Some(ep) = ep else {
        let cap = capacity_factor.map(|f| capacity(f, counts.iter().sum(), e));
        let kept = counts.iter().map(|&c| cap.map_or(c, |cap| c.min(cap))).collect();
        return Ok(Kept { kept, counts: counts.to_vec(), global_kept: None });
    };
    let mine: Vec<usize> = counts.iter().map(|&c| c.max(0) as usize).collect();
    let all = ep.world.gather_counts(&mine)?;
    let ranks = ep.world.size();
    let at = |r: usize, x: usize| all[r * e + x] as i64;
    let global: Vec<i64> = (0..e).map(|x| (0..ranks).map(|r| at(r, x)).sum()).collect();
    let (kept, global_kept) = match capacity_factor {
        None => (counts.to_vec(), global.clone()),
        Some(f) => {
            let cap = capacity(f, global.iter().sum(), e);
            let kept = (0..e)
                .map(|x| {
                    let before: i64 = (0..ep.world.rank()).map(|r| at(r, x)).sum();
                    counts[x].min((cap - before).max(0))
                })
                .collect();
            // The ranks keep in rank order until the capacity is spent: the whole batch keeps the capacity.
            (kept, global.iter().map(|&g| g.min(cap)).collect())
        }
    };
    Ok(Kept { kept, counts: global, global_kept: Some(global_kept) })
}

impl ExpertParallel {
    /// Expert parallelism over `experts` (this rank's expert-parallel group) within `world` (every rank).
    pub fn new(experts: Group, world: Group) -> ExpertParallel {
        ExpertParallel { experts, world }
    }

    /// The expert-parallel group (its traffic is the all-to-alls').
    pub fn group(&self) -> &Group {
        &self.experts
    }

    /// Ranks in the expert-parallel group.
    pub fn degree(&self) -> usize {
        self.experts.size()
    }

    /// The experts of `total` this rank holds.
    pub fn held(&self, total: usize) -> Range<usize> {
        ExpertGroups::held(total, self.degree(), self.experts.rank())
    }

    /// The experts' outputs for `gathered` (this rank's kept assignments, sorted by expert, `kept[e]` rows for
    /// each of all the experts), computed where the experts are: each rank's rows sent to the rank holding their
    /// experts, the local experts run by `compute` on the rows regrouped by expert (`params` this rank's shards),
    /// and the outputs sent back, in `gathered`'s order.
    pub fn experts<K>(
        &self,
        gathered: &Tensor,
        kept: &[i64],
        params: &[Tensor],
        compute: impl Fn(&Tensor, &[i64], &[Tensor]) -> Result<(Tensor, K), TchError>,
    ) -> Result<(Tensor, K), TchError> {
        let p = self.degree();
        let m = kept.len() / p.max(1);
        let kept: Vec<usize> = kept.iter().map(|&c| c.max(0) as usize).collect();
        let send_rows: Vec<usize> = (0..p).map(|r| kept[r * m..(r + 1) * m].iter().sum()).collect();
        // What every rank sends to each of this rank's experts: [source rank][local expert].
        let incoming = self.experts.exchange_counts(&kept, m)?;
        let recv_rows: Vec<usize> = (0..p).map(|s| incoming[s * m..(s + 1) * m].iter().sum()).collect();
        let received = self.experts.all_to_all_diff(gathered, &send_rows, &recv_rows)?;
        // Received rows come by source rank, then expert; the experts want them by expert, then source rank.
        let mut start = Vec::with_capacity(p * m);
        let mut at = 0i64;
        for &c in &incoming {
            start.push(at);
            at += c as i64;
        }
        let mut order: Vec<i64> = Vec::with_capacity(at as usize);
        let mut local = vec![0i64; m];
        for (j, rows) in local.iter_mut().enumerate() {
            for s in 0..p {
                let (first, c) = (start[s * m + j], incoming[s * m + j] as i64);
                order.extend(first..first + c);
                *rows += c;
            }
        }
        let mut inverse = vec![0i64; order.len()];
        for (i, &o) in order.iter().enumerate() {
            inverse[o as usize] = i as i64;
        }
        let device = gathered.device();
        let index = |v: &[i64]| Tensor::f_from_slice(v).and_then(|t| t.f_to_device(device));
        let by_expert = received.f_index_select(0, &index(&order)?)?;
        let (mut out, kernel) = compute(&by_expert, &local, params)?;
        if !out.requires_grad() && by_expert.requires_grad() {
            // No local rows: the output must still hand a gradient back (or this rank would skip the backward
            // all-to-all its peers wait in), and the experts get a (zero) gradient to sum with their replicas'.
            let mut tie = by_expert.f_sum(by_expert.kind())?;
            for p in params.iter().skip(1).take(3) {
                tie = tie.f_add(&p.f_sum(p.kind())?)?;
            }
            out = out.f_add(&tie.f_mul_scalar(0.0)?)?;
        }
        let back = out.f_index_select(0, &index(&inverse)?)?;
        let returned = self.experts.all_to_all_diff(&back, &recv_rows, &send_rows)?;
        Ok((returned, kernel))
    }
}
