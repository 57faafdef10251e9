//! The check that a layout's run trained what one rank trained: beside the losses, the gradient's norm at the
//! first and last measured step and each whole trained tensor's norm after the last step.

use trainbench::result::RunResult;

/// `other`'s gradient norms and weight norms equal `one`'s within `tolerance` (relative); `what` names the run.
/// The tensors `noise_driven` (indices in one rank's order) are held to 1% only: a tensor whose gradient is
/// zero in exact arithmetic (a key projection's bias: every key moved by the same vector leaves the softmax
/// unchanged) is stepped by Adam on round-off, which differs with the order of the sums.
pub fn assert_trains_like(one: &RunResult, other: &RunResult, tolerance: f64, what: &str, noise_driven: &[usize]) {
    let (a, b) = (one.metrics.as_ref().unwrap(), other.metrics.as_ref().unwrap());
    let within = |x: f64, y: f64, tolerance: f64| (x - y).abs() <= tolerance * y.abs().max(1e-12);
    let close = |x: f64, y: f64| within(x, y, tolerance);
    let (ga, gb) = (a.gradient_norm.as_ref().unwrap(), b.gradient_norm.as_ref().unwrap());
    for (x, y, when) in [(gb.first, ga.first, "first"), (gb.last, ga.last, "last")] {
        let (x, y) = (x.unwrap(), y.unwrap());
        assert!(y > 0.0 && close(x, y), "{what}: gradient norm at the {when} step {x}, one rank's {y}");
    }
    let (wa, wb) = (a.weight_norms.as_ref().unwrap(), b.weight_norms.as_ref().unwrap());
    assert_eq!(wa.len(), wb.len(), "{what}: the same trained tensors");
    let tolerance_of = |i: usize| if noise_driven.contains(&i) { 1e-2 } else { tolerance };
    let apart: Vec<(usize, f64, f64)> = wb
        .iter()
        .zip(wa)
        .enumerate()
        .filter(|(i, (x, y))| !within(**x, **y, tolerance_of(*i)))
        .map(|(i, (x, y))| (i, *x, *y))
        .collect();
    assert!(apart.is_empty(), "{what}: tensors' norms after the last step (index, here, one rank's): {apart:?}");
}
