//! Change points in a series of per-run values (PLACEHOLDER of the `history-detect` branch, which owns this file:
//! the lead keeps that branch's version at merge). Binary segmentation on the mean with a two-sample t-test.

use super::{mean, normal_sf, stdev};

/// Settings of change-point detection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DetectOptions {
    /// Fewest points each side of a change point.
    pub min_points_per_segment: usize,
    /// Largest p-value of the t-test that still counts as a change.
    pub p_value: f64,
    /// Smallest relative change of the mean that counts.
    pub min_effect: f64,
}

impl Default for DetectOptions {
    fn default() -> Self {
        Self { min_points_per_segment: 5, p_value: 0.001, min_effect: 0.02 }
    }
}

/// One change of the series' level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangePoint {
    /// Index of the first point after the change.
    pub index: usize,
    /// p-value of the t-test between the two segments.
    pub p_value: f64,
    /// Mean of the segment before.
    pub mean_before: f64,
    /// Mean of the segment after.
    pub mean_after: f64,
    /// `mean_after / mean_before - 1`.
    pub relative_change: f64,
}

/// The series is too short for detection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{got} points, detection needs at least {needed}")]
pub struct TooFewPoints {
    /// Points needed.
    pub needed: usize,
    /// Points given.
    pub got: usize,
}

fn welch_p(a: &[f64], b: &[f64]) -> Option<(f64, f64, f64)> {
    let (ma, mb) = (mean(a)?, mean(b)?);
    let (sa, sb) = (stdev(a)?, stdev(b)?);
    let se = (sa * sa / a.len() as f64 + sb * sb / b.len() as f64).sqrt();
    let p = if se > 0.0 {
        2.0 * normal_sf(((mb - ma) / se).abs())
    } else if ma == mb {
        1.0
    } else {
        0.0
    };
    Some((p, ma, mb))
}

fn split(values: &[f64], offset: usize, opts: &DetectOptions, out: &mut Vec<ChangePoint>) {
    let m = opts.min_points_per_segment.max(2);
    if values.len() < 2 * m {
        return;
    }
    let mut best: Option<ChangePoint> = None;
    for k in m..=values.len() - m {
        let Some((p, before, after)) = welch_p(&values[..k], &values[k..]) else { continue };
        if best.is_none_or(|b| p < b.p_value) {
            let relative_change = if before != 0.0 { after / before - 1.0 } else { 0.0 };
            best = Some(ChangePoint {
                index: offset + k,
                p_value: p,
                mean_before: before,
                mean_after: after,
                relative_change,
            });
        }
    }
    if let Some(cp) = best
        && cp.p_value < opts.p_value
        && cp.relative_change.abs() >= opts.min_effect
    {
        let k = cp.index - offset;
        split(&values[..k], offset, opts, out);
        out.push(cp);
        split(&values[k..], offset + k, opts, out);
    }
}

/// Change points of `values`, in order.
pub fn detect(values: &[f64], opts: &DetectOptions) -> Result<Vec<ChangePoint>, TooFewPoints> {
    let needed = 2 * opts.min_points_per_segment.max(2);
    if values.len() < needed {
        return Err(TooFewPoints { needed, got: values.len() });
    }
    let mut out = Vec::new();
    split(values, 0, opts, &mut out);
    Ok(out)
}
