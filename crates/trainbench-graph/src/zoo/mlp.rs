//! Multi-layer perceptron classifier: Linear + ReLU per hidden width, a Linear to the classes, cross-entropy.

use crate::builder::GraphBuilder;
use crate::graph::{Activation, Graph, InputKind, LossKind};
use crate::model::MlpSpec;

use super::common::{ZooError, at_least};

/// Build the MLP with its cross-entropy loss.
pub(crate) fn build(s: &MlpSpec) -> Result<Graph, ZooError> {
    at_least("inputs", s.inputs, 1)?;
    at_least("classes", s.classes, 1)?;
    if let Some(i) = s.hidden.iter().position(|&w| w == 0) {
        return Err(ZooError {
            path: vec!["hidden".into(), i.to_string()],
            message: "a hidden width is 0".into(),
            hint: None,
        });
    }
    let mut b = GraphBuilder::new("mlp");
    let mut x = b.input("input", &[s.inputs], InputKind::Dense)?;
    let labels = b.input("labels", &[], InputKind::Labels { classes: s.classes })?;
    for (i, &w) in s.hidden.iter().enumerate() {
        x = b.linear(&format!("fc{i}"), x, w, true)?;
        x = b.act(&format!("relu{i}"), x, Activation::Relu)?;
    }
    let logits = b.linear("out", x, s.classes, true)?;
    b.loss("loss", LossKind::CrossEntropy, &[logits, labels])?;
    Ok(b.finish(1, "samples")?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::zoo::common::shape;

    #[test]
    fn shapes() {
        let g = build(&MlpSpec { inputs: 784, hidden: vec![512, 256], classes: 10 }).unwrap();
        assert_eq!(shape(&g, "relu1"), [256]);
        assert_eq!(shape(&g, "out"), [10]);
    }
}
