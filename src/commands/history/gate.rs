//! `history gate`: the CI check. A candidate's runs against the store's baseline for their configuration and
//! machine (a revision, the merge-base with the main branch, or the last N points), three outcomes: pass (exit
//! 0), regression (exit 1), inconclusive (exit 3: too few runs or too much noise, with how many more repeats
//! would decide); bad input stays exit 2. Prints text, a Markdown PR-comment body, or a versioned JSON verdict.

use std::path::PathBuf;

use serde_json::json;

use super::common::{HistoryFormat, OrderArg, StoreArg, read_results, store_error};
use crate::commands::{CommandError, Outcome};
use crate::history::analysis::{Baseline, GateResult, gate_in};
use crate::stats::gate::{GateOptions, GateOutcome};

/// Version of the gate's JSON verdict.
pub const VERDICT_VERSION: u32 = 1;

/// Arguments of `history gate`.
#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// The candidate's result files or folders.
    #[arg(required = true, value_name = "RESULTS")]
    pub results: Vec<PathBuf>,
    /// The baseline: a revision (or a git ref naming one), `merge-base` (the merge-base of HEAD and
    /// `origin/<main branch>`), or `last:N` (the series' last N points).
    #[arg(long, value_name = "REF")]
    pub baseline: String,
    /// The main line's branch, for `--baseline merge-base`.
    #[arg(long, value_name = "BRANCH", default_value = "main")]
    pub main_branch: String,
    /// Output format: text, a Markdown PR-comment body, or the JSON verdict.
    #[arg(long, value_enum, default_value_t = HistoryFormat::Text)]
    pub format: HistoryFormat,
    /// The order `last:N` counts points in.
    #[command(flatten)]
    pub order: OrderArg,
    /// The store.
    #[command(flatten)]
    pub store: StoreArg,
}

/// `git ARGS` in the current directory: its output when it succeeded.
fn git(args: &[&str]) -> Option<String> {
    crate::history::git::text(std::path::Path::new("."), args)
}

/// The baseline `--baseline` names.
fn resolve(args: &GateArgs) -> Result<Baseline, CommandError> {
    let reference = args.baseline.trim();
    if let Some(n) = reference.strip_prefix("last:") {
        return match n.parse::<usize>() {
            Ok(n) if n > 0 => Ok(Baseline::LastPoints(n)),
            _ => Err(CommandError::Input(format!("--baseline {reference}: `last:N` needs a positive N"))),
        };
    }
    if reference == "merge-base" {
        let remote = format!("origin/{}", args.main_branch);
        return git(&["merge-base", "HEAD", &remote])
            .or_else(|| git(&["merge-base", "HEAD", &args.main_branch]))
            .map(Baseline::Revision)
            .ok_or_else(|| {
                CommandError::Input(format!(
                    "--baseline merge-base: no merge-base of HEAD and {remote} (or {}) in this directory; fetch the \
                     main branch or name the baseline revision",
                    args.main_branch
                ))
            });
    }
    if reference.is_empty() {
        return Err(CommandError::Input("--baseline needs a revision, `merge-base` or `last:N`".into()));
    }
    let commit = format!("{reference}^{{commit}}");
    Ok(Baseline::Revision(git(&["rev-parse", "--verify", "--quiet", &commit]).unwrap_or_else(|| reference.to_string())))
}

/// One configuration's figures and why the gate decided as it did, as the text and the bisect print them:
/// ` +30.0% (95% +29.4% .. +30.7%, p = 4.60e-3) [6 baseline / 6 candidate runs]: reason`.
pub fn figures_and_reason(r: &GateResult) -> String {
    let figures = r.verdict.map_or(String::new(), |v| {
        format!(
            " {} (95% {} .. {}, p = {:.2e})",
            percent(v.relative_change),
            percent(v.interval.0),
            percent(v.interval.1),
            v.p_value
        )
    });
    let why = reason(r);
    format!(
        "{figures} [{} baseline / {} candidate runs]{}",
        r.baseline_runs,
        r.candidate_runs,
        if why.is_empty() { String::new() } else { format!(": {why}") }
    )
}

/// The outcome in one word: `pass`, `regression`, `improvement` or `inconclusive` (no verdict included).
pub fn outcome_name(r: &GateResult) -> &'static str {
    match r.verdict.map(|v| v.outcome) {
        Some(GateOutcome::Pass) => "pass",
        Some(GateOutcome::Regression) => "regression",
        Some(GateOutcome::Improvement) => "improvement",
        Some(GateOutcome::Inconclusive { .. }) | None => "inconclusive",
    }
}

/// Why an answer is inconclusive, in words (empty for a decided one).
pub fn reason(r: &GateResult) -> String {
    match r.verdict.map(|v| v.outcome) {
        None if r.baseline_runs == 0 => "no baseline runs of this configuration on this machine in the store".into(),
        None => "the candidate has no measured steps".into(),
        Some(GateOutcome::Inconclusive { more_repeats_needed: Some(n) }) => {
            format!("too noisy to decide; about {n} more repeat(s) of the candidate would")
        }
        Some(GateOutcome::Inconclusive { more_repeats_needed: None }) => {
            "too few runs, or too much noise (the baseline's runs or the series' point-to-point noise), to decide; more \
             repeats of the candidate alone would not"
                .into()
        }
        Some(_) => String::new(),
    }
}

/// A relative change as a signed percentage (`-` when not finite).
pub fn percent(x: f64) -> String {
    if x.is_finite() { format!("{:+.2}%", x * 100.0) } else { "-".into() }
}

/// Carry out `history gate`.
pub fn execute(args: &GateArgs) -> Result<Outcome, CommandError> {
    let baseline = resolve(args)?;
    let order = args.order.resolve()?;
    let read = read_results(&args.results, &|_| None)?;
    if !read.refused.is_empty() {
        for reason in &read.refused {
            eprintln!("refused: {reason}");
        }
        return Ok(Outcome::InvalidInput);
    }
    if read.runs.is_empty() {
        return Err(CommandError::Input("no measured candidate runs to gate".into()));
    }
    let mut store = args.store.open_existing()?;
    let results =
        gate_in(store.as_mut(), &read.runs, &baseline, &GateOptions::default(), &order).map_err(store_error)?;
    let overall = if results.iter().any(|r| outcome_name(r) == "regression") {
        ("regression", Outcome::Failure, 1)
    } else if results.iter().any(|r| outcome_name(r) == "inconclusive") {
        ("inconclusive", Outcome::Inconclusive, 3)
    } else {
        ("pass", Outcome::Success, 0)
    };
    match args.format {
        HistoryFormat::Json => {
            let series: Vec<serde_json::Value> = results
                .iter()
                .map(|r| {
                    json!({
                        "series": r.series,
                        "configuration": r.config_label,
                        "machine": r.machine_label,
                        "outcome": outcome_name(r),
                        "relative_change": r.verdict.map(|v| v.relative_change),
                        "interval": r.verdict.map(|v| [v.interval.0, v.interval.1]),
                        "p_value": r.verdict.map(|v| v.p_value),
                        "noise": r.verdict.map(|v| v.noise),
                        "series_noise": r.series_noise,
                        "more_repeats_needed": match r.verdict.map(|v| v.outcome) {
                            Some(GateOutcome::Inconclusive { more_repeats_needed }) => more_repeats_needed,
                            _ => None,
                        },
                        "baseline_runs": r.baseline_runs,
                        "candidate_runs": r.candidate_runs,
                        "reason": reason(r),
                    })
                })
                .collect();
            let verdict = json!({
                "format": "trainbench-gate",
                "version": VERDICT_VERSION,
                "outcome": overall.0,
                "exit_code": overall.2,
                "baseline": baseline.to_string(),
                "series": series,
            });
            outln!("{}", serde_json::to_string_pretty(&verdict)?);
        }
        HistoryFormat::Markdown => {
            outln!("## trainbench gate: **{}**\n", overall.0);
            outln!("Step time of {} configuration(s) against the baseline ({baseline}).\n", results.len());
            outln!(
                "| configuration | machine | outcome | change | 95% interval | p | runs (baseline / candidate) | note |"
            );
            outln!("|---|---|---|---:|---|---:|---|---|");
            for r in &results {
                let (change, interval, p) = r.verdict.map_or(("-".into(), "-".into(), "-".into()), |v| {
                    (
                        percent(v.relative_change),
                        format!("{} .. {}", percent(v.interval.0), percent(v.interval.1)),
                        format!("{:.2e}", v.p_value),
                    )
                });
                outln!(
                    "| `{}` | {} | {} | {change} | {interval} | {p} | {} / {} | {} |",
                    r.config_label,
                    r.machine_label,
                    outcome_name(r),
                    r.baseline_runs,
                    r.candidate_runs,
                    reason(r)
                );
            }
        }
        HistoryFormat::Text => {
            for r in &results {
                outln!("{:<12} {}{}", outcome_name(r), r.series, figures_and_reason(r));
            }
            outln!("gate: {} (baseline: {baseline})", overall.0);
        }
    }
    Ok(overall.1)
}
