//! `trainbench report` output files: the Markdown page (snapshot in golden/report/, measured values redacted),
//! the CSV (one row per run, a fixed header), and the SVG files the Markdown links to.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

mod common;

use assert_cmd::Command;
use common::Synth;

/// Replace measured values in Markdown table cells by `[v]`; names, batch sizes and counts stay.
fn redact(md: &str) -> String {
    md.lines()
        .map(|line| {
            if !line.starts_with('|') || line.starts_with("|---") {
                return line.to_string();
            }
            let cells: Vec<String> = line
                .split(" | ")
                .map(|c| {
                    let t = c.trim_matches('|').trim();
                    let measured = t.ends_with(" ms") || t.ends_with('%') || t.ends_with("iB") || t.contains('.');
                    let numeric = t.chars().next().is_some_and(|ch| ch.is_ascii_digit());
                    let long_integer = t.len() > 2 && t.chars().all(|ch| ch.is_ascii_digit()) && !is_batch(t);
                    if numeric && (measured || long_integer) { c.replace(t, "[v]") } else { c.to_string() }
                })
                .collect();
            cells.join(" | ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_batch(t: &str) -> bool {
    matches!(t, "8" | "32" | "128")
}

#[test]
fn markdown_csv_and_svg_files() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    for (i, batch) in [8usize, 32, 128].into_iter().enumerate() {
        for repeat in 0..2 {
            Synth::new("cnn", batch, repeat, (i * 10 + repeat as usize) as u64).write(&results);
        }
    }
    let out = tmp.path().join("report");
    Command::cargo_bin("trainbench").unwrap().arg("report").arg(&results).arg("--out").arg(&out).assert().success();

    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for line in md.lines().filter(|l| l.starts_with("![")) {
        let file = line.split("](").nth(1).unwrap().trim_end_matches(')');
        let svg = std::fs::read_to_string(out.join(file)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("xmlns=\"http://www.w3.org/2000/svg\""), "{file}");
        assert!(svg.contains("<title>"), "{file}");
    }
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/golden/report"));
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!("report_markdown", redact(&md)));

    let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 7);
    assert_eq!(lines[0], trainbench::report::csv::COLUMNS.join(","));
    assert!(lines.iter().skip(1).all(|l| l.split(',').count() == trainbench::report::csv::COLUMNS.len()));
    assert!(lines[1].starts_with("cnn,cnn.b8.fp32.1x1.r0,cnn.b8.fp32.1x1,0,completed,mock,Mock CPU,fp32,8,1,"));
}
