//! The fit's convolution grids: the measured 3 x 3 convolutions turned into rates (FLOP/s net of the per-call
//! overhead) over channels, pixels per image and batch, or, for a grid not measured at several batches of every
//! size (the first calibrations', a GPU's), over channels and pixels with the batch folded into the pixels.

use trainbench_graph::Precision;

use crate::hardware::wire::{Calibration, ConvShapePoint};
use crate::predict::rates::{LogGrid, axis};

/// The coordinates of one measured convolution and its rate, forward or backward.
type GridPoint = (Vec<f64>, f64);

/// Rates of 3 x 3 convolutions, forward and backward (the backward's work is twice the forward's), at one
/// precision: over (channels, pixels per image, batch) where every channel count and image size was measured at
/// batch 1 and 2, else over (channels, output pixels). `net`: a call's seconds net of the per-call overhead the
/// model adds on its own.
pub fn conv_grids(c: &Calibration, precision: Precision, net: impl Fn(f64) -> f64) -> Option<(LogGrid, LogGrid)> {
    let pts: Vec<&ConvShapePoint> =
        c.conv_shapes.iter().filter(|p| p.precision == precision && p.forward_s > 0.0 && p.backward_s > 0.0).collect();
    let batched = by_batch(&pts);
    let grid = |backward: bool| {
        let rate = |p: &ConvShapePoint| {
            let flops = 2.0 * (p.pixels * p.channels * p.channels * p.kernel * p.kernel) as f64;
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
}
