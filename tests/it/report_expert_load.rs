//! The report's expert-load panel: a result of a mixture-of-experts run (with routing figures) gets the
//! "Expert load" section in the HTML and Markdown pages, a heat map per configuration and the table of its
//! layers, and the line `run` prints under its table; a result without routing figures gets none of them.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use trainbench::report::expert_load::{self, summary_line};
use trainbench::report::plots::{Section, all_plots};
use trainbench::report::{ReportModel, html, markdown};
use trainbench::result::{ExpertLoad, LoadedResult, RunResult};
use trainbench_contract::routing::{LayerRouting, RoutingTally};

use crate::common::Synth;

/// Two layers of four experts over three steps: layer 0 skewed towards expert 0 with drops, layer 1 even.
fn expert_load() -> ExpertLoad {
    let mut t = RoutingTally::new();
    let layer = |name: &str, load: Vec<u64>, dropped| LayerRouting {
        layer: name.into(),
        tokens_per_expert: load,
        dropped,
        balance: 1.1,
        aux_coefficient: 0.01,
    };
    for _ in 0..3 {
        t.record_step(&[layer("h0.mlp", vec![6, 2, 2, 2], 2), layer("h1.mlp", vec![3, 3, 3, 3], 0)]);
    }
    ExpertLoad::of(&t).unwrap()
}

fn loaded(results: Vec<RunResult>) -> Vec<LoadedResult> {
    results.into_iter().map(|result| LoadedResult { path: PathBuf::from("x.json"), result }).collect()
}

fn moe_result() -> RunResult {
    let mut r = Synth::new("smoke-moe", 8, 0, 1).build();
    r.metrics.as_mut().unwrap().expert_load = Some(expert_load());
    r
}

#[test]
fn a_result_with_routing_figures_renders_the_expert_load_panel() {
    let results = loaded(vec![moe_result()]);
    let model = ReportModel::new(&results);
    let plots = all_plots(&model).unwrap();
    let heat: Vec<_> = plots.iter().filter(|p| p.section == Section::ExpertLoad).collect();
    assert_eq!(heat.len(), 1);
    assert!(heat[0].svg.contains("<title>Tokens per expert per step"), "{}", heat[0].svg);
    // Three rows of four cells (two layers and `all`), plus the legend's three blocks.
    assert!(heat[0].svg.matches("<rect").count() >= 15);
    let page = html::render(&model, &plots);
    assert!(page.contains("<section id=\"expert-load\">"));
    assert!(page.contains("<a href=\"#expert-load\">Expert load</a>"));
    assert!(page.contains("id=\"expert-load-table\""));
    // Layer 0's row: CV sqrt(3)/3 = 0.577, busiest 50%, 2 dropped per step of 14 routed.
    let rows = expert_load::table(&model);
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].cells[..6], ["h0.mlp", "4", "0.577", "0.577", "50.0%", "50.0%"]);
    assert_eq!(rows[0].cells[6], "2.00 (14.3%)");
    assert_eq!(rows[1].cells[2], "0");
    assert_eq!(rows[2].cells[0], "all");
    let md = markdown::render(&model, &plots);
    assert!(md.contains("## Expert load"));
    assert!(md.contains("| h0.mlp | 4 | 0.577 |"), "{md}");
    let line = summary_line(&results[0].result).unwrap();
    assert!(line.contains("2 MoE layer(s), 3 steps") && line.contains("most uneven layer h0.mlp"), "{line}");
}

#[test]
fn a_result_without_routing_figures_has_no_expert_load_panel() {
    let results = loaded(vec![Synth::new("smoke-gpt", 8, 0, 1).build()]);
    let model = ReportModel::new(&results);
    let plots = all_plots(&model).unwrap();
    assert!(plots.iter().all(|p| p.section != Section::ExpertLoad));
    assert!(expert_load::table(&model).is_empty());
    let page = html::render(&model, &plots);
    assert!(!page.contains("expert-load"));
    assert!(!markdown::render(&model, &plots).contains("Expert load"));
    assert_eq!(summary_line(&results[0].result), None);
}
