//! `trainbench report` output files: the Markdown page of the fixtures (snapshot in golden/report/, every figure
//! exact: the fixtures are committed and the report a pure function of them, so a wrong median, p95, peak or
//! utilisation shows as a diff), the CSV (one row per run, a fixed header), and the SVG files the Markdown
//! links to.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use assert_cmd::Command;

/// Split one CSV line (RFC 4180 quoting, no embedded line breaks).
pub(crate) fn csv_fields(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    out.push(cur);
    out
}

#[test]
fn markdown_csv_and_svg_files() {
    let tmp = tempfile::tempdir().unwrap();
    let results = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/results"));
    let out = tmp.path().join("report");
    Command::cargo_bin("trainbench").unwrap().arg("report").arg(&results).arg("--out").arg(&out).assert().success();

    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for line in md.lines().filter(|l| l.starts_with("![")) {
        let file = line.split("](").nth(1).unwrap().trim_end_matches(')');
        let svg = std::fs::read_to_string(out.join(file)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("xmlns=\"http://www.w3.org/2000/svg\""), "{file}");
        assert!(svg.contains("<title>"), "{file}");
    }
    crate::common::golden_settings("report").bind(|| insta::assert_snapshot!("report_markdown", md));

    let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 21);
    assert_eq!(lines[0], trainbench::report::csv::COLUMNS.join(","));
    assert!(lines.iter().skip(1).all(|l| csv_fields(l).len() == trainbench::report::csv::COLUMNS.len()));
    assert!(lines[1].starts_with("fixture-mlp,fixture-mlp.b8.fp32.1x1.r0,fixture-mlp.b8.fp32.1x1,0,completed,mock,"));
    assert!(csv.contains(",out_of_memory,mock,"));
}

#[test]
fn gpu_utilisation_is_plotted_when_measured() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    for (i, batch) in [8usize, 32, 128].into_iter().enumerate() {
        let s = crate::common::Synth {
            gpu_percent: Some(30.0 + 20.0 * i as f64),
            ..crate::common::Synth::new("gpu", batch, 0, 1)
        };
        s.write(&results);
    }
    let out = tmp.path().join("report");
    Command::cargo_bin("trainbench").unwrap().arg("report").arg(&results).arg("--out").arg(&out).assert().success();
    let svg = std::fs::read_to_string(out.join("utilization-gpu.svg")).unwrap();
    // One precision, world size, backend and device: the legend names the precision only.
    assert!(svg.contains("GPU busy · fp32"), "{svg}");
    assert!(svg.contains("FLOP of peak · fp32"));
    assert!(!svg.contains("Mock CPU"), "what every configuration shares stays out of the legend");
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(!html.contains("not measured"));
    assert!(html.contains(">70.0%</td>"), "the tables show the GPU utilisation of b128");
    let overview = html.split("<table id=\"overview-table\">").nth(1).unwrap().split("</table>").next().unwrap();
    assert!(overview.contains("<th>GPU busy</th>"), "{overview}");
    assert_eq!(overview.matches("<tr data-config=").count(), 3);
}

/// The text of every `<text>` element of an SVG.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim().to_string()))
        .collect()
}

#[test]
fn a_one_point_sweep_draws_every_plot_with_real_sizes_and_axes() {
    // One batch size, one repeat, from the mock backend end to end (`trainbench run one.toml`, then `report`).
    let tmp = tempfile::tempdir().unwrap();
    let spec = crate::common::mock_mlp_spec(tmp.path(), "one", 12, 1);
    let results = tmp.path().join("results");
    Command::cargo_bin("trainbench")
        .unwrap()
        .env_remove("TRAINBENCH_HARDWARE")
        .args(["run", "--quiet", "--out"])
        .arg(&results)
        .arg(&spec)
        .assert()
        .success();
    let out = tmp.path().join("report");
    Command::cargo_bin("trainbench").unwrap().arg("report").arg(&results).arg("--out").arg(&out).assert().success();
    let mut svgs = 0;
    for entry in std::fs::read_dir(&out).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "svg") {
            continue;
        }
        svgs += 1;
        let svg = std::fs::read_to_string(&path).unwrap();
        // A bar of a single segment once had `width="-216"`: every drawn size is positive or zero.
        for attr in ["width=\"-", "height=\"-", "NaN", "=\"inf"] {
            assert!(!svg.contains(attr), "{}: {attr}\n{svg}", path.display());
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("memory-") {
            // The measured and the estimated bar are drawn, with widths.
            let bars = svg.matches("<rect").filter(|r| !r.is_empty()).count();
            assert!(bars > 4, "{name}: the memory bars are drawn\n{svg}");
        }
        if name.starts_with("throughput-") {
            // The batch axis of batch 2 holds two octaves on powers of two (1, 2, 4), not light ticks rounded
            // to whole numbers (2, 2, 3).
            let texts = svg_texts(&svg);
            for tick in ["1", "2", "4"] {
                assert!(texts.iter().any(|t| t == tick), "{name}: tick {tick} in {texts:?}");
            }
            assert!(!texts.iter().any(|t| t == "3"), "{name}: {texts:?}");
        }
    }
    assert!(svgs >= 4, "throughput, memory, phases and step times are drawn: {svgs}");
    for plot in ["throughput-one.svg", "phases-one.svg", "step-times-one.svg"] {
        assert!(out.join(plot).exists(), "{plot}");
    }
}
