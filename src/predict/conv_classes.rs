//! Convolution kernel classes ([`Term::ConvClasses`](super::terms::Term::ConvClasses)): a convolution that is
//! not 3 x 3 at stride 1 (a bottleneck's 1 x 1 projection, a stride-2 down-sampling, a 7 x 7 stem, a GAN's 4 x 4
//! stride-2 layer or its transposed twin) runs through another of libtorch's CPU paths, at its own rate. The
//! calibration measures each class at a few sizes of the 3 x 3 grid; the fit keeps, per class and channel count,
//! the median of its rates over the grid's at the same channels, output pixels and batch (forward and backward),
//! and the model multiplies the grid's rate by the share at the convolution's channels (interpolated in log
//! channels, the nearest measured count's beyond them: a 1 x 1 projection runs at a third of the grid's rate at 8
//! channels and near all of it at 128). A class not measured takes the nearest measured one of the same stride and
//! direction by kernel side; a transposed convolution without a measured class has no grid rate at all.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a convolution's path depends on beside its size: kernel side, stride and direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConvClass {
    /// Kernel side (the larger of a rectangular kernel's two).
    pub kernel: u64,
    /// Stride (the larger of the two).
    pub stride: u64,
    /// Whether it is a transposed convolution.
    pub transposed: bool,
}

impl ConvClass {
    /// The class the 3 x 3 grid itself measures: 3 x 3, stride 1, not transposed.
    pub const GRID: ConvClass = ConvClass { kernel: 3, stride: 1, transposed: false };
}

/// One measured class's rate as a share of the 3 x 3 grid's, forward and backward.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConvClassRate {
    /// The class.
    pub class: ConvClass,
    /// Its forward rate over the grid's (median over its points).
    pub forward: f64,
    /// Its backward rate (input and weight gradients) over the grid's.
    pub backward: f64,
    /// The shares at each measured channel count, fewest channels first (empty in a profile fitted before they
    /// were kept: the medians above then hold at every size).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_channels: Vec<ChannelShare>,
}

/// A class's shares of the grid's rate at one channel count (the median over its points there).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChannelShare {
    /// Channels (the geometric mean of input and output channels).
    pub channels: f64,
    /// The forward share there.
    pub forward: f64,
    /// The backward share there.
    pub backward: f64,
}

impl ConvClassRate {
    /// The (forward, backward) shares at `channels`: interpolated in log channels between the measured counts,
    /// the nearest count's beyond them, the class's medians where none was kept.
    pub fn at(&self, channels: f64) -> (f64, f64) {
        let v = &self.by_channels;
        let (Some(first), Some(last)) = (v.first(), v.last()) else {
            return (self.forward, self.backward);
        };
        if channels.is_nan() || channels <= first.channels {
            return (first.forward, first.backward);
        }
        if channels >= last.channels {
            return (last.forward, last.backward);
        }
        let hi = v.iter().position(|p| p.channels >= channels).unwrap_or(v.len() - 1).max(1);
        let (a, b) = (&v[hi - 1], &v[hi]);
        let t = (channels.ln() - a.channels.ln()) / (b.channels.ln() - a.channels.ln()).max(f64::MIN_POSITIVE);
        (a.forward + t * (b.forward - a.forward), a.backward + t * (b.backward - a.backward))
    }
}

/// The (forward, backward) share of the grid's rate a convolution of `class` with `channels` channels runs at,
/// from the measured `classes`: a measured class its share there ([`ConvClassRate::at`]); another the nearest
/// measured class of the same stride and direction by kernel side, the grid's own (3 x 3 at stride 1, share 1)
/// among them (the smaller side on a tie); where none is, `None` for a transposed convolution (the grid measures
/// none), else 1 (the grid's rate, as before classes were measured).
pub fn share(classes: &[ConvClassRate], class: ConvClass, channels: f64) -> Option<(f64, f64)> {
    let grid = ConvClassRate { class: ConvClass::GRID, forward: 1.0, backward: 1.0, by_channels: Vec::new() };
    let nearest = classes
        .iter()
        .chain(std::iter::once(&grid))
        .filter(|c| c.class.stride == class.stride && c.class.transposed == class.transposed)
        .min_by_key(|c| (c.class.kernel.abs_diff(class.kernel), c.class.kernel));
    match nearest {
        Some(c) => Some(c.at(channels)),
        None if class.transposed => None,
        None => Some((1.0, 1.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(kernel: u64, stride: u64, transposed: bool, forward: f64) -> ConvClassRate {
        ConvClassRate {
            class: ConvClass { kernel, stride, transposed },
            forward,
            backward: forward / 2.0,
            by_channels: Vec::new(),
        }
    }

    #[test]
    fn a_class_reads_its_own_share_else_the_nearest_of_its_stride_and_direction() {
        let classes = [rate(1, 1, false, 0.5), rate(3, 2, false, 0.8), rate(7, 2, false, 1.2), rate(4, 2, true, 0.3)];
        let class = |kernel, stride, transposed| ConvClass { kernel, stride, transposed };
        assert_eq!(share(&classes, ConvClass::GRID, 64.0), Some((1.0, 1.0)));
        assert_eq!(share(&classes, class(3, 2, false), 64.0), Some((0.8, 0.4)));
        // 4 x 4 at stride 2: 3 and 7 are 1 and 3 away.
        assert_eq!(share(&classes, class(4, 2, false), 64.0), Some((0.8, 0.4)));
        assert_eq!(share(&classes, class(5, 2, false), 64.0), Some((0.8, 0.4)), "a tie goes to the smaller side");
        assert_eq!(
            share(&classes, class(5, 1, false), 64.0),
            Some((1.0, 1.0)),
            "5 x 5 is nearer the 3 x 3 grid than 1 x 1"
        );
        assert_eq!(share(&classes, class(1, 1, false), 64.0), Some((0.5, 0.25)));
        assert_eq!(share(&classes, class(3, 2, true), 64.0), Some((0.3, 0.15)));
        assert_eq!(share(&classes, class(3, 4, false), 64.0), Some((1.0, 1.0)), "no class of that stride: the grid's");
        assert_eq!(share(&classes, class(4, 4, true), 64.0), None, "no transposed class of that stride: no grid rate");
        assert_eq!(share(&[], class(4, 2, true), 64.0), None);
        assert_eq!(share(&[], class(1, 1, false), 64.0), Some((1.0, 1.0)));
    }

    #[test]
    fn a_class_with_shares_by_channels_reads_them_at_the_convolutions_channels() {
        let at = |channels, forward| ChannelShare { channels, forward, backward: forward / 2.0 };
        let mut one = rate(1, 1, false, 0.5);
        one.by_channels = vec![at(8.0, 0.2), at(32.0, 0.6), at(128.0, 1.0)];
        let class = ConvClass { kernel: 1, stride: 1, transposed: false };
        assert_eq!(share(&[one.clone()], class, 4.0), Some((0.2, 0.1)), "below the fewest: theirs");
        assert_eq!(share(&[one.clone()], class, 32.0), Some((0.6, 0.3)));
        let (f, b) = share(&[one.clone()], class, 64.0).unwrap();
        assert!((f - 0.8).abs() < 1e-12 && (b - 0.4).abs() < 1e-12, "halfway in log channels: {f} {b}");
        assert_eq!(share(&[one.clone()], class, 2048.0), Some((1.0, 0.5)), "beyond the most: theirs");
        // Without shares by channels, the medians at every size.
        one.by_channels.clear();
        assert_eq!(share(&[one], class, 2048.0), Some((0.5, 0.25)));
    }
}
