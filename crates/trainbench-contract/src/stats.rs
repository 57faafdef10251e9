//! Order statistics shared by the contract crate and the CLI crate (which re-exports them from its `stats`
//! module, the name every stage uses): a sorted copy, quantiles by Hyndman & Fan type 7 (linear interpolation
//! between order statistics at `h = (n - 1) q`, the default of NumPy, R and Excel's `PERCENTILE.INC`) and the
//! median, type 7's `q = 0.5`: the middle value of an odd count, the mean of the two middle values of an even one.

/// A sorted copy of the samples (NaNs sort last, by `total_cmp`).
pub fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// Quantile `q` in `0..=1` of already **sorted** samples, type 7 (see the module docs); `None` if empty.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let h = (n - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// Quantile `q` of unsorted samples.
pub fn quantile(xs: &[f64], q: f64) -> Option<f64> {
    quantile_sorted(&sorted(xs), q)
}

/// Median of unsorted samples; `None` for none.
pub fn median(xs: &[f64]) -> Option<f64> {
    quantile(xs, 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_two_middle_values() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[1.0, 10.0]), Some(5.5));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn quantiles_interpolate_between_order_statistics() {
        let xs = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&xs, 0.25), Some(2.0));
        assert_eq!(quantile(&xs, 0.1), Some(1.4));
        assert_eq!(quantile(&xs, 1.0), Some(5.0));
        assert_eq!(quantile(&xs, 2.0), Some(5.0), "q is clamped");
    }
}
