//! The model zoo: builds the workload graph of each `[model]` family, one file per family.
//!
//! Every builder validates its hyper-parameters first (errors located at the field of `[model]`), then
//! builds the graph through [`GraphBuilder`], whose shape errors become [`ZooError`]s on the whole table.

mod a3c;
mod bert;
mod custom;
mod deepspeech2;
mod dlrm;
mod faster_rcnn;
mod gpt;
mod inception;
mod mlp;
mod ncf;
mod resnet;
mod seq2seq;
mod transformer;
mod vit;
mod wgan_gp;

use crate::builder::{GraphBuilder, ShapeError};
use crate::graph::{Graph, NodeId};
use crate::model::ModelSpec;

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

/// Build the training graph of a model.
pub fn build(model: &ModelSpec) -> Result<Graph, ZooError> {
    match model {
        ModelSpec::Resnet(s) => resnet::build(s),
        ModelSpec::InceptionV3(s) => inception::build(s),
        ModelSpec::Seq2seq(s) => seq2seq::build(s),
        ModelSpec::Transformer(s) => transformer::build(s),
        ModelSpec::DeepSpeech2(s) => deepspeech2::build(s),
        ModelSpec::FasterRcnn(s) => faster_rcnn::build(s),
        ModelSpec::WganGp(s) => wgan_gp::build(s),
        ModelSpec::A3c(s) => a3c::build(s),
        ModelSpec::Ncf(s) => ncf::build(s),
        ModelSpec::Bert(s) => bert::build(s),
        ModelSpec::Gpt(s) => gpt::build(s),
        ModelSpec::Vit(s) => vit::build(s),
        ModelSpec::Dlrm(s) => dlrm::build(s),
        ModelSpec::Mlp(s) => mlp::build(s),
        ModelSpec::Custom(s) => custom::build(s),
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
    cfg: crate::builder::ConvCfg,
    eps: f32,
) -> Result<NodeId, ShapeError> {
    b.push(name);
    let c = b.conv("conv", x, cfg)?;
    let n = b.batch_norm_eps("bn", c, eps)?;
    let r = b.act("relu", n, crate::graph::Activation::Relu)?;
    b.pop();
    Ok(r)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod testing {
    //! Helpers shared by the per-family tests.
    use crate::graph::Graph;

    /// Output shape of the named node.
    pub fn shape(g: &Graph, name: &str) -> Vec<usize> {
        g.node(name).unwrap_or_else(|| panic!("no node `{name}`")).shape.0.clone()
    }
}
