//! The fit's convolution grids: the measured 3 x 3 convolutions turned into rates (FLOP/s net of the per-call
//! overhead) over channels, pixels per image and batch, or, for a grid not measured at several batches of every
//! size (the first calibrations', a GPU's), over channels and pixels with the batch folded into the pixels; and
//! the other kernel classes' rates as shares of the grid's.

use trainbench_contract::stats::median;
use trainbench_graph::Precision;

use crate::hardware::wire::{Calibration, ConvShapePoint};
use crate::predict::conv_classes::{ChannelShare, ConvClass, ConvClassRate};
use crate::predict::rates::{LogGrid, axis, conv_grid_rate};

/// The coordinates of one measured convolution and its rate, forward or backward.
type GridPoint = (Vec<f64>, f64);

/// Rates of 3 x 3 convolutions, forward and backward (the backward's work is twice the forward's), at one
/// precision: over (channels, pixels per image, batch) where every channel count and image size was measured at
/// batch 1 and 2, else over (channels, output pixels). `net`: a call's seconds net of the per-call overhead the
/// model adds on its own.
pub fn conv_grids(c: &Calibration, precision: Precision, net: impl Fn(f64) -> f64) -> Option<(LogGrid, LogGrid)> {
    let pts: Vec<&ConvShapePoint> = measured(c, precision).filter(|p| class_of(p) == ConvClass::GRID).collect();
    let batched = by_batch(&pts);
    let grid = |backward: bool| {
        let rate = |p: &ConvShapePoint| {
            let flops = forward_flops(p);
            let (work, s) = if backward { (2.0 * flops, p.backward_s) } else { (flops, p.forward_s) };
            work / net(s)
        };
        let points: Vec<GridPoint> = match &batched {
            Some(b) => b.iter().map(|&(coords, p)| (coords.to_vec(), rate(p))).collect(),
            None => pts.iter().map(|p| (vec![p.channels as f64, p.pixels as f64], rate(p))).collect(),
        };
        LogGrid::new(&completed(points))
    };
    Some((grid(false)?, grid(true)?))
}

/// The measured convolutions at `precision` (both times above 0).
fn measured(c: &Calibration, precision: Precision) -> impl Iterator<Item = &ConvShapePoint> {
    c.conv_shapes.iter().filter(move |p| p.precision == precision && p.forward_s > 0.0 && p.backward_s > 0.0)
}

/// FLOPs of a measured convolution forward: its windows' (`pixels`, the output's; a transposed one's, its
/// inputs': `pixels` over the stride squared), as the analysis counts a layer's.
fn forward_flops(p: &ConvShapePoint) -> f64 {
    let windows = if p.transposed { p.pixels as f64 / (p.stride * p.stride).max(1) as f64 } else { p.pixels as f64 };
    2.0 * windows * (p.channels * p.channels * p.kernel * p.kernel) as f64
}

fn class_of(p: &ConvShapePoint) -> ConvClass {
    ConvClass { kernel: p.kernel, stride: p.stride, transposed: p.transposed }
}

/// Each kernel class's rates as shares of the 3 x 3 grid's `grids` (forward, backward) at the same channels,
/// output pixels per image and batch (over channels and output pixels on a grid without the batch): the median
/// share over the class's points and at each channel count apart, per class measured at `precision` (FLOPs as
/// [`forward_flops`]); `net` as for the grid.
pub fn conv_class_rates(
    c: &Calibration,
    precision: Precision,
    net: impl Fn(f64) -> f64,
    grids: &(LogGrid, LogGrid),
) -> Vec<ConvClassRate> {
    let mut classes: Vec<ConvClass> = Vec::new();
    for p in measured(c, precision).filter(|p| class_of(p) != ConvClass::GRID) {
        if !classes.contains(&class_of(p)) {
            classes.push(class_of(p));
        }
    }
    let share = |p: &ConvShapePoint, backward: bool| {
        let batch = p.batch.unwrap_or(1).max(1) as f64;
        let flops = forward_flops(p);
        let (work, s, g) =
            if backward { (2.0 * flops, p.backward_s, &grids.1) } else { (flops, p.forward_s, &grids.0) };
        work / net(s) / conv_grid_rate(g, p.channels as f64, p.pixels as f64 / batch, batch)
    };
    // The (forward, backward) median shares over the points `at` keeps.
    let medians = |at: &dyn Fn(&ConvShapePoint) -> bool| {
        let of = |backward| measured(c, precision).filter(|p| at(p)).map(|p| share(p, backward)).collect::<Vec<_>>();
        (median(&of(false)).unwrap_or(f64::NAN), median(&of(true)).unwrap_or(f64::NAN))
    };
    classes
        .into_iter()
        .map(|class| {
            let (forward, backward) = medians(&|p| class_of(p) == class);
            let mut counts: Vec<u64> =
                measured(c, precision).filter(|p| class_of(p) == class).map(|p| p.channels).collect();
            counts.sort_unstable();
            counts.dedup();
            let by_channels = counts
                .into_iter()
                .map(|n| {
                    let (forward, backward) = medians(&|p| class_of(p) == class && p.channels == n);
                    ChannelShare { channels: n as f64, forward, backward }
                })
                .filter(|s| usable(s.forward) && usable(s.backward))
                .collect();
            ConvClassRate { class, forward, backward, by_channels }
        })
        .filter(|r| usable(r.forward) && usable(r.backward))
        .collect()
}

/// A share the model can use: finite and above 0.
fn usable(share: f64) -> bool {
    share.is_finite() && share > 0.0
}

/// Each point at (channels, pixels per image, batch), when every point carries its batch and every channel count
/// and image size was measured at batches 1 and 2 (the batch then varies where the cost does); else `None`.
fn by_batch<'a>(pts: &[&'a ConvShapePoint]) -> Option<Vec<([f64; 3], &'a ConvShapePoint)>> {
    let mut v = Vec::new();
    for &p in pts {
        let n = p.batch.filter(|&n| n > 0 && p.pixels % n == 0)?;
        v.push(([p.channels as f64, (p.pixels / n) as f64, n as f64], p));
    }
    let measured = |c: f64, px: f64, n: f64| v.iter().any(|(x, _)| x[0] == c && x[1] == px && x[2] == n);
    let every_size_at_two_batches = v.iter().all(|(x, _)| measured(x[0], x[1], 1.0) && measured(x[0], x[1], 2.0));
    (!v.is_empty() && every_size_at_two_batches).then_some(v)
}

/// The grid's points completed along its last axis: the largest sizes are measured for the fewer channels only
/// (the FLOPs bound), and a combination without them keeps the rate of its largest measured size.
fn completed(mut points: Vec<GridPoint>) -> Vec<GridPoint> {
    let Some(last) = points.first().map(|p| p.0.len() - 1) else {
        return points;
    };
    let sizes = axis(points.iter().map(|p| p.0[last]));
    let mut added = Vec::new();
    let mut fronts: Vec<&[f64]> = points.iter().map(|p| &p.0[..last]).collect();
    fronts.sort_by(|a, b| {
        a.iter().zip(*b).map(|(x, y)| x.total_cmp(y)).find(|o| o.is_ne()).unwrap_or(std::cmp::Ordering::Equal)
    });
    fronts.dedup();
    for front in fronts {
        let largest = points
            .iter()
            .filter(|p| &p.0[..last] == front)
            .max_by(|a, b| a.0[last].total_cmp(&b.0[last]))
            .map(|p| (p.0[last], p.1));
        if let Some((measured, rate)) = largest {
            for &size in sizes.iter().filter(|&&s| s > measured) {
                let mut coords = front.to_vec();
                coords.push(size);
                added.push((coords, rate));
            }
        }
    }
    points.extend(added);
    points
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn point(channels: u64, side: u64, batch: Option<u64>, rate: f64) -> ConvShapePoint {
        let pixels = side * side * batch.unwrap_or(1);
        let flops = 2.0 * (pixels * channels * channels * 9) as f64;
        ConvShapePoint {
            precision: Precision::Fp32,
            channels,
            pixels,
            batch,
            kernel: 3,
            stride: 1,
            transposed: false,
            forward_s: flops / rate,
            backward_s: 2.0 * flops / rate,
        }
    }

    fn calibration(points: Vec<ConvShapePoint>) -> Calibration {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hardware/tch-cpu.toml"))
                .unwrap();
        let profile: crate::hardware::wire::HardwareFile = toml::from_str(&text).unwrap();
        let mut c = profile.calibration.unwrap();
        c.conv_shapes = points;
        c
    }

    #[test]
    fn a_grid_measured_at_two_batches_of_every_size_reads_the_batch_apart_from_the_pixels() {
        // 8 channels, 16 x 16: 1e10 FLOP/s at batch 1 and 4, 6e9 at batch 2 (as libtorch's CPU convolution);
        // 32 x 32: 2e10 everywhere; batch 4 of 32 x 32 not measured (it keeps batch 2's rate).
        let c = calibration(vec![
            point(8, 16, Some(1), 1e10),
            point(8, 16, Some(2), 6e9),
            point(8, 16, Some(4), 1e10),
            point(8, 32, Some(1), 2e10),
            point(8, 32, Some(2), 2e10),
        ]);
        let (forward, backward) = conv_grids(&c, Precision::Fp32, |s| s).unwrap();
        let at = |side: f64, batch: f64| forward.value(&[8.0, side * side, batch]);
        assert!((at(16.0, 2.0) / 6e9 - 1.0).abs() < 1e-9);
        assert!((at(16.0, 4.0) / 1e10 - 1.0).abs() < 1e-9);
        assert!((at(32.0, 4.0) / 2e10 - 1.0).abs() < 1e-9);
        // 4 x 16 x 16 = 1,024 pixels, as 1 x 32 x 32: not the same rate once the batch is an axis.
        assert!(at(16.0, 4.0) < at(32.0, 1.0));
        assert!((backward.value(&[8.0, 256.0, 2.0]) / 6e9 - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_grid_without_every_size_at_two_batches_folds_the_batch_into_the_pixels() {
        for batch in [None, Some(1)] {
            let c = calibration(vec![point(8, 16, batch, 1e10), point(8, 64, batch, 2e10)]);
            let (forward, _) = conv_grids(&c, Precision::Fp32, |s| s).unwrap();
            assert!((forward.value(&[8.0, 4096.0]) / 2e10 - 1.0).abs() < 1e-9, "{batch:?}");
        }
    }

    #[test]
    fn a_grid_measured_at_the_largest_size_for_few_channels_only_is_completed() {
        // 10 GFLOP/s everywhere measured, except 4 channels at 65,536 pixels: 5 GFLOP/s (past the caches); 64
        // channels were not measured at 65,536 pixels (folded grid) nor 8 channels at batch 4 (batch axis).
        let folded = |channels, side, rate| point(channels, side, None, rate);
        let c = calibration(vec![
            folded(4, 16, 1e10),
            folded(4, 64, 1e10),
            folded(4, 256, 5e9),
            folded(64, 16, 1e10),
            folded(64, 64, 1e10),
        ]);
        let (forward, _) = conv_grids(&c, Precision::Fp32, |s| s).unwrap();
        assert!((forward.value(&[4.0, 65536.0]) / 5e9 - 1.0).abs() < 1e-9);
        assert!((forward.value(&[64.0, 65536.0]) / 1e10 - 1.0).abs() < 1e-9, "keeps its largest size's rate");
        let c = calibration(vec![
            point(4, 16, Some(1), 1e10),
            point(4, 16, Some(2), 1e10),
            point(4, 16, Some(4), 5e9),
            point(8, 16, Some(1), 1e10),
            point(8, 16, Some(2), 2e10),
        ]);
        let (forward, _) = conv_grids(&c, Precision::Fp32, |s| s).unwrap();
        assert!((forward.value(&[8.0, 256.0, 4.0]) / 2e10 - 1.0).abs() < 1e-9);
    }

    /// A class point at `side` x `side` output pixels: its FLOPs its windows' (a transposed one's, its inputs'),
    /// run at `share` of `rate` forward and `share / 2` of it backward.
    fn class_point(kernel: u64, stride: u64, transposed: bool, side: u64, share: f64, rate: f64) -> ConvShapePoint {
        let pixels = side * side;
        let windows = if transposed { pixels / (stride * stride) } else { pixels };
        let flops = 2.0 * (windows * 8 * 8 * kernel * kernel) as f64;
        ConvShapePoint {
            stride,
            transposed,
            kernel,
            forward_s: flops / (share * rate),
            backward_s: 2.0 * flops / (share / 2.0 * rate),
            ..point(8, side, Some(1), rate)
        }
    }

    #[test]
    fn each_kernel_class_is_the_median_share_of_the_grids_rate_where_it_ran() {
        // The grid: 8 channels, 1e10 FLOP/s at 8 x 8 and 2e10 at 16 x 16 and up, batches 1 and 2.
        let mut points = vec![];
        for side in [8, 16, 32] {
            let rate = if side == 8 { 1e10 } else { 2e10 };
            points.extend([point(8, side, Some(1), rate), point(8, side, Some(2), rate)]);
        }
        // 3 x 3 stride 2 at 0.5, 0.6 and 0.9 of the grid (median 0.6); 4 x 4 transposed at 0.25 into 32 x 32.
        points.extend([
            class_point(3, 2, false, 8, 0.5, 1e10),
            class_point(3, 2, false, 16, 0.6, 2e10),
            class_point(3, 2, false, 16, 0.9, 2e10),
            class_point(4, 2, true, 32, 0.25, 2e10),
        ]);
        let c = calibration(points);
        let grids = conv_grids(&c, Precision::Fp32, |s| s).unwrap();
        assert!((grids.0.value(&[8.0, 64.0, 1.0]) / 1e10 - 1.0).abs() < 1e-9, "the classes stay off the grid");
        let classes = conv_class_rates(&c, Precision::Fp32, |s| s, &grids);
        assert_eq!(classes.len(), 2);
        let of =
            |kernel, transposed| classes.iter().find(|r| r.class.kernel == kernel && r.class.transposed == transposed);
        let strided = of(3, false).unwrap();
        assert!((strided.forward / 0.6 - 1.0).abs() < 1e-9 && (strided.backward / 0.3 - 1.0).abs() < 1e-9);
        let up = of(4, true).unwrap();
        assert!((up.forward / 0.25 - 1.0).abs() < 1e-9, "{up:?}");
        assert!(conv_class_rates(&c, Precision::Bf16, |s| s, &grids).is_empty());
    }
}
