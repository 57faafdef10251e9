//! The uncertainty of a calibrated profile's terms (`crate::predict::uncertainty::Uncertainty`), from the residuals
//! of the calibration's own micro-benchmarks: each measured point of a curve left out and predicted by the model's
//! interpolation between its neighbours (log-log for the GEMM, convolution, attention and bandwidth curves, linear in
//! elements for the element-wise classes); a group's sigma is the root mean square of the log residuals, never
//! below [`FLOOR`]. Fixed and optimizer costs have no curve to leave a point out of: their sigmas are the spread
//! of the same figure over repeated calibrations of one machine (`docs/performance-model.md`, "One calibration
//! can be 30-40% off": one operation 1.0-1.5 us and the step 1.7-5.0 us over four calibrations, ResNet-18's
//! optimizer 16-35 ms over seven; a range of n draws spans about 2.1 (n = 4) to 2.7 (n = 7) sigmas). The
//! machine's own drift, which moves every point of a curve together and so leaves no residual, is the
//! calibration's probe drift (`calibration.load.probe_drift`), where it was kept. The model's own error where it
//! was tuned ([`crate::predict::uncertainty::MODEL_SIGMA`]) rides with every calibrated profile.

use crate::hardware::wire::Calibration;
use crate::predict::rates::Coefficients;
use crate::predict::uncertainty::{MODEL_SIGMA, Uncertainty};

/// Smallest sigma of a fitted group: the spread of one rate between calibrations (their rounds' range is
/// mostly under 5%).
pub const FLOOR: f64 = 0.05;
/// Sigma of the fixed costs: ln(1.5) / 2.1 (one operation) to ln(5.0 / 1.7) / 2.1 (the step's own), between.
pub const FIXED_SIGMA: f64 = 0.3;
/// Sigma of the optimizer step: ln(35 / 16) / 2.7.
pub const OPTIMIZER_SIGMA: f64 = 0.29;

/// The uncertainty of `model`, fitted from calibration `c`.
pub fn of(c: &Calibration, model: &Coefficients) -> Uncertainty {
    let prior = Uncertainty::datasheet();
    let mut compute = Vec::new();
    for curve in [&model.gemm, &model.conv, &model.conv_backward, &model.attention] {
        compute.extend(leave_one_out_log_log(curve));
    }
    let memory = leave_one_out_log_log(&model.bandwidth);
    let mut elementwise = Vec::new();
    // One series per class, precision and (attention) shape: the sizes the model interpolates along.
    let series = |p: &crate::hardware::wire::ElementwisePoint| {
        (p.op, p.precision, p.attention_shape.map(|s| (s.positions, s.head_dim)))
    };
    let mut classes: Vec<_> = c.elementwise.iter().map(series).collect();
    classes.dedup();
    for class in classes {
        let mut points: Vec<(f64, f64)> = c
            .elementwise
            .iter()
            .filter(|p| series(p) == class && p.elements > 0.0)
            .map(|p| (p.elements, p.forward_s + p.backward_s))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        points.dedup_by(|a, b| a.0 == b.0);
        elementwise.extend(leave_one_out_linear(&points));
    }
    let fitted = |residuals: &[f64], prior: f64| rms(residuals).map_or(prior, |s| s.max(FLOOR));
    Uncertainty {
        compute: fitted(&compute, prior.compute),
        memory: fitted(&memory, prior.memory),
        elementwise: fitted(&elementwise, prior.elementwise),
        fixed: FIXED_SIGMA,
        optimizer: OPTIMIZER_SIGMA,
        exchange: prior.exchange,
        machine: c.load.as_ref().and_then(|l| l.probe_drift).filter(|d| d.is_finite() && *d >= 0.0).unwrap_or(0.0),
        model: MODEL_SIGMA,
    }
}

/// Root mean square (`None` when empty).
pub fn rms(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| (xs.iter().map(|x| x * x).sum::<f64>() / xs.len() as f64).sqrt())
}

/// Log residuals of each interior point of a sorted positive `(x, y)` curve against the log-log line through its
/// neighbours.
pub fn leave_one_out_log_log(curve: &[(f64, f64)]) -> Vec<f64> {
    let ok = |p: &(f64, f64)| p.0 > 0.0 && p.1 > 0.0;
    curve
        .windows(3)
        .filter(|w| w.iter().all(ok) && w[2].0 > w[0].0)
        .map(|w| {
            let t = (w[1].0.ln() - w[0].0.ln()) / (w[2].0.ln() - w[0].0.ln());
            let predicted = w[0].1.ln() + t * (w[2].1.ln() - w[0].1.ln());
            w[1].1.ln() - predicted
        })
        .collect()
}

/// Log residuals of each interior point of a sorted `(x, y)` curve against the straight line through its
/// neighbours (points with a non-positive value or prediction are skipped).
pub fn leave_one_out_linear(curve: &[(f64, f64)]) -> Vec<f64> {
    curve
        .windows(3)
        .filter(|w| w[2].0 > w[0].0)
        .filter_map(|w| {
            let t = (w[1].0 - w[0].0) / (w[2].0 - w[0].0);
            let predicted = w[0].1 + t * (w[2].1 - w[0].1);
            (predicted > 0.0 && w[1].1 > 0.0).then(|| (w[1].1 / predicted).ln())
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_point_on_the_line_leaves_no_residual_and_one_off_it_its_log_distance() {
        // y = x^0.5 exactly: no residual.
        let curve: Vec<(f64, f64)> = [1.0f64, 4.0, 16.0, 64.0].iter().map(|&x| (x, x.sqrt())).collect();
        assert!(leave_one_out_log_log(&curve).iter().all(|r| r.abs() < 1e-12));
        // The middle point 10% high.
        let r = leave_one_out_log_log(&[(1.0, 1.0), (4.0, 2.2), (16.0, 4.0)]);
        assert!((r[0] - 1.1f64.ln()).abs() < 1e-12);
        let r = leave_one_out_linear(&[(0.0, 1.0), (1.0, 1.0), (2.0, 1.0), (3.0, 2.0)]);
        assert!(r[0].abs() < 1e-12 && (r[1] - (1.0f64 / 1.5).ln()).abs() < 1e-12);
        assert_eq!(rms(&[]), None);
        assert_eq!(rms(&[3.0, -4.0]).unwrap(), 12.5f64.sqrt());
    }
}
