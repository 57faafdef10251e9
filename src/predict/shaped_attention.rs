//! Attention's fused core as measured by shape: per class, the points of each measured (positions, features per
//! head) shape, and the lookup that prices an attention node at the measured shape nearest its own. A fused
//! kernel's cost per score element depends on both: on a GPU, 4 heads of 16 features over 16 positions cost
//! about a hundred times per score what 12 heads of 64 features over 1,024 positions do, so a price carried from
//! one shape to another is off by that much.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::price_classes::ElementwiseClass;
use super::size_points::SizePoint;

/// One attention class's points at one measured shape, net of what the model prices on its own (its
/// projections, score products and operations; `crate::calibrate::fit`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShapedAttention {
    /// The class (self-attention, causal, cross-attention).
    pub class: ElementwiseClass,
    /// Query (and key) positions of the measured shape.
    pub positions: f64,
    /// Features per head of the measured shape.
    pub head_dim: f64,
    /// (score elements, forward seconds, backward seconds), sorted by elements.
    pub points: Vec<SizePoint>,
}

/// How far apart two shapes are: the sum of the distances of their logarithms, positions and features per head
/// weighing alike (a kernel's tiles follow both).
fn distance(a: (f64, f64), b: (f64, f64)) -> f64 {
    let log_gap = |x: f64, y: f64| (x.max(1.0).ln() - y.max(1.0).ln()).abs();
    log_gap(a.0, b.0) + log_gap(a.1, b.1)
}

/// The measured shape of `class` nearest `positions` query positions of `head_dim` features per head among
/// `shapes` (ties: the first measured); `None` when the class has none.
pub fn nearest_shape(
    shapes: &[ShapedAttention],
    class: ElementwiseClass,
    positions: f64,
    head_dim: f64,
) -> Option<&ShapedAttention> {
    let nearest = shapes.iter().filter(|s| s.class == class).fold(None, |best, s| {
        let d = distance((s.positions, s.head_dim), (positions, head_dim));
        match best {
            Some((bd, _)) if bd <= d => best,
            _ => Some((d, s)),
        }
    })?;
    Some(nearest.1)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn shape(class: ElementwiseClass, positions: f64, head_dim: f64, per_score: f64) -> ShapedAttention {
        ShapedAttention { class, positions, head_dim, points: vec![(1e6, per_score * 1e6, 2.0 * per_score * 1e6)] }
    }

    #[test]
    fn an_attention_node_is_priced_at_the_nearest_measured_shape_of_its_class() {
        let shapes = vec![
            shape(ElementwiseClass::Attention, 16.0, 16.0, 1e-9),
            shape(ElementwiseClass::Attention, 1024.0, 64.0, 1e-11),
            shape(ElementwiseClass::Attention, 1024.0, 128.0, 2e-11),
            shape(ElementwiseClass::AttentionCausal, 1024.0, 64.0, 5e-12),
        ];
        let at = |class, t, d| nearest_shape(&shapes, class, t, d).unwrap().points[0].1 / 1e6 * 2e6;
        assert!((at(ElementwiseClass::Attention, 2048.0, 64.0) - 2e-5).abs() < 1e-12, "GPT-2's 64 per head");
        assert!((at(ElementwiseClass::Attention, 4096.0, 128.0) - 4e-5).abs() < 1e-12, "Llama's 128 per head");
        assert!((at(ElementwiseClass::Attention, 8.0, 8.0) - 2e-3).abs() < 1e-12, "a tiny model's");
        assert!((at(ElementwiseClass::AttentionCausal, 8.0, 8.0) - 1e-5).abs() < 1e-12, "its own class only");
        assert!(nearest_shape(&shapes, ElementwiseClass::AttentionCross, 1024.0, 64.0).is_none());
    }
}
