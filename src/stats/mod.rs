//! Pure statistics over step-time samples, no I/O and no global state: quantiles, mean/stdev/CV, Tukey
//! outliers and summaries in [`describe`], MSER-5 steady-state detection in [`mser`]; seeded bootstrap confidence intervals (one-
//! and two-level) in [`bootstrap`], the Mann-Whitney U test in [`rank`]. Every item is re-exported at this level.
//!
//! Definitions used throughout:
//! - Quantiles: Hyndman & Fan type 7 (linear interpolation between order statistics at `h = (n - 1) q`), the
//!   default of NumPy, R and Excel's `PERCENTILE.INC`.
//! - Standard deviation: the sample form with `n - 1` in the denominator.
//! - Bootstrap: percentile intervals from resampling with replacement, driven by a seeded SplitMix64
//!   generator, so the same samples and seed always give the same interval.

pub mod bootstrap;
pub mod describe;
pub mod mser;
pub mod rank;

pub use bootstrap::{BOOTSTRAP_RESAMPLES, SplitMix64, bootstrap_median_ci, bootstrap_ratio_ci, hierarchical_ratio_ci};
pub use describe::{Summary, cv, mean, stdev, summarize, tukey_outliers};
pub use mser::{MSER_BATCH, Mser, mser5, mser5_start};
pub use rank::{MannWhitney, erfc, mann_whitney, normal_sf};
// The order statistics are defined once in the contract crate, so that its calibration and the backends use the
// same median.
pub use trainbench_contract::stats::{median, quantile, quantile_sorted, sorted};

#[cfg(test)]
mod tests;
