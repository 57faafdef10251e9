//! The comparison itself: group each side's runs by spec and configuration, pair baseline with candidate, and
//! decide each pair from its step-time samples (the rule is in the folder's module documentation).

use std::collections::BTreeMap;

use super::change::Change;
use super::comparison::{CompareOptions, Comparison, PairReport, Side, StepTimeComparison, Unpaired, Verdict};
use super::env::{EnvDifference, differences};
use super::mlperf_pairs;
use super::utilization;
use crate::mlperf::score::olympic_of;
use crate::report::scaling;
use crate::result::identity::ConfigurationIdentity;
use crate::result::{LoadedResult, RunOutcome, RunResult};
use crate::stats;

/// The repeats of one configuration (one identity) on one backend and device.
struct Group<'a> {
    spec: String,
    config: String,
    identity: ConfigurationIdentity,
    backend: String,
    device: String,
    runs: Vec<&'a LoadedResult>,
}

impl<'a> Group<'a> {
    fn side(&self) -> Side {
        Side {
            backend: self.backend.clone(),
            device: self.device.clone(),
            files: self.runs.iter().map(|l| l.path.display().to_string()).collect(),
            outcomes: self.runs.iter().map(|l| l.result.outcome.status().to_string()).collect(),
        }
    }
    fn first(&self) -> &'a RunResult {
        &self.runs[0].result
    }
    fn repeats(&self) -> Vec<Vec<f64>> {
        self.runs
            .iter()
            .map(|l| l.result.steady_step_times().iter().copied().filter(|x| x.is_finite() && *x > 0.0).collect())
            .filter(|v: &Vec<f64>| !v.is_empty())
            .collect()
    }
    /// How the repeats were spread over processes: `None` when every repeat had a process of its own (or there
    /// is one repeat), else a sentence saying they shared one or that the results do not tell.
    fn shared_processes(&self) -> Option<String> {
        let n = self.runs.len();
        if n < 2 {
            return None;
        }
        let processes: Vec<Option<(&str, u32)>> = self
            .runs
            .iter()
            .map(|l| l.result.environment.process.map(|p| (l.result.environment.hostname.as_str(), p.pid)))
            .collect();
        if processes.iter().any(Option::is_none) {
            return Some(format!("the results of its {n} repeats do not record their process"));
        }
        let mut distinct: Vec<(&str, u32)> = processes.into_iter().flatten().collect();
        distinct.sort_unstable();
        distinct.dedup();
        (distinct.len() < n).then(|| format!("its {n} repeats ran in {} process(es)", distinct.len()))
    }
    /// The machines the repeats ran on (`a, b`), when more than one (a suite assembled on a cluster).
    fn machines(&self) -> Option<String> {
        let mut hosts: Vec<&str> = self.runs.iter().map(|l| l.result.environment.hostname.as_str()).collect();
        hosts.sort_unstable();
        hosts.dedup();
        (hosts.len() > 1).then(|| hosts.join(", "))
    }
    fn measured(&self) -> bool {
        self.runs.iter().any(|l| l.result.metrics.is_some())
    }
    fn failed(&self) -> bool {
        self.runs.iter().any(|l| matches!(l.result.outcome, RunOutcome::OutOfMemory { .. } | RunOutcome::Failed { .. }))
    }
    fn samples_per_s(&self) -> Option<f64> {
        let v: Vec<f64> =
            self.runs.iter().filter_map(|l| l.result.metrics.as_ref()).map(|m| m.throughput.samples_per_s).collect();
        stats::median(&v)
    }
    /// Median seconds to the target over the repeats that reached it, and `(reached, with a target)`.
    fn time_to_target(&self) -> (Option<f64>, usize, usize) {
        let targets: Vec<_> =
            self.runs.iter().filter_map(|l| l.result.metrics.as_ref()?.time_to_target.as_ref()).collect();
        let reached: Vec<f64> = targets.iter().filter_map(|t| t.time_to_target_s).collect();
        (stats::median(&reached), reached.len(), targets.len())
    }
    fn peak_memory(&self) -> Option<f64> {
        self.runs
            .iter()
            .filter_map(|l| l.result.metrics.as_ref()?.memory.measured.peak_allocated_bytes)
            .max()
            .map(|b| b as f64)
    }
}

/// Spec and configuration name as a run of its plan is named now ([`ConfigurationIdentity::name`]), so a
/// result written before the strategy was in every run id pairs with one written after.
type GroupKey = (String, String);

fn group(results: &[LoadedResult]) -> BTreeMap<GroupKey, Vec<Group<'_>>> {
    let mut out: BTreeMap<GroupKey, Vec<Group<'_>>> = BTreeMap::new();
    for l in results {
        let r = &l.result;
        let device = crate::report::device_name(r);
        let identity = ConfigurationIdentity::of(r);
        let groups = out.entry((r.spec_name.clone(), identity.name())).or_default();
        match groups.iter_mut().find(|g| g.backend == r.backend && g.device == device && g.identity == identity) {
            Some(g) => g.runs.push(l),
            None => groups.push(Group {
                spec: r.spec_name.clone(),
                config: r.config_id().to_string(),
                identity,
                backend: r.backend.clone(),
                device,
                runs: vec![l],
            }),
        }
    }
    out
}

fn entry<'a>(g: &'a Group<'a>) -> mlperf_pairs::EntrySide<'a> {
    mlperf_pairs::EntrySide { spec: &g.spec, config: &g.config, side: g.side(), runs: &g.runs }
}

fn unpaired(g: &Group<'_>) -> Unpaired {
    Unpaired {
        spec: g.spec.clone(),
        config: g.config.clone(),
        target: format!("{} on {}", g.backend, g.device),
        repeats: g.runs.len(),
    }
}

/// Compare the step times of two sides with the statistics of the module documentation.
pub fn compare_samples(
    baseline: &[Vec<f64>],
    candidate: &[Vec<f64>],
    opts: &CompareOptions,
) -> Option<(StepTimeComparison, Verdict)> {
    let pa: Vec<f64> = baseline.concat();
    let pb: Vec<f64> = candidate.concat();
    let (ma, mb) = (stats::median(&pa)?, stats::median(&pb)?);
    let two_level = baseline.len() >= 2 && candidate.len() >= 2;
    let (lo, hi) = if two_level {
        stats::hierarchical_ratio_ci(baseline, candidate, opts.confidence, opts.resamples, opts.seed)?
    } else {
        stats::bootstrap_ratio_ci(&pa, &pb, opts.confidence, opts.resamples, opts.seed)?
    };
    let mw = stats::mann_whitney(&pb, &pa)?;
    let ratio = mb / ma;
    let spreads = [repeat_spread(baseline), repeat_spread(candidate)];
    let noise_floor = spreads.into_iter().flatten().reduce(f64::max);
    let threshold = noise_floor.map_or(opts.threshold, |n| n.max(opts.threshold));
    let significant = (lo > 1.0 || hi < 1.0) && mw.p_value < opts.alpha && (ratio - 1.0).abs() > threshold;
    let verdict = match (significant, ratio > 1.0) {
        (true, true) => Verdict::Slower,
        (true, false) => Verdict::Faster,
        (false, _) => Verdict::NoChange,
    };
    let cmp = StepTimeComparison {
        baseline_median_s: ma,
        candidate_median_s: mb,
        ratio,
        ratio_ci: [lo, hi],
        bootstrap: if two_level { "two-level" } else { "iterations" },
        p_value: mw.p_value,
        prob_candidate_slower: mw.prob_a_greater,
        samples: [pa.len(), pb.len()],
        repeats: [baseline.len(), candidate.len()],
        repeat_spread: spreads,
        noise_floor,
        threshold,
    };
    Some((cmp, verdict))
}

/// `max/min - 1` of the medians of the repeats (at least two), the spread a side shows with nothing changed.
fn repeat_spread(repeats: &[Vec<f64>]) -> Option<f64> {
    let medians: Vec<f64> = repeats.iter().filter_map(|r| stats::median(r)).filter(|m| *m > 0.0).collect();
    if medians.len() < 2 {
        return None;
    }
    let (lo, hi) = medians.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), &m| (lo.min(m), hi.max(m)));
    Some(hi / lo - 1.0)
}

/// The scaling efficiencies of both sides' data-parallel configurations.
type SideEfficiencies = [BTreeMap<scaling::ConfigKey, scaling::Efficiency>; 2];

/// A note on the scaling efficiency of a data-parallel pair (each side against world size 1 in its own results).
fn scaling_note(base: &Group<'_>, cand: &Group<'_>, eff: &SideEfficiencies) -> (Option<Change>, Option<String>) {
    let key = |g: &Group<'_>| (g.spec.clone(), g.identity.key(), g.backend.clone(), g.device.clone());
    let (b, c) = (eff[0].get(&key(base)), eff[1].get(&key(cand)));
    if b.is_none() && c.is_none() {
        return (None, None);
    }
    let show = |e: Option<&scaling::Efficiency>| match e {
        Some(scaling::Efficiency::Measured { value, .. }) => format!("{:.1}%", value * 100.0),
        Some(scaling::Efficiency::Absent(why)) => format!("- ({why})"),
        None => "- (one worker)".to_string(),
    };
    let change = Change::new(b.and_then(|e| e.value()), c.and_then(|e| e.value()));
    let note = format!("scaling efficiency against world size 1 in the same results: {} -> {}", show(b), show(c));
    (change, Some(note))
}

fn compare_pair(base: &Group<'_>, cand: &Group<'_>, opts: &CompareOptions, eff: &SideEfficiencies) -> PairReport {
    let env_differences = differences(base.first(), cand.first());
    let mut notes = Vec::new();
    let blocking: Vec<&EnvDifference> = env_differences.iter().filter(|d| d.blocking).collect();
    let mut report = PairReport {
        spec: base.spec.clone(),
        config: base.config.clone(),
        batch_size: base.first().plan.batch_size,
        baseline: base.side(),
        candidate: cand.side(),
        verdict: Verdict::NoData,
        step_time: None,
        throughput: Change::new(base.samples_per_s(), cand.samples_per_s()),
        peak_memory: Change::new(base.peak_memory(), cand.peak_memory()),
        utilization: utilization::change(&base.runs, &cand.runs),
        scaling_efficiency: None,
        time_to_target: Change::new(base.time_to_target().0, cand.time_to_target().0),
        env_differences: env_differences.clone(),
        notes: Vec::new(),
    };
    let (scaling_efficiency, scaling_note) = scaling_note(base, cand, eff);
    report.scaling_efficiency = scaling_efficiency;
    notes.extend(scaling_note);
    if !blocking.is_empty() {
        if !opts.allow_env_diff {
            report.notes = notes;
            report.verdict = Verdict::NotComparable;
            return report;
        }
        let list: Vec<String> = blocking.iter().map(|d| d.describe()).collect();
        notes.push(format!("compared despite environment differences: {}", list.join("; ")));
    }
    if let Some(d) = env_differences.iter().find(|d| d.field == "spec SHA-256") {
        notes.push(format!("the spec changed ({} -> {})", d.baseline, d.candidate));
    }
    for (name, g) in [("baseline", base), ("candidate", cand)] {
        let interrupted = g.runs.iter().filter(|l| matches!(l.result.outcome, RunOutcome::Interrupted { .. })).count();
        if interrupted > 0 {
            notes.push(format!("{interrupted} {name} repeat(s) were interrupted; their measured steps are used"));
        }
    }
    for (name, g) in [("baseline", base), ("candidate", cand)] {
        let unsteady =
            g.runs.iter().filter(|l| l.result.metrics.as_ref().is_some_and(|m| !m.steady_state.reached)).count();
        if unsteady > 0 {
            notes.push(format!(
                "{unsteady} {name} repeat(s) did not reach steady state (MSER-5 hit its cap); measure more iterations"
            ));
        }
    }
    if let Some(m) = &report.peak_memory
        && (m.ratio - 1.0).abs() > opts.threshold
    {
        notes.push(format!("peak allocated memory changed by {:+.1}%", (m.ratio - 1.0) * 100.0));
    }
    let (bt, ct) = (base.time_to_target(), cand.time_to_target());
    if bt.2 > 0 || ct.2 > 0 {
        let side = |t: (Option<f64>, usize, usize)| match t {
            (_, _, 0) => "no target".to_string(),
            (Some(s), r, n) => format!("{s:.2} s ({r}/{n} repeats reached it)"),
            (None, _, n) => format!("not reached (0/{n} repeats)"),
        };
        let change = report.time_to_target.map_or(String::new(), |c| format!(", {:+.1}%", (c.ratio - 1.0) * 100.0));
        notes.push(format!("time to target: baseline {}, candidate {}{change}", side(bt), side(ct)));
        // MLPerf's score of each side: the olympic mean over its repeats.
        let score = |g: &Group<'_>| olympic_of(g.runs.iter().map(|l| &l.result)).map(|o| o.describe());
        if let (Some(b), Some(c)) = (score(base), score(cand)) {
            notes.push(format!("time to train (MLPerf): baseline {b}; candidate {c}"));
        }
    }
    for (name, g) in [("baseline", base), ("candidate", cand)] {
        if let Some(hosts) = g.machines() {
            notes.push(format!(
                "{name}: its {} repeats ran on different machines ({hosts}), so the interval includes the difference \
                 between machines",
                g.runs.len()
            ));
        }
        if let Some(how) = g.shared_processes() {
            notes.push(format!(
                "{name}: {how}, so the interval leaves out the noise between processes; run with \
                 `run.isolation = \"process\"` (the default) for CI gating"
            ));
        }
    }
    let (ra, rb) = (base.repeats(), cand.repeats());
    report.verdict = match (ra.is_empty(), rb.is_empty()) {
        (false, false) => match compare_samples(&ra, &rb, opts) {
            Some((cmp, verdict)) => {
                if let [base_spread, Some(cand_spread)] = cmp.repeat_spread
                    && cand_spread > 2.0 * opts.threshold
                    && cand_spread > 2.0 * base_spread.unwrap_or(0.0)
                {
                    // An erratic candidate raises the threshold itself; say so, since that may be the regression.
                    notes.push(format!(
                        "the candidate's repeats differ by {:.1}%, the baseline's by {}: the candidate is less stable \
                         run to run, and its spread is part of the noise floor",
                        cand_spread * 100.0,
                        base_spread.map_or("- (one repeat)".to_string(), |b| format!("{:.1}%", b * 100.0))
                    ));
                }
                if cmp.threshold > opts.threshold {
                    notes.push(format!(
                        "threshold raised from {:.1}% to the noise floor {:.1}%: repeats of one side differ by that \
                         much with nothing changed",
                        opts.threshold * 100.0,
                        cmp.threshold * 100.0
                    ));
                }
                report.step_time = Some(cmp);
                verdict
            }
            None => Verdict::NoData,
        },
        (false, true) if cand.failed() || !cand.measured() => Verdict::CandidateFailed,
        (true, false) if base.failed() || !base.measured() => Verdict::BaselineFailed,
        _ => Verdict::NoData,
    };
    if !ra.is_empty() && !rb.is_empty() && (cand.failed() || base.failed()) {
        notes.push("some repeats failed; only the completed ones are compared".into());
    }
    report.notes = notes;
    report
}

/// Compare two result sets.
pub fn compare(baseline: &[LoadedResult], candidate: &[LoadedResult], opts: &CompareOptions) -> Comparison {
    let eff = [scaling::efficiencies(baseline), scaling::efficiencies(candidate)];
    let base = group(baseline);
    let mut cand = group(candidate);
    let mut pairs = Vec::new();
    let mut unmatched = Vec::new();
    for (key, base_groups) in base {
        let mut cand_groups = cand.remove(&key).unwrap_or_default();
        let mut left_over = base_groups;
        // The same plan on the same backend and device first, then another plan of the same name there (not
        // comparable, and the report says in what).
        for same_plan in [true, false] {
            for b in std::mem::take(&mut left_over) {
                let partner = |c: &Group<'_>| {
                    c.backend == b.backend && c.device == b.device && (!same_plan || c.identity == b.identity)
                };
                match cand_groups.iter().position(partner) {
                    Some(i) => {
                        let c = cand_groups.remove(i);
                        pairs.push(compare_pair(&b, &c, opts, &eff));
                    }
                    None => left_over.push(b),
                }
            }
        }
        // Same configuration on a different backend or device: paired, so the report explains why it is not
        // comparable instead of listing both sides as unpaired.
        for b in left_over {
            if cand_groups.is_empty() {
                unmatched.push(b);
            } else {
                let c = cand_groups.remove(0);
                pairs.push(compare_pair(&b, &c, opts, &eff));
            }
        }
        cand.entry(key).or_default().extend(cand_groups);
    }
    // Results written before the strategy was in every data-parallel id share one run id across strategies:
    // paired by it, so the report names what differs instead of listing both sides as unpaired.
    let mut rest: Vec<Group<'_>> = cand.into_values().flatten().collect();
    let mut only_in_baseline = Vec::new();
    let mut left_in_baseline = Vec::new();
    for b in unmatched {
        match rest.iter().position(|c| c.spec == b.spec && c.config == b.config) {
            Some(i) => pairs.push(compare_pair(&b, &rest.remove(i), opts, &eff)),
            None => left_in_baseline.push(b),
        }
    }
    // MLPerf entries of one benchmark: every baseline entry against the candidate's first entry of it.
    let mut entry_used = vec![false; rest.len()];
    for b in left_in_baseline {
        let benchmark = mlperf_pairs::benchmark_of_runs(&b.runs);
        let partner = benchmark
            .as_ref()
            .and_then(|x| rest.iter().position(|c| mlperf_pairs::benchmark_of_runs(&c.runs).as_ref() == Some(x)));
        match (benchmark, partner) {
            (Some(x), Some(i)) => {
                entry_used[i] = true;
                pairs.push(mlperf_pairs::time_to_train_pair(&x, entry(&b), entry(&rest[i])));
            }
            _ => only_in_baseline.push(unpaired(&b)),
        }
    }
    let only_in_candidate = rest.iter().zip(entry_used).filter(|(_, used)| !used).map(|(c, _)| unpaired(c)).collect();
    pairs.sort_by(|a, b| (&a.spec, a.batch_size, &a.config).cmp(&(&b.spec, b.batch_size, &b.config)));
    Comparison { options: opts.clone(), pairs, only_in_baseline, only_in_candidate }
}
