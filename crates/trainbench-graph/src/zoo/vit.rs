//! The Vision Transformer (Dosovitskiy et al.) as torchvision's `vit_b_16` builds it: `conv_proj` (a
//! patch-sized, patch-strided convolution with bias) flattened to a sequence of patches, the class token
//! prepended, learned positions added, pre-norm encoder layers (LayerNorm eps 1e-6, multi-head attention
//! with biases, GELU MLP), a final LayerNorm and the classification head on the class token. Each encoder
//! layer is a recomputable [`Block`](crate::graph::Block).
//!
//! With the defaults this is ViT-B/16 with 86,567,656 parameters (torchvision 0.2x).

use crate::builder::{ConvCfg, GraphBuilder, ShapeError};
use crate::graph::{Activation, Graph, InputKind, LossKind, NodeId};
use crate::model::VitSpec;

use super::common::{ZooError, at_least, dropout, probability};

/// LayerNorm epsilon of torchvision's ViT.
const EPS: f32 = 1e-6;

fn encoder_layer(b: &mut GraphBuilder, x: NodeId, s: &VitSpec) -> Result<NodeId, ShapeError> {
    let h = b.layer_norm("ln_1", x, EPS)?;
    let a = b.attention("self_attention", h, h, s.heads, false)?;
    let a = dropout(b, "dropout", a, s.dropout)?;
    let r = b.add_nodes("attn_residual", &[a, x])?;
    let h = b.layer_norm("ln_2", r, EPS)?;
    let h = b.linear("mlp.0", h, s.mlp_dim, true)?;
    let h = b.act("mlp.1", h, Activation::Gelu)?;
    let h = dropout(b, "mlp.2", h, s.dropout)?;
    let h = b.linear("mlp.3", h, s.hidden, true)?;
    let h = dropout(b, "mlp.4", h, s.dropout)?;
    b.add_nodes("mlp_residual", &[r, h])
}

/// Build the ViT classifier with its cross-entropy loss.
pub(crate) fn build(s: &VitSpec) -> Result<Graph, ZooError> {
    for (field, value) in [
        ("image_size", s.image_size),
        ("patch_size", s.patch_size),
        ("layers", s.layers),
        ("hidden", s.hidden),
        ("heads", s.heads),
        ("mlp_dim", s.mlp_dim),
        ("classes", s.classes),
    ] {
        at_least(field, value, 1)?;
    }
    probability("dropout", s.dropout)?;
    if s.image_size % s.patch_size != 0 {
        return Err(ZooError::field(
            "patch_size",
            format!("patch_size = {} does not divide image_size = {}", s.patch_size, s.image_size),
            Some("pick a patch size dividing the image size (16 for 224)"),
        ));
    }
    if s.hidden % s.heads != 0 {
        return Err(ZooError::field("heads", format!("heads = {} must divide hidden = {}", s.heads, s.hidden), None));
    }
    let side = s.image_size / s.patch_size;
    let patches = side * side;
    let mut b = GraphBuilder::new("vit");
    let image = b.input("image", &[3, s.image_size, s.image_size], InputKind::Dense)?;
    let labels = b.input("labels", &[], InputKind::Labels { classes: s.classes })?;
    let p = s.patch_size;
    let x = b.conv("conv_proj", image, ConvCfg::square(s.hidden, p, p, 0).with_bias(true))?;
    let x = b.reshape("patches", x, &[s.hidden, patches])?;
    let x = b.transpose("sequence", x, 0, 1)?;
    let x = b.class_token("class_token", x)?;
    b.push("encoder");
    let x = b.learned_positions("pos_embedding", x, patches + 1)?;
    let mut x = dropout(&mut b, "dropout", x, s.dropout)?;
    for i in 0..s.layers {
        b.push(format!("layers.encoder_layer_{i}"));
        b.begin_block("", x);
        x = encoder_layer(&mut b, x, s)?;
        b.end_block()?;
        b.pop();
    }
    let x = b.layer_norm("ln", x, EPS)?;
    b.pop();
    let cls = b.slice("class_output", x, 0, 0, 1)?;
    let cls = b.reshape("class_features", cls, &[s.hidden])?;
    let logits = b.linear("heads.head", cls, s.classes, true)?;
    b.loss("loss", LossKind::CrossEntropy, &[logits, labels])?;
    Ok(b.finish(1, "samples")?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::analysis::analyze;
    use crate::zoo::common::shape;

    #[test]
    fn vit_b_16_has_torchvisions_count_and_shapes() {
        let s: VitSpec = serde_json::from_str("{}").unwrap();
        let g = build(&s).unwrap();
        let a = analyze(&g);
        assert_eq!(a.parameters, 86_567_656);
        // torch.utils.flop_counter on torchvision's vit_b_16 (scripts/check_zoo.py).
        assert_eq!((a.flops.forward_per_sample, a.flops.train_per_sample), (35_127_656_448, 105_151_758_336));
        assert_eq!(shape(&g, "encoder.pos_embedding"), [197, 768]);
        assert_eq!(g.blocks.len(), 12);
        let e = build(&VitSpec { patch_size: 15, ..s }).unwrap_err();
        assert_eq!(e.path, ["patch_size"]);
    }
}
