//! Unit tests of `stats::student_t` against closed forms (t with 1, 2 and 3 degrees of freedom, the gamma
//! function at known points, the incomplete beta at integer shapes) and a hand-worked Welch test.
#![allow(clippy::unwrap_used)]

use super::student_t::*;
use std::f64::consts::PI;

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b.abs().max(1e-300)
}

#[test]
fn ln_gamma_matches_factorials_and_half_integers() {
    assert!(ln_gamma(1.0).abs() < 1e-13);
    assert!(ln_gamma(2.0).abs() < 1e-13);
    assert!(close(ln_gamma(10.0), 362_880f64.ln(), 1e-13));
    assert!(close(ln_gamma(0.5), PI.sqrt().ln(), 1e-13));
    // G(3.5) = 15/8 sqrt(pi)
    assert!(close(ln_gamma(3.5), (15.0 / 8.0 * PI.sqrt()).ln(), 1e-13));
    assert!(close(ln_gamma(171.0), (1..=170).map(|k| (k as f64).ln()).sum::<f64>(), 1e-13));
    assert!(ln_gamma(0.0).is_nan() && ln_gamma(-1.5).is_nan() && ln_gamma(f64::NAN).is_nan());
}

#[test]
fn incomplete_beta_at_integer_shapes_is_a_binomial_tail() {
    // I_x(2, 3) = P(Bin(4, x) >= 2) = 1 - (1 - x)^4 - 4 x (1 - x)^3
    for x in [0.01, 0.3, 0.5, 0.7, 0.99] {
        let expected = 1.0 - (1.0f64 - x).powi(4) - 4.0 * x * (1.0f64 - x).powi(3);
        assert!(close(regularized_incomplete_beta(x, 2.0, 3.0), expected, 1e-12), "x {x}");
        assert!(close(regularized_incomplete_beta(x, 1.0, 1.0), x, 1e-12));
    }
    assert_eq!(regularized_incomplete_beta(0.0, 2.0, 3.0), 0.0);
    assert_eq!(regularized_incomplete_beta(1.0, 2.0, 3.0), 1.0);
    assert!(regularized_incomplete_beta(0.5, 0.0, 3.0).is_nan());
}

#[test]
fn t_tails_match_closed_forms() {
    for t in [0.0f64, 0.1, 1.0, 2.5, 10.0, 1000.0] {
        // df = 1 (Cauchy): p = 1 - 2/pi atan(t) = 2/pi atan(1/t)
        let cauchy = if t == 0.0 { 1.0 } else { 2.0 / PI * (1.0 / t).atan() };
        assert!(close(student_t_two_sided_p(t, 1.0), cauchy, 1e-10), "df 1 t {t}");
        // df = 2: p = 1 - t / sqrt(2 + t^2) = 2 / (sqrt(2 + t^2) (sqrt(2 + t^2) + t))
        let r = (2.0 + t * t).sqrt();
        assert!(close(student_t_two_sided_p(t, 2.0), 2.0 / (r * (r + t)), 1e-10), "df 2 t {t}");
        // df = 3: p = 1 - 2/pi (atan(u) + u / (1 + u^2)), u = t / sqrt(3)
        let u = t / 3f64.sqrt();
        let df3 = 1.0 - 2.0 / PI * (u.atan() + u / (1.0 + u * u));
        if df3 > 1e-6 {
            assert!(close(student_t_two_sided_p(t, 3.0), df3, 1e-9), "df 3 t {t}");
        }
    }
    // Tabulated critical values: t_{0.975}(10) = 2.228138852, t_{0.975}(30) = 2.042272456.
    assert!(close(student_t_two_sided_p(2.228_138_852, 10.0), 0.05, 1e-8));
    assert!(close(student_t_two_sided_p(2.042_272_456, 30.0), 0.05, 1e-8));
    // Many degrees of freedom: the normal.
    assert!(close(student_t_two_sided_p(1.959_963_985, 1e9), 0.05, 1e-6));
    assert!(close(student_t_two_sided_p(1.959_963_985, f64::INFINITY), 0.05, 1e-8));
    assert_eq!(student_t_two_sided_p(f64::INFINITY, 5.0), 0.0);
    assert!(student_t_two_sided_p(1.0, 0.0).is_nan());
    assert!(student_t_two_sided_p(f64::NAN, 3.0).is_nan());
}

#[test]
fn t_quantile_inverts_the_tail() {
    assert!(close(student_t_two_sided_quantile(0.05, 10.0), 2.228_138_852, 1e-8));
    assert!(close(student_t_two_sided_quantile(0.05, 30.0), 2.042_272_456, 1e-8));
    for (p, df) in [(0.01, 3.0), (0.5, 7.3), (1e-6, 2.0)] {
        let t = student_t_two_sided_quantile(p, df);
        assert!(close(student_t_two_sided_p(t, df), p, 1e-9), "p {p} df {df}");
    }
    assert!(student_t_two_sided_quantile(1.0, 4.0) < 1e-12);
    assert!(student_t_two_sided_quantile(0.0, 4.0).is_nan());
    assert!(student_t_two_sided_quantile(0.05, -1.0).is_nan());
}

#[test]
fn welch_test_worked_example() {
    // a: mean 3, variance 2.5; b: mean 7, variance 14. se^2 = 2.5/5 + 14/6 = 17/6.
    let a = [1.0, 2.0, 3.0, 4.0, 5.0];
    let b = [2.0, 4.0, 6.0, 8.0, 10.0, 12.0];
    let w = welch_t_test(&a, &b).unwrap();
    let se2: f64 = 17.0 / 6.0;
    assert!(close(w.t, 4.0 / se2.sqrt(), 1e-12));
    let df = se2 * se2 / (0.25 / 4.0 + (14.0f64 / 6.0).powi(2) / 5.0);
    assert!(close(w.df, df, 1e-12));
    assert!(close(w.p_value, student_t_two_sided_p(w.t, df), 1e-12));
    assert!(w.p_value > 0.04 && w.p_value < 0.06, "p {}", w.p_value);
    assert_eq!((w.mean_a, w.mean_b), (3.0, 7.0));
    // Symmetric in the sign of the difference.
    let back = welch_t_test(&b, &a).unwrap();
    assert!(close(back.t, -w.t, 1e-12) && close(back.p_value, w.p_value, 1e-12));
}

#[test]
fn welch_test_edge_cases() {
    assert!(welch_t_test(&[1.0], &[1.0, 2.0]).is_none());
    assert!(welch_t_test(&[1.0, f64::NAN], &[1.0, 2.0]).is_none());
    assert_eq!(welch_t_test(&[2.0, 2.0], &[2.0, 2.0, 2.0]).unwrap().p_value, 1.0);
    assert_eq!(welch_t_test(&[2.0, 2.0], &[3.0, 3.0, 3.0]).unwrap().p_value, 0.0);
}
