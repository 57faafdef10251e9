//! Reproducibility audit of a result: check its integrity, re-run its embedded spec for the same run on this
//! machine, and compare environment and metrics with the statistics of `compare`.
//!
//! Verdicts: *invalid* (the file fails its integrity checks: edited, or spec and hash disagree), *reproduced*
//! (no significant step-time change beyond the tolerance, throughput and peak memory within the tolerance, same
//! outcome), *not reproduced* otherwise.

pub mod integrity;
pub mod rerun;

use serde::Serialize;

pub use integrity::{IntegrityIssue, verify};

use crate::compare::{self, Change, CompareOptions, EnvDifference, StepTimeComparison, Verdict};
use crate::result::RunResult;

/// Settings of an audit.
#[derive(Debug, Clone)]
pub struct AuditOptions {
    /// Largest relative difference of the median step time, throughput and peak memory that still counts as
    /// reproduced (0.10 = 10%).
    pub tolerance: f64,
    /// Statistics settings (their threshold is replaced by `tolerance`).
    pub compare: CompareOptions,
}

impl Default for AuditOptions {
    fn default() -> Self {
        Self { tolerance: 0.10, compare: CompareOptions::default() }
    }
}

/// The verdict of an audit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditVerdict {
    /// Re-run matches within the tolerance (exit 0).
    Reproduced,
    /// Re-run differs beyond the tolerance, or ended differently (exit 1).
    NotReproduced,
    /// The result file is inconsistent or edited; nothing was re-run (exit 2).
    Invalid,
    /// Only the integrity was checked (`--integrity-only`), and it passed (exit 0).
    Consistent,
}

/// Everything an audit found.
#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    /// Run audited.
    pub run_id: String,
    /// Spec name.
    pub spec: String,
    /// Integrity problems of the result file (empty when consistent).
    pub integrity: Vec<IntegrityIssue>,
    /// Outcome of the original and of the re-run.
    pub outcomes: Option<[String; 2]>,
    /// Environment differences between the original and the re-run.
    pub env_differences: Vec<EnvDifference>,
    /// Step-time statistics, original vs re-run.
    pub step_time: Option<StepTimeComparison>,
    /// Samples per second, original vs re-run.
    pub throughput: Option<Change>,
    /// Peak allocated bytes, original vs re-run.
    pub peak_memory: Option<Change>,
    /// Why the verdict is what it is.
    pub reasons: Vec<String>,
    /// The verdict.
    pub verdict: AuditVerdict,
}

/// Why the re-run could not be carried out.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RerunError(pub String);

fn change(a: Option<f64>, b: Option<f64>) -> Option<Change> {
    let (a, b) = (a?, b?);
    (a > 0.0).then(|| Change { baseline: a, candidate: b, ratio: b / a })
}

fn peak(r: &RunResult) -> Option<f64> {
    r.metrics.as_ref()?.memory.measured.peak_allocated_bytes.map(|b| b as f64)
}

fn samples_per_s(r: &RunResult) -> Option<f64> {
    r.metrics.as_ref().map(|m| m.throughput.samples_per_s)
}

/// Compare an original result with its re-run.
pub fn assess(original: &RunResult, rerun: &RunResult, opts: &AuditOptions) -> AuditReport {
    let mut report = AuditReport {
        run_id: original.run_id.clone(),
        spec: original.spec_name.clone(),
        integrity: Vec::new(),
        outcomes: Some([original.outcome.status().to_string(), rerun.outcome.status().to_string()]),
        env_differences: compare::differences(original, rerun),
        step_time: None,
        throughput: change(samples_per_s(original), samples_per_s(rerun)),
        peak_memory: change(peak(original), peak(rerun)),
        reasons: Vec::new(),
        verdict: AuditVerdict::Reproduced,
    };
    let tol = opts.tolerance;
    if original.outcome.status() != rerun.outcome.status() {
        report.reasons.push(format!(
            "the original ended `{}`, the re-run `{}`",
            original.outcome.status(),
            rerun.outcome.status()
        ));
    }
    let stats_opts = CompareOptions { threshold: tol, ..opts.compare.clone() };
    let (a, b) = (original.steady_step_times().to_vec(), rerun.steady_step_times().to_vec());
    if !a.is_empty() && !b.is_empty() {
        if let Some((cmp, verdict)) = compare::compare_samples(&[a], &[b], &stats_opts) {
            if verdict != Verdict::NoChange {
                report.reasons.push(format!(
                    "median step time {} by {:.1}% (95% CI {:+.1}%..{:+.1}%, p = {:.2e}), beyond the {:.0}% tolerance",
                    if verdict == Verdict::Slower { "rose" } else { "fell" },
                    (cmp.ratio - 1.0).abs() * 100.0,
                    (cmp.ratio_ci[0] - 1.0) * 100.0,
                    (cmp.ratio_ci[1] - 1.0) * 100.0,
                    cmp.p_value,
                    tol * 100.0
                ));
            }
            report.step_time = Some(cmp);
        }
    }
    if let Some(t) = &report.throughput
        && (t.ratio - 1.0).abs() > tol
    {
        report.reasons.push(format!("throughput differs by {:+.1}%", (t.ratio - 1.0) * 100.0));
    }
    if let Some(m) = &report.peak_memory
        && (m.ratio - 1.0).abs() > tol
    {
        report.reasons.push(format!("peak allocated memory differs by {:+.1}%", (m.ratio - 1.0) * 100.0));
    }
    if !report.reasons.is_empty() {
        report.verdict = AuditVerdict::NotReproduced;
        let blocking: Vec<String> =
            report.env_differences.iter().filter(|d| d.blocking).map(EnvDifference::describe).collect();
        if !blocking.is_empty() {
            report.reasons.push(format!("note: the environments differ ({})", blocking.join("; ")));
        }
    }
    report
}

/// Check only the integrity of a result: verdict `Consistent` or `Invalid`.
pub fn integrity_report(original: &RunResult) -> AuditReport {
    let issues = verify(original);
    let (verdict, reasons) = if issues.is_empty() {
        (AuditVerdict::Consistent, Vec::new())
    } else {
        (AuditVerdict::Invalid, vec!["the result file is not internally consistent; it was not re-run".to_string()])
    };
    AuditReport {
        run_id: original.run_id.clone(),
        spec: original.spec_name.clone(),
        integrity: issues,
        outcomes: None,
        env_differences: Vec::new(),
        step_time: None,
        throughput: None,
        peak_memory: None,
        reasons,
        verdict,
    }
}

/// Audit a result: verify its integrity, then (only if it is consistent) re-run it with `rerun` and assess.
pub fn audit<F>(original: &RunResult, opts: &AuditOptions, rerun: F) -> Result<AuditReport, RerunError>
where
    F: FnOnce(&RunResult) -> Result<RunResult, RerunError>,
{
    let checked = integrity_report(original);
    if checked.verdict == AuditVerdict::Invalid {
        return Ok(checked);
    }
    let again = rerun(original)?;
    Ok(assess(original, &again, opts))
}

/// Render an audit report for the terminal.
pub fn render(r: &AuditReport) -> String {
    use crate::format::{self, human_bytes};
    let mut out = format!("audit of {} (spec {})\n", r.run_id, r.spec);
    if r.integrity.is_empty() {
        out.push_str("integrity: ok (spec hash matches, summary figures match the stored samples)\n");
    } else {
        out.push_str("integrity: FAILED\n");
        for i in &r.integrity {
            out.push_str(&format!("  - {}: {}\n", i.field, i.message));
        }
    }
    if let Some([a, b]) = &r.outcomes {
        out.push_str(&format!("outcome: original {a}, re-run {b}\n"));
    }
    if !r.env_differences.is_empty() {
        out.push_str("environment differences (original vs re-run):\n");
        for d in &r.env_differences {
            let mark = if d.blocking { " [affects comparability]" } else { "" };
            out.push_str(&format!("  - {}: {} vs {}{mark}\n", d.field, d.baseline, d.candidate));
        }
    } else if r.outcomes.is_some() {
        out.push_str("environment: identical\n");
    }
    if let Some(s) = &r.step_time {
        out.push_str(&format!(
            "median step time: {} -> {} ({:+.1}%, 95% CI {:+.1}%..{:+.1}%, Mann-Whitney p = {:.2e}, n = {}/{})\n",
            format::ms(s.baseline_median_s),
            format::ms(s.candidate_median_s),
            (s.ratio - 1.0) * 100.0,
            (s.ratio_ci[0] - 1.0) * 100.0,
            (s.ratio_ci[1] - 1.0) * 100.0,
            s.p_value,
            s.samples[0],
            s.samples[1]
        ));
    }
    if let Some(t) = &r.throughput {
        out.push_str(&format!(
            "throughput: {} -> {} samples/s ({:+.1}%)\n",
            format::sig(t.baseline),
            format::sig(t.candidate),
            (t.ratio - 1.0) * 100.0
        ));
    }
    if let Some(m) = &r.peak_memory {
        out.push_str(&format!(
            "peak allocated: {} -> {} ({:+.1}%)\n",
            human_bytes(m.baseline as u64),
            human_bytes(m.candidate as u64),
            (m.ratio - 1.0) * 100.0
        ));
    }
    for reason in &r.reasons {
        out.push_str(&format!("  - {reason}\n"));
    }
    out.push_str(match r.verdict {
        AuditVerdict::Reproduced => "verdict: REPRODUCED within tolerance\n",
        AuditVerdict::NotReproduced => "verdict: NOT REPRODUCED\n",
        AuditVerdict::Invalid => "verdict: INVALID result file\n",
        AuditVerdict::Consistent => "verdict: consistent (integrity only; not re-run)\n",
    });
    out
}
