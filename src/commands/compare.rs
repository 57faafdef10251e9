//! The `compare` subcommand: statistical comparison of a candidate result set against a baseline.

use std::path::PathBuf;

use super::{CommandError, Outcome};
use crate::compare::{self, CompareOptions, render};
use crate::result::load;

/// Arguments of `trainbench compare`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Baseline: a result file or a results folder (searched recursively).
    #[arg(value_name = "BASELINE")]
    pub baseline: PathBuf,
    /// Candidate: a result file or a results folder (searched recursively).
    #[arg(value_name = "CANDIDATE")]
    pub candidate: PathBuf,
    /// Smallest change of the median step time that counts: `5%` or `0.05`.
    #[arg(long, default_value = "5%", value_parser = compare::parse_threshold)]
    pub threshold: f64,
    /// Significance level of the Mann-Whitney U test.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = render::Format::Table)]
    pub format: render::Format,
    /// Compare pairs whose device, backend or library versions differ (with a warning) instead of refusing.
    #[arg(long)]
    pub allow_env_diff: bool,
    /// Seed of the bootstrap resampling.
    #[arg(long, default_value_t = CompareOptions::default().seed)]
    pub seed: u64,
}

/// Carry out `trainbench compare`.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    if !(args.alpha > 0.0 && args.alpha < 1.0) {
        return Err(CommandError::Input(format!("--alpha {} must be between 0 and 1", args.alpha)));
    }
    let input = |p: &PathBuf| load::load_all(std::slice::from_ref(p)).map_err(|e| CommandError::Input(e.to_string()));
    let baseline = input(&args.baseline)?;
    let candidate = input(&args.candidate)?;
    let opts = CompareOptions {
        threshold: args.threshold,
        alpha: args.alpha,
        allow_env_diff: args.allow_env_diff,
        seed: args.seed,
        ..CompareOptions::default()
    };
    let comparison = compare::compare(&baseline, &candidate, &opts);
    out!("{}", render::render(&comparison, args.format));
    Ok(if comparison.has_regression() { Outcome::Failure } else { Outcome::Success })
}
