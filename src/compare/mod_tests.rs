//! Unit tests of the compare decision rule.

use super::*;
use crate::result::{LoadedResult, RunResult};
use crate::stats;

#[test]
fn thresholds_parse_as_percent_or_fraction() {
    assert_eq!(parse_threshold("5%"), Ok(0.05));
    assert_eq!(parse_threshold(" 2.5 % "), Ok(0.025));
    assert_eq!(parse_threshold("0.1"), Ok(0.1));
    assert!(parse_threshold("5").unwrap_err().to_string().contains("ambiguous"));
    assert!(parse_threshold("-1%").is_err());
    assert!(parse_threshold("abc").is_err());
}

fn noisy(center: f64, n: usize, seed: u64) -> Vec<f64> {
    let mut rng = stats::SplitMix64::new(seed);
    (0..n).map(|_| center * (1.0 + 0.05 * (rng.next_f64() - 0.5))).collect()
}

#[test]
fn decision_needs_ci_p_value_and_threshold() {
    let opts = CompareOptions::default();
    let base = vec![noisy(0.1, 60, 1)];
    let (_, v) = compare_samples(&base, &[noisy(0.12, 60, 2)], &opts).unwrap();
    assert_eq!(v, Verdict::Slower);
    let (_, v) = compare_samples(&base, &[noisy(0.08, 60, 3)], &opts).unwrap();
    assert_eq!(v, Verdict::Faster);
    // 3% slower: significant by the CI and the test, but within the 5% threshold.
    let (cmp, v) = compare_samples(&base, &[noisy(0.103, 60, 4)], &opts).unwrap();
    assert!(cmp.ratio_ci[0] > 1.0 && cmp.p_value < 0.05, "{cmp:?}");
    assert_eq!(v, Verdict::NoChange);
    let tight = CompareOptions { threshold: 0.01, ..CompareOptions::default() };
    assert_eq!(compare_samples(&base, &[noisy(0.103, 60, 4)], &tight).unwrap().1, Verdict::Slower);
    // Same distribution.
    let (_, v) = compare_samples(&base, &[noisy(0.1, 60, 5)], &opts).unwrap();
    assert_eq!(v, Verdict::NoChange);
}

#[test]
fn repeats_that_disagree_raise_the_threshold_to_their_spread() {
    let opts = CompareOptions::default();
    // Baseline repeats at 10 and 12 ms: this machine moves the configuration by 20% with nothing changed.
    let base = vec![noisy(0.010, 40, 1), noisy(0.012, 40, 2), noisy(0.010, 40, 3)];
    let cand = vec![noisy(0.0115, 40, 4), noisy(0.0115, 40, 5), noisy(0.0115, 40, 6)];
    let (cmp, v) = compare_samples(&base, &cand, &opts).unwrap();
    let floor = cmp.noise_floor.unwrap();
    assert!((0.15..0.25).contains(&floor), "{cmp:?}");
    assert_eq!(cmp.threshold, floor);
    assert_eq!(v, Verdict::NoChange, "{cmp:?}");
    // The same baseline against a candidate far beyond the floor is still a regression.
    let slow = vec![noisy(0.016, 40, 7), noisy(0.016, 40, 8), noisy(0.016, 40, 9)];
    assert_eq!(compare_samples(&base, &slow, &opts).unwrap().1, Verdict::Slower);
    // Repeats that agree leave the requested threshold in force.
    let steady = vec![noisy(0.010, 40, 10), noisy(0.010, 40, 11)];
    let (cmp, _) = compare_samples(&steady, &steady, &opts).unwrap();
    assert!(cmp.noise_floor.unwrap() < 0.05 && cmp.threshold == opts.threshold, "{cmp:?}");
}

#[test]
fn a_side_whose_repeats_ran_on_different_machines_says_so() {
    #![allow(clippy::unwrap_used)]
    let load = |text: &str, host: &str| {
        let mut result: RunResult = serde_json::from_str(text).unwrap();
        result.environment.hostname = host.to_string();
        LoadedResult { path: std::path::PathBuf::from("x.json"), result }
    };
    let r0 = include_str!("../../tests/fixtures/results/fixture-mlp/fixture-mlp.b8.fp32.1x1.r0.json");
    let r1 = include_str!("../../tests/fixtures/results/fixture-mlp/fixture-mlp.b8.fp32.1x1.r1.json");
    let one = [load(r0, "vm"), load(r1, "vm")];
    let cluster = [load(r0, "node1"), load(r1, "node2")];
    let c = compare(&one, &cluster, &CompareOptions::default());
    let notes = c.pairs[0].notes.join("\n");
    assert!(notes.contains("candidate: its 2 repeats ran on different machines (node1, node2)"), "{notes}");
    assert!(!notes.contains("baseline: its 2 repeats ran on different machines"), "{notes}");
    let model = crate::report::model::ReportModel::new(&cluster);
    let line = crate::report::summary_line(&model);
    assert!(line.contains("The runs came from 2 machines: node1 (1), node2 (1)"), "{line}");
    assert!(crate::report::machines_note(&crate::report::model::ReportModel::new(&one)).is_none());
}

#[test]
fn two_data_parallel_runs_differ_by_their_overlap_and_bucket_size() {
    #![allow(clippy::unwrap_used)]
    use trainbench_comm::DataParallel;
    let base: RunResult =
        serde_json::from_str(include_str!("../../tests/fixtures/results/fixture-mlp/fixture-mlp.b8.fp32.1x1.r0.json"))
            .unwrap();
    let dp = |strategy: DataParallel, overlapped: Option<bool>, bucket_bytes: u64| {
        let mut r = base.clone();
        r.plan.topology =
            trainbench_comm::Topology { bucket_bytes, ..trainbench_comm::Topology::on_one_node(strategy, 2) };
        r.distributed = Some(
            serde_json::from_value(serde_json::json!({
                "world_size": 2, "strategy": strategy.name(), "parameter_servers": 0, "engine": "mpi",
                "engine_version": "Open MPI v4.1.6", "launcher": "trainbench", "hosts": ["vm", "vm"], "ranks": [],
                "gradient_bytes": 1000, "bytes_sent_per_step": 1000, "algorithm_bandwidth_gb_s": null,
                "bus_bandwidth_gb_s": null, "comm_share": null, "overlapped": overlapped,
            }))
            .unwrap(),
        );
        r
    };
    let fields = |a: &RunResult, b: &RunResult| {
        super::env::differences(a, b).into_iter().map(|d| (d.field, d.blocking)).collect::<Vec<_>>()
    };
    let mib = 1 << 20;
    let (on, off) = (dp(DataParallel::Zero3, Some(true), 25 * mib), dp(DataParallel::Zero3, Some(false), 25 * mib));
    assert_eq!(fields(&on, &off), [("exchange overlapped".to_string(), true)]);
    // Results written before it was recorded never overlapped.
    assert!(fields(&off, &dp(DataParallel::Zero3, None, 25 * mib)).is_empty());
    // The bucket size decides all-reduce's and ZeRO-1/2's collectives; ZeRO-3 cuts one unit per block.
    let (small, big) =
        (dp(DataParallel::AllReduce, Some(true), mib), dp(DataParallel::AllReduce, Some(true), 25 * mib));
    assert_eq!(fields(&small, &big), [("bucket size".to_string(), true)]);
    let (z3a, z3b) = (dp(DataParallel::Zero3, Some(true), mib), dp(DataParallel::Zero3, Some(true), 25 * mib));
    assert_eq!(fields(&z3a, &z3b), [("bucket size".to_string(), false)]);
}
