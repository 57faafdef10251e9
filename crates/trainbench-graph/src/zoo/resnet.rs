//! ResNet 18/34/50/101/152 (He et al.) as torchvision builds it (v1.5: stride on the 3x3 of a bottleneck),
//! with ImageNet or CIFAR stems and a base width. Node names follow torchvision's module names.

use crate::builder::{ConvCfg, GraphBuilder, ShapeError};
use crate::graph::{Activation, Graph, InputKind, LossKind, NodeId, PoolKind};
use crate::model::{ResnetSpec, ResnetStem};

use super::common::{ZooError, at_least};

/// Residual block type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Block {
    /// Two 3x3 convolutions (expansion 1).
    Basic,
    /// 1x1 -> 3x3 -> 1x1 (expansion 4).
    Bottleneck,
}

impl Block {
    /// Output channels over `planes`.
    pub(crate) fn expansion(self) -> usize {
        match self {
            Block::Basic => 1,
            Block::Bottleneck => 4,
        }
    }
}

/// Block type and blocks per stage of a depth, or `None` for an unsupported depth.
pub(crate) fn layout(depth: u32) -> Option<(Block, [usize; 4])> {
    Some(match depth {
        18 => (Block::Basic, [2, 2, 2, 2]),
        34 => (Block::Basic, [3, 4, 6, 3]),
        50 => (Block::Bottleneck, [3, 4, 6, 3]),
        101 => (Block::Bottleneck, [3, 4, 23, 3]),
        152 => (Block::Bottleneck, [3, 8, 36, 3]),
        _ => return None,
    })
}

/// One residual block named by the current scope; returns its output.
fn block(b: &mut GraphBuilder, x: NodeId, kind: Block, planes: usize, stride: usize) -> Result<NodeId, ShapeError> {
    let inplanes = b.shape(x).0[b.shape(x).rank() - 3];
    let out_ch = planes * kind.expansion();
    let mut y = x;
    match kind {
        Block::Basic => {
            y = b.conv("conv1", y, ConvCfg::square(planes, 3, stride, 1))?;
            y = b.batch_norm("bn1", y)?;
            y = b.act("relu1", y, Activation::Relu)?;
            y = b.conv("conv2", y, ConvCfg::square(planes, 3, 1, 1))?;
            y = b.batch_norm("bn2", y)?;
        }
        Block::Bottleneck => {
            y = b.conv("conv1", y, ConvCfg::square(planes, 1, 1, 0))?;
            y = b.batch_norm("bn1", y)?;
            y = b.act("relu1", y, Activation::Relu)?;
            y = b.conv("conv2", y, ConvCfg::square(planes, 3, stride, 1))?;
            y = b.batch_norm("bn2", y)?;
            y = b.act("relu2", y, Activation::Relu)?;
            y = b.conv("conv3", y, ConvCfg::square(out_ch, 1, 1, 0))?;
            y = b.batch_norm("bn3", y)?;
        }
    }
    let identity = if stride != 1 || inplanes != out_ch {
        let d = b.conv("downsample.0", x, ConvCfg::square(out_ch, 1, stride, 0))?;
        b.batch_norm("downsample.1", d)?
    } else {
        x
    };
    let sum = b.add_nodes("add", &[y, identity])?;
    b.act("relu", sum, Activation::Relu)
}

/// A stage of `blocks` residual blocks named `name.0`, `name.1`, ...; the first one carries the stride.
pub(crate) fn stage(
    b: &mut GraphBuilder,
    name: &str,
    mut x: NodeId,
    kind: Block,
    planes: usize,
    blocks: usize,
    stride: usize,
) -> Result<NodeId, ShapeError> {
    b.push(name);
    for i in 0..blocks {
        b.push(i.to_string());
        x = block(b, x, kind, planes, if i == 0 { stride } else { 1 })?;
        b.pop();
    }
    b.pop();
    Ok(x)
}

/// The stem named as torchvision's (`conv1`, `bn1`, `relu`, `maxpool`).
pub(crate) fn stem(b: &mut GraphBuilder, x: NodeId, width: usize, kind: ResnetStem) -> Result<NodeId, ShapeError> {
    match kind {
        ResnetStem::Imagenet => {
            let c = b.conv("conv1", x, ConvCfg::square(width, 7, 2, 3))?;
            let n = b.batch_norm("bn1", c)?;
            let r = b.act("relu", n, Activation::Relu)?;
            b.pool("maxpool", r, PoolKind::Max, 3, 2, 1)
        }
        ResnetStem::Cifar => {
            let c = b.conv("conv1", x, ConvCfg::square(width, 3, 1, 1))?;
            let n = b.batch_norm("bn1", c)?;
            b.act("relu", n, Activation::Relu)
        }
    }
}

/// Build a ResNet classifier with its cross-entropy loss.
pub(crate) fn build(s: &ResnetSpec) -> Result<Graph, ZooError> {
    let Some((kind, blocks)) = layout(s.depth) else {
        return Err(ZooError::field(
            "depth",
            format!("ResNet depth {} is not one of 18, 34, 50, 101, 152", s.depth),
            Some("use depth = 18, 34, 50, 101 or 152"),
        ));
    };
    at_least("width", s.width, 1)?;
    at_least("classes", s.classes, 1)?;
    let min_image = if s.stem == ResnetStem::Imagenet { 32 } else { 8 };
    at_least("image_size", s.image_size, min_image)?;

    let mut b = GraphBuilder::new(format!("resnet{}", s.depth));
    let x = b.input("input", &[3, s.image_size, s.image_size], InputKind::Dense)?;
    let labels = b.input("labels", &[], InputKind::Labels { classes: s.classes })?;
    let mut y = stem(&mut b, x, s.width, s.stem)?;
    for (i, &n) in blocks.iter().enumerate() {
        let stride = if i == 0 { 1 } else { 2 };
        y = stage(&mut b, &format!("layer{}", i + 1), y, kind, s.width << i, n, stride)?;
    }
    let p = b.adaptive_pool("avgpool", y, PoolKind::Avg, vec![1, 1])?;
    let f = b.flatten("flatten", p)?;
    let logits = b.linear("fc", f, s.classes, true)?;
    b.loss("loss", LossKind::CrossEntropy, &[logits, labels])?;
    Ok(b.finish(1, "samples")?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::zoo::common::shape;

    fn spec(depth: u32) -> ResnetSpec {
        ResnetSpec { depth, width: 64, classes: 1000, image_size: 224, stem: ResnetStem::Imagenet }
    }

    #[test]
    fn stage_shapes_follow_torchvision() {
        let g = build(&spec(50)).unwrap();
        assert_eq!(shape(&g, "maxpool"), [64, 56, 56]);
        assert_eq!(shape(&g, "layer1.2.relu"), [256, 56, 56]);
        assert_eq!(shape(&g, "layer4.2.relu"), [2048, 7, 7]);
        assert_eq!(shape(&g, "fc"), [1000]);
        let g = build(&spec(18)).unwrap();
        assert_eq!(shape(&g, "layer4.1.relu"), [512, 7, 7]);
        assert!(g.node("layer1.0.downsample.0").is_none());
        assert!(g.node("layer2.0.downsample.0").is_some());
    }

    #[test]
    fn cifar_stem_keeps_resolution() {
        let g = build(&ResnetSpec { image_size: 32, classes: 10, stem: ResnetStem::Cifar, ..spec(18) }).unwrap();
        assert_eq!(shape(&g, "layer1.1.relu"), [64, 32, 32]);
        assert_eq!(shape(&g, "layer4.1.relu"), [512, 4, 4]);
    }

    #[test]
    fn unsupported_depth_is_located() {
        let e = build(&spec(42)).unwrap_err();
        assert_eq!(e.path, ["depth"]);
        assert!(e.message.contains("42"));
    }
}
