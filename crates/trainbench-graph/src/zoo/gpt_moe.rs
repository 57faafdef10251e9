//! The mixture-of-experts side of the `gpt` family: `[model.moe]` checked field by field, and the
//! [`Op::Moe`] node of a layer that routes its tokens to experts.

use crate::graph::Op;
use crate::model::{FfnActivation, GptSpec, MoeSpec};

use super::common::ZooError;

fn moe_error(field: &str, message: String, hint: &str) -> ZooError {
    ZooError { path: vec!["moe".into(), field.into()], message, hint: Some(hint.into()) }
}

/// Check `[model.moe]` against the rest of the decoder; `Ok(None)` for a dense model.
pub(crate) fn check(s: &GptSpec) -> Result<Option<&MoeSpec>, ZooError> {
    let Some(m) = &s.moe else { return Ok(None) };
    if m.experts == 0 {
        return Err(moe_error(
            "experts",
            "experts = 0: a mixture needs at least one expert".into(),
            "set experts >= 1",
        ));
    }
    if m.top_k == 0 || m.top_k > m.experts {
        return Err(moe_error(
            "top_k",
            format!("top_k = {} must be between 1 and experts = {}", m.top_k, m.experts),
            "route each token to at least one and at most every expert",
        ));
    }
    if m.expert_ffn == 0 {
        return Err(moe_error("expert_ffn", "expert_ffn = 0: an expert needs an inner width".into(), "set it >= 1"));
    }
    if m.every == 0 {
        return Err(moe_error("every", "every = 0 names no layer".into(), "use 1 for every layer, 2 for every other"));
    }
    if m.first_dense >= s.layers {
        return Err(moe_error(
            "first_dense",
            format!("first_dense = {} leaves no mixture-of-experts layer among layers = {}", m.first_dense, s.layers),
            "lower first_dense below layers, or remove [model.moe]",
        ));
    }
    if let Some(c) = m.capacity_factor.filter(|c| !(c.is_finite() && *c > 0.0)) {
        return Err(moe_error(
            "capacity_factor",
            format!("capacity_factor = {c} must be above 0"),
            "use e.g. 1.25, or leave it out for dropless routing",
        ));
    }
    if !(m.aux_loss.is_finite() && m.aux_loss >= 0.0) {
        return Err(moe_error(
            "aux_loss",
            format!("aux_loss = {} must be at least 0", m.aux_loss),
            "use e.g. 0.01, or 0 for none",
        ));
    }
    if s.activation != FfnActivation::Swiglu {
        return Err(ZooError::field(
            "activation",
            "the experts of [model.moe] are SwiGLU feed-forwards, but activation = \"gelu\"".to_string(),
            Some("set activation = \"swiglu\""),
        ));
    }
    Ok(Some(m))
}

/// The [`Op::Moe`] of a mixture-of-experts layer of width `d_model`.
pub(crate) fn op(m: &MoeSpec, d_model: usize) -> Op {
    Op::Moe {
        features: d_model,
        experts: m.experts,
        top_k: m.top_k,
        expert_ffn: m.expert_ffn,
        shared_ffn: m.shared_experts * m.expert_ffn,
        router: m.router,
        capacity_factor: m.capacity_factor.map(|c| c as f32),
        aux_loss: m.aux_loss as f32,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "gpt_moe_tests.rs"]
mod tests;
