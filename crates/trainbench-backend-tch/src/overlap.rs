//! The data-parallel exchange overlapped with the backward pass in the tch backend: a hook after each trained
//! tensor's gradient is accumulated ([`GradReady`]) counts down its bucket, and a complete bucket's gradients
//! are staged in host memory and handed to the communication thread ([`trainbench_comm::exchange_during`])
//! while the backward pass goes on. ZeRO-2 drops a bucket's full gradients as soon as they are staged.

use tch::{TchError, Tensor};
use trainbench_comm::{BucketFeed, Layout, OverlapError, Overlapped, Unit, exchange_during};
use trainbench_graph::graph::Graph;

use crate::autograd::GradReady;
use crate::lower::grad_bytes;

/// Run `backward` with the exchange of `x`'s buckets overlapped: `params` are the trained tensors in layout
/// order; a bucket holding a `late` tensor (one whose gradient arrives in more than one backward call: a
/// weight tied across the checkpointed blocks' replays) and a bucket some tensor of which got no gradient are
/// staged after the backward pass; `drop_staged` frees each bucket's gradients once staged (ZeRO-2);
/// `grads_peak` notes the most gradient bytes held at once. A tensor whose gradient arrives again after its
/// bucket went is an error, never a wrong exchange.
pub fn backward_overlapped(
    x: &mut dyn Overlapped,
    params: &[Tensor],
    late: &[bool],
    drop_staged: bool,
    grads_peak: &mut u64,
    backward: &mut dyn FnMut() -> Result<(), TchError>,
) -> Result<(), TchError> {
    let buckets: Vec<Unit> = x.buckets().to_vec();
    let mut bucket_of = vec![0usize; params.len()];
    for (b, unit) in buckets.iter().enumerate() {
        for &i in &unit.tensors {
            bucket_of[i] = b;
        }
    }
    let mut inner: Option<TchError> = None;
    let exchanged = exchange_during(x, &mut |feed: &mut BucketFeed| {
        let mut remaining: Vec<usize> = buckets
            .iter()
            .map(|u| if u.tensors.iter().any(|&i| late[i]) { usize::MAX } else { u.tensors.len() })
            .collect();
        let mut fired = vec![false; params.len()];
        let mut staging: Option<TchError> = None;
        let mut send = |feed: &mut BucketFeed, b: usize| -> Result<(), TchError> {
            let values = stage(&buckets[b], params)?;
            *grads_peak = (*grads_peak).max(grad_bytes(params));
            if drop_staged {
                let mine: Vec<Tensor> = buckets[b].tensors.iter().map(|&i| params[i].shallow_clone()).collect();
                crate::fused::grads_to_none(&mine)?;
            }
            feed.send(b, values).map_err(|e| TchError::Kind(e.to_string()))
        };
        {
            let ready = |i: usize| {
                if staging.is_some() {
                    return;
                }
                let b = bucket_of[i];
                if std::mem::replace(&mut fired[i], true) && remaining[b] != usize::MAX {
                    staging = Some(TchError::Kind(format!(
                        "the gradient of trained tensor {i} arrived twice in one backward pass, after its bucket \
                         was exchanged; set `topology.overlap = false`"
                    )));
                    return;
                }
                if remaining[b] == usize::MAX {
                    return;
                }
                remaining[b] -= 1;
                if remaining[b] == 0 {
                    if let Err(e) = send(feed, b) {
                        staging = Some(e);
                    }
                }
            };
            let hooks = GradReady::install(params, ready).map_err(|e| OverlapError::Backward(e.to_string()))?;
            let ran = backward();
            drop(hooks);
            if let Err(e) = ran {
                inner = Some(e);
                return Err(OverlapError::Backward("the backward pass failed".into()));
            }
        }
        if let Some(e) = staging {
            return Err(OverlapError::Backward(format!("staging a gradient bucket: {e}")));
        }
        // The buckets the hooks could not send (late tensors, tensors without a gradient), in order.
        for b in feed.unsent() {
            send(feed, b).map_err(|e| OverlapError::Backward(format!("staging a gradient bucket: {e}")))?;
        }
        Ok(())
    });
    match (exchanged, inner) {
        (_, Some(e)) => Err(e),
        (Ok(()), None) => Ok(()),
        (Err(e), None) => Err(TchError::Kind(format!("data-parallel exchange: {e}"))),
    }
}

/// The trained tensors ([`Layout`] order) whose gradient may arrive in more than one backward call of a step:
/// with activation checkpointing (`recomputes`), a weight tied to another node's (the two uses are
/// backpropagated in different calls).
pub fn late_tensors(graph: &Graph, layout: &Layout, recomputes: bool) -> Vec<bool> {
    let mut tied_owner = vec![false; graph.nodes.len()];
    for node in &graph.nodes {
        if let Some(to) = node.tied_to {
            tied_owner[to] = true;
        }
    }
    layout.nodes.iter().map(|&n| recomputes && tied_owner[n]).collect()
}

/// Bucket `unit`'s accumulated gradients, flat in host memory (zeros for a tensor that got none).
fn stage(unit: &Unit, params: &[Tensor]) -> Result<Vec<f32>, TchError> {
    let mut out = vec![0f32; unit.len];
    crate::dist::stage_grads(unit.tensors.iter().map(|&i| &params[i]), &mut out)?;
    Ok(out)
}
