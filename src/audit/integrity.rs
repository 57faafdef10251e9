//! Integrity of a result file: the embedded spec matches its hash, and every derived figure matches what
//! recomputing it from the stored samples and plan gives. A result edited by hand fails here.

use crate::digest::sha256_hex;
use crate::result::{Metrics, RunOutcome, RunResult};
use crate::stats;
use trainbench_contract::Budget;

/// Relative tolerance for recomputed floating-point figures (they are recomputed with the same formulas, so
/// only JSON round-off separates them).
const REL_TOL: f64 = 1e-9;

/// One inconsistency found in a result file.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IntegrityIssue {
    /// The field at fault (`environment.spec_sha256`, `metrics.step_time.median_s`, ...).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn close(a: f64, b: f64) -> bool {
    if a == b {
        return true;
    }
    let scale = a.abs().max(b.abs());
    (a - b).abs() <= REL_TOL * scale.max(f64::MIN_POSITIVE)
}

struct Checker {
    issues: Vec<IntegrityIssue>,
}

impl Checker {
    fn fail(&mut self, field: &str, message: String) {
        self.issues.push(IntegrityIssue { field: field.to_string(), message });
    }
    fn num(&mut self, field: &str, stored: f64, recomputed: f64) {
        if !close(stored, recomputed) {
            self.fail(field, format!("stored {stored} but the samples give {recomputed}"));
        }
    }
    fn int(&mut self, field: &str, stored: u64, recomputed: u64) {
        if stored != recomputed {
            self.fail(field, format!("stored {stored} but recomputing gives {recomputed}"));
        }
    }
}

/// Check a result for internal consistency; an empty list means it is consistent.
pub fn verify(r: &RunResult) -> Vec<IntegrityIssue> {
    let mut c = Checker { issues: Vec::new() };
    let env = &r.environment;
    let hash = sha256_hex(&env.spec_canonical);
    if !hash.eq_ignore_ascii_case(&env.spec_sha256) {
        c.fail(
            "environment.spec_sha256",
            format!("the embedded spec hashes to {hash}, not to the recorded {}", env.spec_sha256),
        );
    }
    match toml::from_str::<toml::Table>(&env.spec_canonical) {
        Ok(spec) => {
            if spec.get("name").and_then(|n| n.as_str()) != Some(r.spec_name.as_str()) {
                c.fail("spec_name", format!("`{}` is not the name of the embedded spec", r.spec_name));
            }
        }
        Err(e) => c.fail("environment.spec_canonical", format!("not valid TOML: {}", e.message())),
    }
    if r.plan.id != r.run_id {
        c.fail("run_id", format!("`{}` differs from the plan's id `{}`", r.run_id, r.plan.id));
    }
    if env.seed != r.plan.seed {
        c.fail("environment.seed", format!("{} differs from the plan's seed {}", env.seed, r.plan.seed));
    }
    match (&r.outcome, &r.metrics) {
        (RunOutcome::Completed, None) => c.fail("metrics", "the run completed but has no metrics".into()),
        (RunOutcome::Skipped { .. } | RunOutcome::OutOfMemory { .. } | RunOutcome::Failed { .. }, Some(_)) => {
            c.fail("metrics", format!("a run with outcome `{}` has metrics", r.outcome.status()))
        }
        _ => {}
    }
    if let Some(m) = &r.metrics {
        verify_metrics(&mut c, r, m);
    }
    if let (Some(a), Some(m)) = (&r.analysis, &r.metrics) {
        if m.memory.estimate.as_ref() != Some(&a.memory) {
            c.fail("metrics.memory.estimate", "differs from analysis.memory".into());
        }
        if let Some(f) = m.flops.flops_per_sample {
            c.int("metrics.flops.flops_per_sample", f, a.train_flops_per_sample);
        }
    }
    c.issues
}

fn verify_metrics(c: &mut Checker, r: &RunResult, m: &Metrics) {
    let all = &m.step_times_s;
    let seen = m.samples_seen.unwrap_or(all.len() as u64);
    if let (RunOutcome::Completed, Budget::Iterations(n)) = (&r.outcome, r.plan.budget) {
        c.int(if m.samples_seen.is_some() { "metrics.samples_seen" } else { "metrics.step_times_s" }, seen, n);
    }
    if let Some(kept) = m.samples_kept {
        c.int("metrics.step_times_s", all.len() as u64, kept);
    }
    let ss = &m.steady_state;
    if ss.start_index as u64 > seen {
        c.fail("metrics.steady_state.start_index", format!("{} is past the {seen} samples", ss.start_index));
        return;
    }
    c.int("metrics.steady_state.truncated", ss.truncated as u64, ss.start_index as u64);
    c.int("metrics.steady_state.warmup_iterations", ss.warmup_iterations, r.plan.warmup);
    match &m.step_indices {
        None => verify_every_step(c, r, m),
        Some(indices) => verify_sampled_steps(c, r, m, seen, indices),
    }
    verify_derived(c, r, m);
}

/// A result that kept every step: each statistic recomputed from them.
fn verify_every_step(c: &mut Checker, r: &RunResult, m: &Metrics) {
    let steady = r.steady_step_times();
    let steady = steady.as_ref();
    let Some(s) = stats::summarize(steady) else {
        c.fail("metrics.step_times_s", "no steady-state samples".into());
        return;
    };
    let st = &m.step_time;
    c.int("metrics.step_time.n", st.n as u64, s.n as u64);
    c.num("metrics.step_time.mean_s", st.mean_s, s.mean);
    c.num("metrics.step_time.median_s", st.median_s, s.median);
    c.num("metrics.step_time.p5_s", st.p5_s, s.p5);
    c.num("metrics.step_time.p95_s", st.p95_s, s.p95);
    c.num("metrics.step_time.p99_s", st.p99_s, s.p99);
    c.num("metrics.step_time.stdev_s", st.stdev_s, s.stdev);
    c.num("metrics.step_time.cv", st.cv, s.cv);
    c.num("metrics.step_time.min_s", st.min_s, s.min);
    c.num("metrics.step_time.max_s", st.max_s, s.max);
    c.int("metrics.step_time.outliers", st.outliers as u64, s.outliers as u64);
    let [lo, hi] = st.median_ci95_s;
    if !(lo <= st.median_s && st.median_s <= hi) {
        c.fail("metrics.step_time.median_ci95_s", format!("[{lo}, {hi}] does not contain the median {}", st.median_s));
    }
    let total: f64 = steady.iter().sum();
    if total > 0.0 {
        let sps = r.plan.batch_size as f64 * steady.len() as f64 / total;
        c.num("metrics.throughput.samples_per_s", m.throughput.samples_per_s, sps);
    }
}

/// A result past the step log's cap: its kept steps are a sample, so the figures are checked against what a
/// sample can tell (its indices, the count, the order of the percentiles, min and max around every kept step,
/// the throughput from the exact mean).
fn verify_sampled_steps(c: &mut Checker, r: &RunResult, m: &Metrics, seen: u64, indices: &[u64]) {
    if indices.len() != m.step_times_s.len() {
        let lens = format!("{} indices for {} step times", indices.len(), m.step_times_s.len());
        c.fail("metrics.step_indices", lens);
        return;
    }
    if !indices.windows(2).all(|w| w[0] < w[1]) || indices.last().is_some_and(|&i| i >= seen) {
        c.fail("metrics.step_indices", format!("not increasing indices below the {seen} measured iterations"));
    }
    let st = &m.step_time;
    c.int("metrics.step_time.n", st.n as u64, seen - m.steady_state.start_index as u64);
    let steady = r.steady_step_times();
    if let Some(x) = steady.iter().find(|&&x| x < st.min_s || x > st.max_s) {
        c.fail("metrics.step_time.min_s", format!("the kept step time {x} is outside [{}, {}]", st.min_s, st.max_s));
    }
    let order = [st.min_s * (1.0 - 1e-3), st.p5_s, st.median_s, st.p95_s, st.p99_s, st.max_s * (1.0 + 1e-3)];
    if !order.windows(2).all(|w| w[0] <= w[1]) {
        c.fail("metrics.step_time.median_s", format!("min, p5, median, p95, p99, max out of order: {order:?}"));
    }
    let [lo, hi] = st.median_ci95_s;
    if !(lo <= st.median_s * (1.0 + 1e-3) && st.median_s * (1.0 - 1e-3) <= hi) {
        c.fail("metrics.step_time.median_ci95_s", format!("[{lo}, {hi}] does not contain the median {}", st.median_s));
    }
    if st.mean_s > 0.0 {
        c.num("metrics.throughput.samples_per_s", m.throughput.samples_per_s, r.plan.batch_size as f64 / st.mean_s);
    }
}

/// Figures derived from others in the same result, whatever the steps kept.
fn verify_derived(c: &mut Checker, r: &RunResult, m: &Metrics) {
    c.num(
        "metrics.throughput.items_per_s",
        m.throughput.items_per_s,
        m.throughput.samples_per_s * m.throughput.items_per_sample as f64,
    );
    if let (Some(f), Some(a)) = (m.flops.flops_per_sample, m.flops.achieved_flop_per_s) {
        c.num("metrics.flops.achieved_flop_per_s", a, f as f64 * m.throughput.samples_per_s);
        if let (Some(peak), Some(frac)) = (m.flops.peak_flop_per_s, m.flops.fraction) {
            c.num("metrics.flops.fraction", frac, a / peak);
        }
    }
    let me = &m.memory.measured;
    if let (Some(peak), Some(act)) = (me.peak_allocated_bytes, me.activations_and_workspace_bytes) {
        let fixed = me.weights_bytes + me.gradients_bytes + me.optimizer_state_bytes;
        c.int("metrics.memory.measured.activations_and_workspace_bytes", act, peak.saturating_sub(fixed));
        if let (Some(a), Some(ws)) = (me.activations_bytes, me.workspace_bytes) {
            c.int("metrics.memory.measured.workspace_bytes", ws, peak.saturating_sub(fixed + a));
            if let (Some(ratio), true) = (me.breakdown_to_peak, peak > 0) {
                let parts = fixed + a + peak.saturating_sub(fixed + a);
                c.num("metrics.memory.measured.breakdown_to_peak", ratio, parts as f64 / peak as f64);
            }
        }
        if let (Some(est), Some(err)) = (&m.memory.estimate, m.memory.estimate_error) {
            c.num("metrics.memory.estimate_error", err, est.total_bytes as f64 / peak as f64 - 1.0);
        }
    }
    if let Some(fr) = &m.throughput.free_running {
        if fr.seconds > 0.0 {
            let sps = r.plan.batch_size as f64 * fr.steps as f64 / fr.seconds;
            c.num("metrics.throughput.free_running.samples_per_s", fr.samples_per_s, sps);
            if m.throughput.samples_per_s > 0.0 {
                let ratio = fr.samples_per_s / m.throughput.samples_per_s;
                c.num("metrics.throughput.free_running.ratio_to_per_step", fr.ratio_to_per_step, ratio);
            }
        }
    }
    let p = &m.phases;
    let shares = [p.data, p.forward, p.backward, p.comm, p.optimizer, p.other];
    if shares.iter().any(|s| !(0.0..=1.0 + 1e-9).contains(&s.share)) {
        c.fail("metrics.phases", "a phase share is outside 0..=1".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closeness_is_relative() {
        assert!(close(1.0, 1.0 + 1e-12));
        assert!(!close(1.0, 1.0001));
        assert!(close(0.0, 0.0));
    }
}
