//! The data-parallel exchange overlapped with the backward pass in the tch backend: a hook after each trained
//! tensor's gradient is accumulated ([`GradReady`]) counts down its bucket, and a complete bucket's gradients
//! are staged in host memory and handed to the communication thread ([`trainbench_comm::exchange_during`])
//! while the backward pass goes on. ZeRO-2 drops a bucket's full gradients as soon as they are staged.

use tch::{Device, Kind, TchError, Tensor};
use trainbench_comm::{BucketFeed, OverlapError, Overlapped, Unit, exchange_during};

use crate::autograd::GradReady;
use crate::lower::tensor_bytes;

/// Run `backward` with the exchange of `x`'s buckets overlapped: `params` are the trained tensors in layout
/// order; `drop_staged` frees each bucket's gradients once staged (ZeRO-2); `grads_peak` notes the most
/// gradient bytes held at once. Returns the seconds the collectives took.
pub fn backward_overlapped(
    x: &mut dyn Overlapped,
    params: &[Tensor],
    drop_staged: bool,
    grads_peak: &mut u64,
    backward: &mut dyn FnMut() -> Result<(), TchError>,
) -> Result<f64, TchError> {
    let buckets: Vec<Unit> = x.buckets().to_vec();
    let mut bucket_of = vec![0usize; params.len()];
    for (b, unit) in buckets.iter().enumerate() {
        for &i in &unit.tensors {
            bucket_of[i] = b;
        }
    }
    let mut inner: Option<TchError> = None;
    let times = exchange_during(x, &mut |feed: &mut BucketFeed| {
        let mut remaining: Vec<usize> = buckets.iter().map(|u| u.tensors.len()).collect();
        let mut staging: Option<TchError> = None;
        let ready = |i: usize| {
            let b = bucket_of[i];
            remaining[b] = remaining[b].saturating_sub(1);
            if remaining[b] > 0 || staging.is_some() {
                return;
            }
            let sent = stage(&buckets[b], params).and_then(|values| {
                *grads_peak = (*grads_peak).max(held(params));
                if drop_staged {
                    let mine: Vec<Tensor> = buckets[b].tensors.iter().map(|&i| params[i].shallow_clone()).collect();
                    crate::fused::grads_to_none(&mine)?;
                }
                feed.send(b, values).map_err(|e| TchError::Kind(e.to_string()))
            });
            if let Err(e) = sent {
                staging = Some(e);
            }
        };
        let hooks = GradReady::install(params, ready).map_err(|e| OverlapError::Backward(e.to_string()))?;
        let ran = backward();
        drop(hooks);
        if let Err(e) = ran {
            inner = Some(e);
            return Err(OverlapError::Backward("the backward pass failed".into()));
        }
        match staging {
            Some(e) => Err(OverlapError::Backward(format!("staging a gradient bucket: {e}"))),
            None => Ok(()),
        }
    });
    match (times, inner) {
        (_, Some(e)) => Err(e),
        (Ok(t), None) => Ok(t.busy_s),
        (Err(e), None) => Err(TchError::Kind(format!("data-parallel exchange: {e}"))),
    }
}

/// Bucket `unit`'s accumulated gradients, flat in host memory (zeros for a tensor that got none).
fn stage(unit: &Unit, params: &[Tensor]) -> Result<Vec<f32>, TchError> {
    let mut out = vec![0f32; unit.len];
    let mut at = 0;
    for &i in &unit.tensors {
        let p = &params[i];
        let n = p.numel();
        let g = p.grad();
        if g.defined() {
            let host = g.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?.f_contiguous()?;
            host.f_copy_data(&mut out[at..at + n], n)?;
        }
        at += n;
    }
    Ok(out)
}

fn held(params: &[Tensor]) -> u64 {
    params.iter().map(Tensor::grad).filter(Tensor::defined).map(|g| tensor_bytes(&g)).sum()
}
