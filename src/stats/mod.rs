//! Pure statistics over step-time samples, no I/O and no global state: quantiles, mean/stdev/CV, Tukey
//! outliers and summaries in [`describe`], MSER-5 steady-state detection in [`mser`]; seeded bootstrap confidence
//! intervals (one- and two-level) in [`bootstrap`], the Mann-Whitney U test in [`rank`] (these re-exported at
//! this level); Student's t and Welch's test in [`student_t`], change points of a series of runs in
//! [`changepoint`] and the CI gate's three-outcome verdict in [`gate`] (used through their modules).
//!
//! Definitions used throughout:
//! - Quantiles: Hyndman & Fan type 7 (linear interpolation between order statistics at `h = (n - 1) q`), the
//!   default of NumPy, R and Excel's `PERCENTILE.INC`.
//! - Standard deviation: the sample form with `n - 1` in the denominator.
//! - Bootstrap: percentile intervals from resampling with replacement, driven by a seeded SplitMix64
//!   generator, so the same samples and seed always give the same interval.

pub mod bootstrap;
pub mod changepoint;
pub mod describe;
pub mod gate;
pub mod mser;
pub mod rank;
pub mod student_t;

pub use bootstrap::{BOOTSTRAP_RESAMPLES, SplitMix64, bootstrap_median_ci, bootstrap_ratio_ci, hierarchical_ratio_ci};
pub use describe::{Summary, cv, mean, stdev, summarize, tukey_outliers};
pub use mser::{MSER_BATCH, Mser, mser5, mser5_start};
pub use rank::{MannWhitney, erfc, mann_whitney, normal_sf};
// The order statistics are defined once in the contract crate, so that its calibration and the backends use the
// same median.
pub use trainbench_contract::stats::{median, quantile, quantile_sorted, sorted};

#[cfg(test)]
mod changepoint_tests;
#[cfg(test)]
mod gate_tests;
#[cfg(test)]
mod student_t_tests;
#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
