//! MSER-5 steady-state detection: where the transient at the start of a series of step times ends.

/// Batch size of MSER-5.
pub const MSER_BATCH: usize = 5;

/// Steady-state start by MSER-5 (White 1997; White, Cobb & Spratt 2000; Franklin & White 2008).
///
/// The series is cut into non-overlapping batches of 5 whose means form `Y_1..Y_k` (a trailing partial batch
/// is ignored). For each candidate truncation `d` in `0..=k/2` the marginal standard error
/// `MSER(d) = sum_{i>d} (Y_i - mean(Y_{d+1..k}))^2 / (k - d)^2` is computed, and the `d` that minimises it wins;
/// the returned start index is `5 d`. Why this method: it needs no tolerance or window parameter, it trades
/// bias (keeping transient iterations) against variance (dropping data) explicitly, it is among the
/// best-performing truncation rules in published comparisons, and restricting `d` to the first half keeps it
/// from discarding most of a run whose tail happens to be quiet. Series shorter than two batches, or with
/// non-finite values, are not truncated (0 is returned).
pub fn mser5_start(xs: &[f64]) -> usize {
    mser5(xs).start
}

/// Outcome of MSER-5 truncation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mser {
    /// First index of the steady state.
    pub start: usize,
    /// True when the minimum fell on the largest truncation allowed (half the batches): the series may not
    /// have reached steady state, and a longer measurement would tell.
    pub capped: bool,
}

/// MSER-5 truncation (see [`mser5_start`]), also telling whether the truncation hit its cap.
pub fn mser5(xs: &[f64]) -> Mser {
    let k = xs.len() / MSER_BATCH;
    if k < 2 || xs.iter().any(|x| !x.is_finite()) {
        return Mser { start: 0, capped: false };
    }
    let batches: Vec<f64> = xs.chunks_exact(MSER_BATCH).map(|c| c.iter().sum::<f64>() / MSER_BATCH as f64).collect();
    // The sum of squared deviations of every tail `batches[d..]`, accumulated from the end in one pass
    // (Welford's update: stable, and exactly 0 for a constant tail), so a run of millions of steps costs O(n).
    let mut tail_ss = vec![0.0; k];
    let (mut mean, mut ss) = (0.0, 0.0);
    for (i, &y) in batches.iter().enumerate().rev() {
        let n = (k - i) as f64;
        let delta = y - mean;
        mean += delta / n;
        ss += delta * (y - mean);
        tail_ss[i] = ss;
    }
    let mut best = (f64::INFINITY, 0);
    for (d, &ss) in tail_ss.iter().enumerate().take(k / 2 + 1) {
        let len = (k - d) as f64;
        let mser = ss.max(0.0) / (len * len);
        // Strictly smaller: among equal values the earliest (least truncation) wins.
        if mser < best.0 {
            best = (mser, d);
        }
    }
    Mser { start: best.1 * MSER_BATCH, capped: best.1 > 0 && best.1 == k / 2 }
}
