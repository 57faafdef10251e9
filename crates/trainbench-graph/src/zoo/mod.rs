//! The model zoo: builds the workload graph of each `[model]` family, one file per family.
//!
//! Every builder validates its hyper-parameters first (errors located at the field of `[model]`), then
//! builds the graph through [`crate::builder::GraphBuilder`], whose shape errors become [`ZooError`]s on the whole table.

mod a3c;
mod bert;
mod common;
mod custom;
mod deepspeech2;
mod dlrm;
mod faster_rcnn;
mod gpt;
mod gpt_moe;
mod inception;
mod mlp;
mod ncf;
mod resnet;
mod seq2seq;
mod transformer;
mod vit;
mod wgan_gp;

pub use common::ZooError;

use crate::graph::Graph;
use crate::model::ModelSpec;

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
