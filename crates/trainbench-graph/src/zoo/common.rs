//! What every zoo family shares: the error located in `[model]` ([`ZooError`]), the checks of hyper-parameters
//! ([`at_least`], [`probability`]) and two building blocks ([`dropout`], [`conv_bn_relu`]).

use crate::builder::{ConvCfg, GraphBuilder, ShapeError};
use crate::graph::{Activation, NodeId};

/// Why a model could not be built, located in the `[model]` table.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ZooError {
    /// Path inside `[model]` of the offending field, e.g. `["layers", "3", "in_features"]`; empty = the table.
    pub path: Vec<String>,
    /// What is wrong, with both sizes when two disagree.
    pub message: String,
    /// How to fix it, when there is an obvious fix.
    pub hint: Option<String>,
}

impl ZooError {
    /// An error at one field of `[model]`.
    pub(crate) fn field(field: &str, message: impl Into<String>, hint: Option<&str>) -> Self {
        Self { path: vec![field.to_string()], message: message.into(), hint: hint.map(str::to_string) }
    }
}

impl From<ShapeError> for ZooError {
    fn from(e: ShapeError) -> Self {
        Self { path: Vec::new(), message: e.to_string(), hint: None }
    }
}

/// Require `value >= min` for a field.
pub(crate) fn at_least(field: &str, value: usize, min: usize) -> Result<(), ZooError> {
    if value < min {
        return Err(ZooError::field(field, format!("`{field}` = {value} must be at least {min}"), None));
    }
    Ok(())
}

/// Require a dropout probability in [0, 1).
pub(crate) fn probability(field: &str, p: f64) -> Result<(), ZooError> {
    if !(0.0..1.0).contains(&p) {
        return Err(ZooError::field(field, format!("`{field}` = {p} must be in [0, 1)"), None));
    }
    Ok(())
}

/// A dropout layer where `p > 0`; with `p = 0` no node at all (the input is returned), so a model trained
/// without dropout carries no identity layers.
pub(crate) fn dropout(b: &mut GraphBuilder, name: &str, x: NodeId, p: f64) -> Result<NodeId, ShapeError> {
    if p > 0.0 { b.dropout(name, x, p) } else { Ok(x) }
}

/// Conv (no bias) + batch norm + ReLU, the CNN building block; returns the ReLU node.
pub(crate) fn conv_bn_relu(
    b: &mut GraphBuilder,
    name: &str,
    x: NodeId,
    cfg: ConvCfg,
    eps: f32,
) -> Result<NodeId, ShapeError> {
    b.push(name);
    let c = b.conv("conv", x, cfg)?;
    let n = b.batch_norm_eps("bn", c, eps)?;
    let r = b.act("relu", n, Activation::Relu)?;
    b.pop();
    Ok(r)
}

/// Output shape of the named node (for the per-family tests).
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) fn shape(g: &crate::graph::Graph, name: &str) -> Vec<usize> {
    g.node(name).unwrap_or_else(|| panic!("no node `{name}`")).shape.0.clone()
}
