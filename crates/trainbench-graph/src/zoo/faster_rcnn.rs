//! Faster R-CNN (Ren et al.) in the ResNet "C4" layout (He et al., Detectron): ResNet conv1..conv4 as the
//! backbone (stride 16), a region proposal network on conv4 (3x3 conv to 512 channels + ReLU, 1x1 convs for
//! 2 objectness logits and 4 box deltas per anchor), RoI align of a FIXED number of proposals to 14x14, the
//! conv5 stage (`layer4`, stride 2) run on every RoI, global average pooling, and the class / box heads.
//!
//! Losses: cross-entropy for RPN objectness (2 classes per anchor and position) and for the RoI classes;
//! smooth-L1 for RPN box deltas (beta 1/9) and RoI box deltas (beta 1). Targets are synthetic inputs of the
//! right shapes. The proposals are not predicted: [`Op::RoiAlign`](crate::graph::Op::RoiAlign) takes a fixed,
//! deterministic set of boxes, so the cost is static (no NMS, no sampling). All batch norms are trained
//! (Detectron freezes them and conv1/layer1; that changes no shape and no forward FLOP).

use crate::builder::{ConvCfg, GraphBuilder};
use crate::graph::{Activation, Graph, InputKind, LossKind, PoolKind};
use crate::model::{FasterRcnnSpec, ResnetStem};

use super::common::{ZooError, at_least};
use super::resnet::{layout, stage, stem};

/// Build Faster R-CNN (C4) with its four losses.
pub(crate) fn build(s: &FasterRcnnSpec) -> Result<Graph, ZooError> {
    let Some((kind, blocks)) = layout(s.backbone_depth).filter(|_| matches!(s.backbone_depth, 50 | 101 | 152)) else {
        return Err(ZooError::field(
            "backbone_depth",
            format!("backbone depth {} is not supported by the C4 layout", s.backbone_depth),
            Some("use backbone_depth = 50, 101 or 152"),
        ));
    };
    at_least("classes", s.classes, 2)?;
    at_least("image_size", s.image_size, 128)?;
    at_least("proposals", s.proposals, 1)?;
    at_least("anchors", s.anchors, 1)?;
    let mut b = GraphBuilder::new(format!("faster_rcnn_r{}_c4", s.backbone_depth));
    let x = b.input("image", &[3, s.image_size, s.image_size], InputKind::Dense)?;

    b.push("backbone");
    let mut y = stem(&mut b, x, 64, ResnetStem::Imagenet)?;
    for (i, &n) in blocks.iter().take(3).enumerate() {
        y = stage(&mut b, &format!("layer{}", i + 1), y, kind, 64 << i, n, if i == 0 { 1 } else { 2 })?;
    }
    b.pop();
    let features = y;
    let fs = b.shape(features).0.clone();
    let (h, w) = (fs[1], fs[2]);
    let a = s.anchors;

    b.push("rpn");
    let r = b.conv("conv", features, ConvCfg::square(512, 3, 1, 1).with_bias(true))?;
    let r = b.act("relu", r, Activation::Relu)?;
    let obj = b.conv("cls_logits", r, ConvCfg::square(2 * a, 1, 1, 0).with_bias(true))?;
    let deltas = b.conv("bbox_pred", r, ConvCfg::square(4 * a, 1, 1, 0).with_bias(true))?;
    let obj = b.reshape("cls_logits.reshape", obj, &[2, a * h * w])?;
    let obj = b.transpose("cls_logits.transpose", obj, 0, 1)?;
    let obj_labels = b.input("objectness_labels", &[a * h * w], InputKind::Labels { classes: 2 })?;
    let delta_targets = b.input("anchor_box_targets", &[4 * a, h, w], InputKind::Dense)?;
    b.loss("objectness_loss", LossKind::CrossEntropy, &[obj, obj_labels])?;
    b.loss("box_loss", LossKind::SmoothL1 { beta: 1.0 / 9.0 }, &[deltas, delta_targets])?;
    b.pop();

    b.push("roi_heads");
    let rois = b.roi_align("roi_align", features, s.proposals, [14, 14], 1.0 / 16.0)?;
    let y = stage(&mut b, "layer4", rois, kind, 512, blocks[3], 2)?;
    let y = b.adaptive_pool("avgpool", y, PoolKind::Avg, vec![1, 1])?;
    let c = b.shape(y).0[1];
    let y = b.reshape("flatten", y, &[s.proposals, c])?;
    let cls = b.linear("cls_score", y, s.classes, true)?;
    let bbox = b.linear("bbox_pred", y, 4 * s.classes, true)?;
    let cls_labels = b.input("class_labels", &[s.proposals], InputKind::Labels { classes: s.classes })?;
    let box_targets = b.input("box_targets", &[s.proposals, 4 * s.classes], InputKind::Dense)?;
    b.loss("class_loss", LossKind::CrossEntropy, &[cls, cls_labels])?;
    b.loss("box_loss", LossKind::SmoothL1 { beta: 1.0 }, &[bbox, box_targets])?;
    b.pop();
    Ok(b.finish(1, "images")?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::zoo::common::shape;

    #[test]
    fn shapes() {
        let s = FasterRcnnSpec { backbone_depth: 101, classes: 21, image_size: 600, proposals: 300, anchors: 9 };
        let g = build(&s).unwrap();
        assert_eq!(shape(&g, "backbone.layer3.22.relu"), [1024, 38, 38]);
        assert_eq!(shape(&g, "rpn.cls_logits.transpose"), [9 * 38 * 38, 2]);
        assert_eq!(shape(&g, "roi_heads.roi_align"), [300, 1024, 14, 14]);
        assert_eq!(shape(&g, "roi_heads.layer4.2.relu"), [300, 2048, 7, 7]);
        assert_eq!(shape(&g, "roi_heads.bbox_pred"), [300, 84]);
        assert_eq!(g.losses.len(), 4);
        let e = build(&FasterRcnnSpec { backbone_depth: 18, ..s }).unwrap_err();
        assert_eq!(e.path, ["backbone_depth"]);
    }
}
