//! The Mann-Whitney U rank test, with the normal tail probability it needs (`normal_sf`, `erfc`).

/// Result of a two-sided Mann-Whitney U test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// U statistic of the first sample (number of pairs `(a, b)` with `a > b`, ties counting one half).
    pub u: f64,
    /// Standardised statistic with continuity and tie corrections.
    pub z: f64,
    /// Two-sided p-value from the normal approximation.
    pub p_value: f64,
    /// Probability that a random `a` exceeds a random `b` (ties half): `U / (n_a n_b)`.
    pub prob_a_greater: f64,
}

/// Mann-Whitney U test of `a` against `b`: mid-ranks for ties, normal approximation with the tie-corrected
/// variance `n_a n_b / 12 * ((n + 1) - sum(t^3 - t) / (n (n - 1)))` and a 0.5 continuity correction (as SciPy's
/// `mannwhitneyu(..., method="asymptotic")`). `None` if a sample is empty.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    let (na, nb) = (a.len(), b.len());
    if na == 0 || nb == 0 {
        return None;
    }
    let mut all: Vec<(f64, bool)> = a.iter().map(|&x| (x, true)).chain(b.iter().map(|&x| (x, false))).collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len();
    let (mut rank_sum_a, mut tie_term) = (0.0, 0.0);
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let mid_rank = (i + j) as f64 / 2.0 + 1.0;
        rank_sum_a += mid_rank * all[i..=j].iter().filter(|e| e.1).count() as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    let (fa, fb, fnn) = (na as f64, nb as f64, n as f64);
    let u = rank_sum_a - fa * (fa + 1.0) / 2.0;
    let mu = fa * fb / 2.0;
    let var = if n > 1 { fa * fb / 12.0 * ((fnn + 1.0) - tie_term / (fnn * (fnn - 1.0))) } else { 0.0 };
    let (z, p_value) = if var > 0.0 {
        let d = (u - mu).abs() - 0.5;
        let z = d.max(0.0) / var.sqrt() * (u - mu).signum();
        (z, (2.0 * normal_sf(z.abs())).min(1.0))
    } else {
        (0.0, 1.0)
    };
    Some(MannWhitney { u, z, p_value, prob_a_greater: u / (fa * fb) })
}

/// Survival function of the standard normal, `P(Z > x)`.
pub fn normal_sf(x: f64) -> f64 {
    0.5 * erfc(x / std::f64::consts::SQRT_2)
}

/// Complementary error function: a positive-term series of erf for |x| < 3, the Laplace continued fraction
/// beyond (both accurate to about 1e-11 relative or better, ample for p-values).
pub fn erfc(x: f64) -> f64 {
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x < 3.0 {
        // erf(x) = 2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1) / (1 * 3 * ... * (2n+1)): no cancellation.
        let (mut term, mut sum, x2) = (x, x, x * x);
        for n in 1..500 {
            term *= 2.0 * x2 / (2 * n + 1) as f64;
            sum += term;
            if term < 1e-17 * sum {
                break;
            }
        }
        1.0 - sum * 2.0 / std::f64::consts::PI.sqrt() * (-x2).exp()
    } else {
        // erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + 2/(x + ...)))))
        let mut f = x;
        for k in (1..=60).rev() {
            f = x + (k as f64 / 2.0) / f;
        }
        (-x * x).exp() / std::f64::consts::PI.sqrt() / f
    }
}
