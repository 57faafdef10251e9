//! Data-parallel results in the result tools, on synthetic results with a `distributed` section: the scaling
//! efficiency against world size 1 (hand-computed) and when it is absent, the scaling section of a report, the
//! `comm` column of `run`'s summary, `compare` naming a different strategy or engine, and the `check` shape of
//! the section.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use trainbench::report::ReportModel;
use trainbench::report::scaling::{Efficiency, efficiency_of};
use trainbench::result::{LoadedResult, RunResult};
use trainbench_comm::DataParallel;

use crate::common::Synth;

/// Batch 32 without noise: a step of `step_s` seconds is exactly 32 / `step_s` samples/s.
fn run(world: usize, strategy: DataParallel, repeat: u32, step_s: f64) -> Synth {
    let s = Synth { step_s, spread: 0.0, ..Synth::new("toy", 32, repeat, 7) };
    if world == 1 { s } else { s.data_parallel(world, strategy, 0.25) }
}

fn loaded(synths: &[Synth]) -> Vec<LoadedResult> {
    synths
        .iter()
        .map(|s| LoadedResult { path: PathBuf::from(format!("{}.json", s.run_id())), result: s.build() })
        .collect()
}

/// Efficiency of each configuration with more than one worker, by configuration id.
fn efficiencies(results: &[LoadedResult]) -> Vec<(String, Efficiency)> {
    let model = ReportModel::new(results);
    model.configs.iter().filter_map(|c| efficiency_of(&model, c).map(|e| (c.config.clone(), e))).collect()
}

fn value(e: &Efficiency) -> f64 {
    e.value().unwrap_or_else(|| panic!("no efficiency: {e:?}"))
}

/// One worker: three repeats at 320, 320 and 256 samples/s (median 320); all-reduce on 2 workers at 500 samples/s
/// (efficiency 500 / 640 = 78.125%) and on 4 at 640 (640 / 1280 = 50%); one parameter server beside 2 workers at
/// 400 (400 / 640 = 62.5%).
fn sweep() -> Vec<Synth> {
    vec![
        run(1, DataParallel::Single, 0, 0.1),
        run(1, DataParallel::Single, 1, 0.1),
        run(1, DataParallel::Single, 2, 0.125),
        run(2, DataParallel::AllReduce, 0, 0.064),
        run(4, DataParallel::AllReduce, 0, 0.05),
        run(2, DataParallel::ParameterServer { servers: 1 }, 0, 0.08),
    ]
}

#[test]
fn efficiency_is_throughput_over_world_size_times_the_single_worker_median() {
    let eff = efficiencies(&loaded(&sweep()));
    let ids: Vec<&str> = eff.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["toy.b32.fp32.1x2", "toy.b32.fp32.1x2-ps1", "toy.b32.fp32.1x4"]);
    for ((id, e), expected) in eff.iter().zip([0.78125, 0.625, 0.5]) {
        assert!((value(e) - expected).abs() < 1e-9, "{id}: {e:?}, expected {expected}");
        assert!(matches!(e, Efficiency::Measured { reference, .. } if reference == "toy.b32.fp32.1x1"), "{e:?}");
    }
}

#[test]
fn efficiency_is_absent_without_a_single_worker_run_of_the_same_sweep() {
    // No world-size-1 run at all.
    let alone = efficiencies(&loaded(&[run(2, DataParallel::AllReduce, 0, 0.064)]));
    let [(_, Efficiency::Absent(why))] = alone.as_slice() else { panic!("{alone:?}") };
    assert_eq!(why, "no world-size-1 run of toy at batch 32 fp32 on mock · Mock CPU in these results");

    // The single worker ran another batch size: not a reference.
    let other_batch = Synth { step_s: 0.1, spread: 0.0, ..Synth::new("toy", 64, 0, 7) };
    let eff = efficiencies(&loaded(&[other_batch, run(2, DataParallel::AllReduce, 0, 0.064)]));
    assert!(matches!(&eff[0].1, Efficiency::Absent(why) if why.starts_with("no world-size-1 run")), "{eff:?}");

    // The single worker came from another spec text (another sweep): named, not used.
    let other_sweep = Synth { iterations: 60, ..run(1, DataParallel::Single, 0, 0.1) };
    let eff = efficiencies(&loaded(&[other_sweep, run(2, DataParallel::AllReduce, 0, 0.064)]));
    let [(_, Efficiency::Absent(why))] = eff.as_slice() else { panic!("{eff:?}") };
    assert!(why.starts_with("toy.b32.fp32.1x1 ran from another spec text (SHA-256 "), "{why}");
    assert!(why.ends_with("not in the same sweep"), "{why}");

    // The single worker ran out of memory: nothing to divide by.
    let oom = Synth { oom: true, ..run(1, DataParallel::Single, 0, 0.1) };
    let eff = efficiencies(&loaded(&[oom, run(2, DataParallel::AllReduce, 0, 0.064)]));
    let [(_, Efficiency::Absent(why))] = eff.as_slice() else { panic!("{eff:?}") };
    assert_eq!(why, "its world-size-1 configuration toy.b32.fp32.1x1 measured no throughput (out_of_memory)");
}

fn write_all(dir: &Path, synths: &[Synth]) {
    for s in synths {
        s.write(dir);
    }
}

fn report(results: &Path, out: &Path) -> (String, String) {
    Command::cargo_bin("trainbench").unwrap().arg("report").arg(results).arg("--out").arg(out).assert().success();
    (std::fs::read_to_string(out.join("index.html")).unwrap(), std::fs::read_to_string(out.join("report.md")).unwrap())
}

#[test]
fn a_report_of_data_parallel_runs_has_a_scaling_plot_and_table() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    write_all(&results, &sweep());
    let (html, md) = report(&results, &tmp.path().join("report"));

    let svg = std::fs::read_to_string(tmp.path().join("report/scaling-toy.svg")).unwrap();
    assert!(svg.contains("<title>Throughput and scaling efficiency vs world size: toy</title>"), "{svg}");
    for legend in ["samples/s · all-reduce", "efficiency · all-reduce", "samples/s · parameter-server ×1"] {
        assert!(svg.contains(legend), "{legend} missing from the legend");
    }
    assert!(svg.contains("world size (workers)") && svg.contains("scaling efficiency %"));
    // Against batch size, the two strategies on 2 workers are two series, named apart.
    let svg = std::fs::read_to_string(tmp.path().join("report/throughput-toy.svg")).unwrap();
    for legend in ["1 device", "2 devices · all-reduce", "2 devices · parameter-server ×1", "4 devices · all-reduce"]
    {
        assert!(svg.contains(&format!(">\n{legend}\n<")), "{legend} missing from the legend");
    }
    let csv = std::fs::read_to_string(tmp.path().join("report/runs.csv")).unwrap();
    let ps = csv.lines().find(|l| l.starts_with("toy,toy.b32.fp32.1x2-ps1.r0,")).unwrap();
    assert!(ps.contains(",32,2,parameter-server,0.25,"), "{ps}");

    let overview = html.split("<table id=\"overview-table\">").nth(1).unwrap().split("</table>").next().unwrap();
    assert!(overview.contains("<th>comm</th>"), "{overview}");
    let single = overview.split("<tr data-config=\"toy.b32.fp32.1x1\">").nth(1).unwrap().split("</tr>").next().unwrap();
    assert!(single.ends_with("<td class=\"num muted\">-</td>"), "one worker has no comm share: {single}");
    assert!(html.contains("<a href=\"#scaling\">Scaling vs world size</a>"));
    assert!(html.contains("<figure id=\"plot-scaling-toy\">"));
    let table = html.split("<table id=\"scaling-table\">").nth(1).unwrap().split("</table>").next().unwrap();
    let rows: Vec<&str> = table.split("<tr data-config=").skip(1).collect();
    assert_eq!(rows.len(), 4, "{table}");
    // 4,000,000 gradient bytes; 2 workers: the ring sends 2 (2-1)/2 x S = S per step; the bandwidths come from
    // a median step of 64 ms of which 25% exchanges: 4e6 B / 16 ms = 0.25 GB/s, bus x 2 (2-1)/2 = the same.
    let ar2 = rows.iter().find(|r| r.starts_with("\"toy.b32.fp32.1x2\"")).unwrap();
    for cell in [
        "<td class=\"num\">2</td>",
        "<td>all-reduce</td>",
        "<td>mpi (Open MPI v4.1.4)</td>",
        "<td class=\"num\">500</td>",
        "<td class=\"num\">78.1%</td>",
        "<td class=\"num\">25.0%</td>",
        "<td class=\"num\">3.8 MiB</td>",
        "<td class=\"num\">0.250</td>",
    ] {
        assert!(ar2.contains(cell), "{cell} missing from {ar2}");
    }
    let single = rows.iter().find(|r| r.starts_with("\"toy.b32.fp32.1x1\"")).unwrap();
    assert!(single.contains("<td>single</td>") && single.contains("<td class=\"num\">reference</td>"), "{single}");
    let ps = rows.iter().find(|r| r.starts_with("\"toy.b32.fp32.1x2-ps1\"")).unwrap();
    assert!(ps.contains("<td class=\"num\">62.5%</td>") && ps.contains("<td class=\"num muted\">-</td>"), "{ps}");

    assert!(md.contains("## Scaling vs world size"), "{md}");
    assert!(md.contains("![Throughput and scaling efficiency vs world size: toy](scaling-toy.svg)"));
    assert!(md.contains("| toy.b32.fp32.1x4 | 4 | all-reduce | mpi (Open MPI v4.1.4) | 640 | 50.0% | 25.0% |"), "{md}");
}

#[test]
fn a_missing_efficiency_says_why_and_single_worker_reports_have_no_scaling_section() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    write_all(&results, &[run(2, DataParallel::AllReduce, 0, 0.064)]);
    let (html, md) = report(&results, &tmp.path().join("report"));
    let why = "No efficiency for toy.b32.fp32.1x2: no world-size-1 run of toy at batch 32 fp32 on mock · Mock CPU in \
               these results.";
    assert!(html.contains(why), "{html}");
    assert!(md.contains(why), "{md}");

    let single = tmp.path().join("single");
    write_all(&single, &[run(1, DataParallel::Single, 0, 0.1)]);
    let (html, md) = report(&single, &tmp.path().join("single-report"));
    assert!(!html.contains("id=\"scaling\"") && !html.contains("scaling-table"));
    assert!(!md.contains("Scaling vs world size"));
    assert!(!tmp.path().join("single-report/scaling-toy.svg").exists());
}

#[test]
fn the_run_summary_shows_the_comm_share_of_data_parallel_runs() {
    let rows: Vec<(RunResult, PathBuf)> =
        [run(1, DataParallel::Single, 0, 0.1), run(2, DataParallel::AllReduce, 0, 0.064)]
            .iter()
            .map(|s| (s.build(), PathBuf::from("x.json")))
            .collect();
    let table = trainbench::commands::run::summary_table(&rows);
    let header: Vec<String> = table.header().unwrap().cell_iter().map(|c| c.content()).collect();
    assert_eq!(header.last().map(String::as_str), Some("comm"));
    let last = |i: usize| table.row(i).unwrap().cell_iter().last().unwrap().content();
    assert_eq!(last(0), "-", "one worker exchanges nothing");
    assert_eq!(last(1), "25.0%");
}

fn write_result(dir: &Path, r: &RunResult) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(format!("{}.json", r.run_id)), serde_json::to_string_pretty(r).unwrap()).unwrap();
}

#[test]
fn compare_names_a_different_strategy_or_engine_and_each_sides_efficiency() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, cand) = (tmp.path().join("base"), tmp.path().join("cand"));
    write_all(&base, &[run(1, DataParallel::Single, 0, 0.1), run(2, DataParallel::AllReduce, 0, 0.064)]);
    // The same configuration id through parameter servers and another engine, without a single-worker run.
    let mut other = run(2, DataParallel::AllReduce, 0, 0.08).build();
    other.plan.topology.strategy = DataParallel::ParameterServer { servers: 2 };
    let d = other.distributed.as_mut().unwrap();
    (d.strategy, d.parameter_servers, d.engine) = ("parameter-server".into(), 2, "nccl".into());
    write_result(&cand, &other);

    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .args(["compare", "--format", "markdown"])
        .arg(&base)
        .arg(&cand)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("strategy differs: all-reduce vs parameter-server (2 servers)"), "{text}");
    assert!(text.contains("engine differs: mpi vs nccl"), "{text}");
    assert!(
        text.contains(
            "toy.b32.fp32.1x2: scaling efficiency against world size 1 in the same results: 78.1% -> - (no \
             world-size-1 run of toy at batch 32 fp32 on mock · Mock CPU in these results)"
        ),
        "{text}"
    );

    // Same strategy and engine on both sides: compared, and the efficiencies in the JSON.
    let again = tmp.path().join("again");
    write_all(&again, &[run(1, DataParallel::Single, 0, 0.1), run(2, DataParallel::AllReduce, 0, 0.08)]);
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .args(["compare", "--format", "json"])
        .arg(&base)
        .arg(&again)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pair = v["pairs"].as_array().unwrap().iter().find(|p| p["config"] == "toy.b32.fp32.1x2").unwrap();
    assert!(pair["env_differences"].as_array().unwrap().is_empty(), "{pair}");
    // 500 samples/s -> 400 on two workers against 320 on one: 78.125% -> 62.5%.
    let eff = &pair["scaling_efficiency"];
    assert!((eff["baseline"].as_f64().unwrap() - 0.78125).abs() < 1e-9, "{eff}");
    assert!((eff["candidate"].as_f64().unwrap() - 0.625).abs() < 1e-9, "{eff}");
}

#[test]
fn the_shape_of_a_data_parallel_result_pins_its_distributed_section() {
    let r = run(2, DataParallel::AllReduce, 0, 0.064).build();
    let shape = trainbench::check::shape_of(&r);
    let get = |k: &str| shape.fields.get(k).map(String::as_str);
    assert_eq!(get("distributed.world_size"), Some("= 2"));
    assert_eq!(get("distributed.strategy"), Some("= \"all-reduce\""));
    assert_eq!(get("distributed.gradient_bytes"), Some("= 4000000"));
    assert_eq!(get("distributed.bytes_sent_per_step"), Some("= 4000000"));
    assert_eq!(get("distributed.ranks"), Some("array[2]"));
    assert_eq!(get("distributed.hosts"), Some("array[2]"));
    assert_eq!(get("distributed.comm_share"), Some("number"));

    // A result that stopped writing the section, or one of its ranks, no longer has the same shape.
    let mut lost = r.clone();
    lost.distributed = None;
    assert_ne!(trainbench::check::shape_of(&lost), shape);
    let mut one_rank = r.clone();
    one_rank.distributed.as_mut().unwrap().ranks.pop();
    assert_eq!(trainbench::check::shape_of(&one_rank).fields.get("distributed.ranks").unwrap(), "array[1]");
}

#[test]
fn degenerate_data_parallel_figures_are_reported_without_a_figure_not_a_panic() {
    let mut single = run(1, DataParallel::Single, 0, 0.1).build();
    single.metrics.as_mut().unwrap().throughput.samples_per_s = f64::NAN;
    let mut two = run(2, DataParallel::AllReduce, 0, 0.064).build();
    two.metrics.as_mut().unwrap().throughput.samples_per_s = 0.0;
    let d = two.distributed.as_mut().unwrap();
    (d.comm_share, d.algorithm_bandwidth_gb_s, d.bus_bandwidth_gb_s) = (Some(f64::NAN), None, Some(f64::INFINITY));
    (d.ranks, d.hosts) = (Vec::new(), Vec::new());
    let mut huge = run(8, DataParallel::ParameterServer { servers: 0 }, 0, 1e-300).build();
    huge.metrics = None;
    let results: Vec<LoadedResult> = [single, two, huge]
        .into_iter()
        .map(|result| LoadedResult { path: PathBuf::from(format!("{}.json", result.run_id)), result })
        .collect();
    let eff = efficiencies(&results);
    assert_eq!(eff.len(), 2);
    assert!(eff.iter().all(|(_, e)| e.value().is_none()), "{eff:?}");
    let tmp = tempfile::tempdir().unwrap();
    trainbench::report::write_report(&results, tmp.path()).unwrap();
    let md = std::fs::read_to_string(tmp.path().join("report.md")).unwrap();
    assert!(md.contains("measured no throughput"), "{md}");
    let rows = trainbench::commands::run::summary_table(&[(results[1].result.clone(), PathBuf::from("x.json"))]);
    assert_eq!(rows.row(0).unwrap().cell_iter().last().unwrap().content(), "-", "a NaN share is no figure");
}
