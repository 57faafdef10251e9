//! Neural collaborative filtering, NeuMF (He et al. 2017) as in MLPerf's reference: a GMF branch
//! (element-wise product of user and item embeddings of width `factors`) and an MLP branch (concatenated
//! user and item embeddings of width `mlp_layers[0] / 2`, then Linear + ReLU to each further width),
//! concatenated into one Linear to a logit, trained with binary cross-entropy against a 0/1 target.

use crate::builder::GraphBuilder;
use crate::graph::{Activation, Graph, InputKind, LossKind};
use crate::model::NcfSpec;

use super::common::{ZooError, at_least};

/// Build NeuMF with its binary cross-entropy loss.
pub(crate) fn build(s: &NcfSpec) -> Result<Graph, ZooError> {
    at_least("users", s.users, 1)?;
    at_least("items", s.items, 1)?;
    at_least("factors", s.factors, 1)?;
    match s.mlp_layers.first() {
        Some(&w) if w >= 2 && w % 2 == 0 => {}
        _ => {
            return Err(ZooError::field(
                "mlp_layers",
                format!("mlp_layers = {:?} must start with an even width of at least 2", s.mlp_layers),
                Some("e.g. mlp_layers = [256, 256, 128, 64]"),
            ));
        }
    }
    if let Some(i) = s.mlp_layers.iter().position(|&w| w == 0) {
        return Err(ZooError {
            path: vec!["mlp_layers".into(), i.to_string()],
            message: "a layer width is 0".into(),
            hint: None,
        });
    }
    let mut b = GraphBuilder::new("ncf");
    let user = b.input("user", &[], InputKind::Tokens { vocab: s.users })?;
    let item = b.input("item", &[], InputKind::Tokens { vocab: s.items })?;
    let target = b.input("target", &[1], InputKind::Dense)?;
    let gu = b.embedding("mf_user_embed", user, s.users, s.factors)?;
    let gi = b.embedding("mf_item_embed", item, s.items, s.factors)?;
    let gmf = b.mul("gmf", &[gu, gi])?;
    let half = s.mlp_layers[0] / 2;
    let mu = b.embedding("mlp_user_embed", user, s.users, half)?;
    let mi = b.embedding("mlp_item_embed", item, s.items, half)?;
    let mut m = b.concat("mlp_concat", &[mu, mi], 0)?;
    for (i, &w) in s.mlp_layers.iter().enumerate().skip(1) {
        m = b.linear(&format!("mlp.{}", i - 1), m, w, true)?;
        m = b.act(&format!("mlp.{}.relu", i - 1), m, Activation::Relu)?;
    }
    let cat = b.concat("neumf_concat", &[gmf, m], 0)?;
    let logit = b.linear("final", cat, 1, true)?;
    b.loss("loss", LossKind::BceWithLogits, &[logit, target])?;
    Ok(b.finish(1, "samples")?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::zoo::common::shape;

    #[test]
    fn shapes() {
        let s = NcfSpec { users: 1000, items: 500, factors: 64, mlp_layers: vec![256, 256, 128, 64] };
        let g = build(&s).unwrap();
        assert_eq!(shape(&g, "mlp_concat"), [256]);
        assert_eq!(shape(&g, "neumf_concat"), [128]);
        assert_eq!(shape(&g, "final"), [1]);
        let e = build(&NcfSpec { mlp_layers: vec![255], ..s }).unwrap_err();
        assert_eq!(e.path, ["mlp_layers"]);
    }
}
