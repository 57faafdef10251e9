//! Inception-v3 exactly as torchvision's `inception_v3` (conv without bias, batch norm eps 0.001, optional
//! auxiliary classifier trained with weight 0.4). Node names follow torchvision's module names.

use crate::builder::{ConvCfg, GraphBuilder, ShapeError};
use crate::graph::{Graph, InputKind, LossKind, NodeId, PoolKind};
use crate::model::InceptionSpec;

use super::common::{ZooError, at_least, conv_bn_relu};

/// torchvision's `BasicConv2d` batch-norm epsilon.
const EPS: f32 = 0.001;

/// `BasicConv2d`: conv (no bias) + BN(eps 0.001) + ReLU, nodes `name.conv`, `name.bn`, `name.relu`.
fn basic(b: &mut GraphBuilder, name: &str, x: NodeId, cfg: ConvCfg) -> Result<NodeId, ShapeError> {
    conv_bn_relu(b, name, x, cfg, EPS)
}

fn k1(out: usize) -> ConvCfg {
    ConvCfg::square(out, 1, 1, 0)
}

/// A `1 x 7` (horizontal) or `7 x 1` convolution with same padding.
fn strip(out: usize, k: usize, horizontal: bool) -> ConvCfg {
    if horizontal {
        ConvCfg::rect(out, [1, k], [1, 1], [0, k / 2])
    } else {
        ConvCfg::rect(out, [k, 1], [1, 1], [k / 2, 0])
    }
}

/// 3x3 average pool (stride 1, pad 1) then a 1x1 projection: every block's `branch_pool`.
fn avg_branch(b: &mut GraphBuilder, x: NodeId, out: usize) -> Result<NodeId, ShapeError> {
    let p = b.pool("avg_pool", x, PoolKind::Avg, 3, 1, 1)?;
    basic(b, "branch_pool", p, k1(out))
}

fn block_a(b: &mut GraphBuilder, x: NodeId, pool_features: usize) -> Result<NodeId, ShapeError> {
    let b1 = basic(b, "branch1x1", x, k1(64))?;
    let b5 = basic(b, "branch5x5_1", x, k1(48))?;
    let b5 = basic(b, "branch5x5_2", b5, ConvCfg::square(64, 5, 1, 2))?;
    let b3 = basic(b, "branch3x3dbl_1", x, k1(64))?;
    let b3 = basic(b, "branch3x3dbl_2", b3, ConvCfg::square(96, 3, 1, 1))?;
    let b3 = basic(b, "branch3x3dbl_3", b3, ConvCfg::square(96, 3, 1, 1))?;
    let bp = avg_branch(b, x, pool_features)?;
    b.concat("concat", &[b1, b5, b3, bp], 0)
}

fn block_b(b: &mut GraphBuilder, x: NodeId) -> Result<NodeId, ShapeError> {
    let b3 = basic(b, "branch3x3", x, ConvCfg::square(384, 3, 2, 0))?;
    let bd = basic(b, "branch3x3dbl_1", x, k1(64))?;
    let bd = basic(b, "branch3x3dbl_2", bd, ConvCfg::square(96, 3, 1, 1))?;
    let bd = basic(b, "branch3x3dbl_3", bd, ConvCfg::square(96, 3, 2, 0))?;
    let bp = b.pool("max_pool", x, PoolKind::Max, 3, 2, 0)?;
    b.concat("concat", &[b3, bd, bp], 0)
}

fn block_c(b: &mut GraphBuilder, x: NodeId, c7: usize) -> Result<NodeId, ShapeError> {
    let b1 = basic(b, "branch1x1", x, k1(192))?;
    let b7 = basic(b, "branch7x7_1", x, k1(c7))?;
    let b7 = basic(b, "branch7x7_2", b7, strip(c7, 7, true))?;
    let b7 = basic(b, "branch7x7_3", b7, strip(192, 7, false))?;
    let bd = basic(b, "branch7x7dbl_1", x, k1(c7))?;
    let bd = basic(b, "branch7x7dbl_2", bd, strip(c7, 7, false))?;
    let bd = basic(b, "branch7x7dbl_3", bd, strip(c7, 7, true))?;
    let bd = basic(b, "branch7x7dbl_4", bd, strip(c7, 7, false))?;
    let bd = basic(b, "branch7x7dbl_5", bd, strip(192, 7, true))?;
    let bp = avg_branch(b, x, 192)?;
    b.concat("concat", &[b1, b7, bd, bp], 0)
}

fn block_d(b: &mut GraphBuilder, x: NodeId) -> Result<NodeId, ShapeError> {
    let b3 = basic(b, "branch3x3_1", x, k1(192))?;
    let b3 = basic(b, "branch3x3_2", b3, ConvCfg::square(320, 3, 2, 0))?;
    let b7 = basic(b, "branch7x7x3_1", x, k1(192))?;
    let b7 = basic(b, "branch7x7x3_2", b7, strip(192, 7, true))?;
    let b7 = basic(b, "branch7x7x3_3", b7, strip(192, 7, false))?;
    let b7 = basic(b, "branch7x7x3_4", b7, ConvCfg::square(192, 3, 2, 0))?;
    let bp = b.pool("max_pool", x, PoolKind::Max, 3, 2, 0)?;
    b.concat("concat", &[b3, b7, bp], 0)
}

fn block_e(b: &mut GraphBuilder, x: NodeId) -> Result<NodeId, ShapeError> {
    let b1 = basic(b, "branch1x1", x, k1(320))?;
    let b3 = basic(b, "branch3x3_1", x, k1(384))?;
    let b3a = basic(b, "branch3x3_2a", b3, strip(384, 3, true))?;
    let b3b = basic(b, "branch3x3_2b", b3, strip(384, 3, false))?;
    let b3 = b.concat("branch3x3", &[b3a, b3b], 0)?;
    let bd = basic(b, "branch3x3dbl_1", x, k1(448))?;
    let bd = basic(b, "branch3x3dbl_2", bd, ConvCfg::square(384, 3, 1, 1))?;
    let bda = basic(b, "branch3x3dbl_3a", bd, strip(384, 3, true))?;
    let bdb = basic(b, "branch3x3dbl_3b", bd, strip(384, 3, false))?;
    let bd = b.concat("branch3x3dbl", &[bda, bdb], 0)?;
    let bp = avg_branch(b, x, 192)?;
    b.concat("concat", &[b1, b3, bd, bp], 0)
}

/// Run `f` inside the scope `name`.
fn scoped<T>(b: &mut GraphBuilder, name: &str, f: impl FnOnce(&mut GraphBuilder) -> T) -> T {
    b.push(name);
    let r = f(b);
    b.pop();
    r
}

/// Build Inception-v3 with its cross-entropy loss (and the auxiliary classifier's, weight 0.4).
pub(crate) fn build(s: &InceptionSpec) -> Result<Graph, ZooError> {
    at_least("classes", s.classes, 1)?;
    // The auxiliary head's 5x5 convolution needs a 17x17 Mixed_6e output, i.e. a 299x299 input.
    at_least("image_size", s.image_size, if s.aux_logits { 299 } else { 75 }).map_err(|e| ZooError {
        hint: Some("the auxiliary classifier needs at least 299x299; set aux_logits = false for smaller inputs".into()),
        ..e
    })?;
    let mut b = GraphBuilder::new("inception_v3");
    let x = b.input("input", &[3, s.image_size, s.image_size], InputKind::Dense)?;
    let labels = b.input("labels", &[], InputKind::Labels { classes: s.classes })?;
    let mut y = basic(&mut b, "Conv2d_1a_3x3", x, ConvCfg::square(32, 3, 2, 0))?;
    y = basic(&mut b, "Conv2d_2a_3x3", y, ConvCfg::square(32, 3, 1, 0))?;
    y = basic(&mut b, "Conv2d_2b_3x3", y, ConvCfg::square(64, 3, 1, 1))?;
    y = b.pool("maxpool1", y, PoolKind::Max, 3, 2, 0)?;
    y = basic(&mut b, "Conv2d_3b_1x1", y, k1(80))?;
    y = basic(&mut b, "Conv2d_4a_3x3", y, ConvCfg::square(192, 3, 1, 0))?;
    y = b.pool("maxpool2", y, PoolKind::Max, 3, 2, 0)?;
    y = scoped(&mut b, "Mixed_5b", |b| block_a(b, y, 32))?;
    y = scoped(&mut b, "Mixed_5c", |b| block_a(b, y, 64))?;
    y = scoped(&mut b, "Mixed_5d", |b| block_a(b, y, 64))?;
    y = scoped(&mut b, "Mixed_6a", |b| block_b(b, y))?;
    y = scoped(&mut b, "Mixed_6b", |b| block_c(b, y, 128))?;
    y = scoped(&mut b, "Mixed_6c", |b| block_c(b, y, 160))?;
    y = scoped(&mut b, "Mixed_6d", |b| block_c(b, y, 160))?;
    y = scoped(&mut b, "Mixed_6e", |b| block_c(b, y, 192))?;
    if s.aux_logits {
        let aux = scoped(&mut b, "AuxLogits", |b| -> Result<NodeId, ShapeError> {
            let p = b.pool("avg_pool", y, PoolKind::Avg, 5, 3, 0)?;
            let c = basic(b, "conv0", p, k1(128))?;
            let c = basic(b, "conv1", c, ConvCfg::square(768, 5, 1, 0))?;
            let c = b.adaptive_pool("adaptive_avg_pool", c, PoolKind::Avg, vec![1, 1])?;
            let f = b.flatten("flatten", c)?;
            b.linear("fc", f, s.classes, true)
        })?;
        b.loss_weighted("aux_loss", LossKind::CrossEntropy, &[aux, labels], 0.4)?;
    }
    y = scoped(&mut b, "Mixed_7a", |b| block_d(b, y))?;
    y = scoped(&mut b, "Mixed_7b", |b| block_e(b, y))?;
    y = scoped(&mut b, "Mixed_7c", |b| block_e(b, y))?;
    y = b.adaptive_pool("avgpool", y, PoolKind::Avg, vec![1, 1])?;
    y = b.dropout("dropout", y, 0.5)?;
    y = b.flatten("flatten", y)?;
    let logits = b.linear("fc", y, s.classes, true)?;
    b.loss("loss", LossKind::CrossEntropy, &[logits, labels])?;
    Ok(b.finish(1, "samples")?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::zoo::common::shape;

    #[test]
    fn shapes_follow_torchvision() {
        let g = build(&InceptionSpec { classes: 1000, aux_logits: true, image_size: 299 }).unwrap();
        assert_eq!(shape(&g, "maxpool2"), [192, 35, 35]);
        assert_eq!(shape(&g, "Mixed_5b.concat"), [256, 35, 35]);
        assert_eq!(shape(&g, "Mixed_5d.concat"), [288, 35, 35]);
        assert_eq!(shape(&g, "Mixed_6a.concat"), [768, 17, 17]);
        assert_eq!(shape(&g, "Mixed_7a.concat"), [1280, 8, 8]);
        assert_eq!(shape(&g, "Mixed_7c.concat"), [2048, 8, 8]);
        assert_eq!(shape(&g, "AuxLogits.conv1.relu"), [768, 1, 1]);
        assert_eq!(g.losses.len(), 2);
    }

    #[test]
    fn without_aux_has_one_loss_and_small_inputs_work() {
        let g = build(&InceptionSpec { classes: 10, aux_logits: false, image_size: 75 }).unwrap();
        assert_eq!(g.losses.len(), 1);
        assert!(g.node("AuxLogits.fc").is_none());
        let e = build(&InceptionSpec { classes: 10, aux_logits: true, image_size: 298 }).unwrap_err();
        assert_eq!(e.path, ["image_size"]);
    }
}
