//! The HTML report in a real headless Chromium: it renders, every plot is in the DOM with its title, and the
//! page references nothing on the network. Skipped (with a notice) only where /usr/bin/chromium is absent.
#![allow(clippy::unwrap_used)] // test helpers outside test functions

use std::path::{Path, PathBuf};
use std::process::Command as Proc;

use assert_cmd::Command;

const CHROMIUM: &str = "/usr/bin/chromium";
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/results");

fn chromium(args: &[&str], profile: &Path) -> std::process::Output {
    Proc::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .expect("chromium runs")
}

/// The report of the fixtures: two specs, batch sweeps, two precisions, an out-of-memory run.
fn report(dir: &Path) -> PathBuf {
    let out = dir.join("report");
    Command::cargo_bin("trainbench").unwrap().arg("report").arg(FIXTURES).arg("--out").arg(&out).assert().success();
    out
}

#[test]
fn report_renders_in_chromium_with_all_plots_and_no_network() {
    if !Path::new(CHROMIUM).exists() {
        eprintln!("notice: {CHROMIUM} not found; skipping the headless-browser test (CI installs chromium)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = report(tmp.path());
    let html_path = out.join("index.html");
    let html = std::fs::read_to_string(&html_path).unwrap();
    for needle in ["http://", "https://", "<script", "<link", "@import", "url("] {
        assert!(!html.contains(needle), "the page contains `{needle}`");
    }

    let url = format!("file://{}", html_path.display());
    let dom = chromium(&["--dump-dom", &url], &tmp.path().join("profile"));
    assert!(dom.status.success(), "chromium failed: {}", String::from_utf8_lossy(&dom.stderr));
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.contains("<h1>trainbench report</h1>"), "{dom}");
    let mem = "fp32 · mock · trainbench mock device (simulated, not a measurement)";
    for title in [
        "Throughput vs batch size: fixture-resnet".to_string(),
        "Throughput vs batch size: fixture-mlp".to_string(),
        "GPU and FLOP utilisation vs batch size: fixture-mlp".to_string(),
        format!("Memory breakdown per batch size: fixture-resnet ({mem})"),
        format!("Memory breakdown per batch size: fixture-mlp ({})", mem.replace("fp32", "bf16")),
        "Step-time distribution: fixture-mlp".to_string(),
        "Phase shares of an iteration".to_string(),
    ] {
        assert!(dom.contains(&format!("<title>{title}</title>")), "no plot titled `{title}` in the DOM");
    }
    let svgs = dom.matches("<svg").count();
    assert_eq!(svgs, 10, "2 specs x (throughput, utilisation, step times) + 3 memory (one per precision) + phases");
    for src in dom.split("src=\"").skip(1).chain(dom.split("href=\"").skip(1)) {
        assert!(!src.starts_with("http"), "external reference: {}", &src[..src.len().min(80)]);
    }
    // Every configuration has a row; the out-of-memory one is marked.
    assert_eq!(dom.matches("<td>fixture-resnet</td>").count(), 4);
    assert_eq!(dom.matches("<td>fixture-mlp</td>").count(), 6);
    assert!(dom.contains("<td class=\"bad\">1 out_of_memory, 1 skipped</td>"), "{dom}");

    // It also rasterises.
    let png = tmp.path().join("shot.png");
    let shot = chromium(
        &["--hide-scrollbars", "--window-size=1280,2000", &format!("--screenshot={}", png.display()), &url],
        &tmp.path().join("profile2"),
    );
    assert!(shot.status.success(), "{}", String::from_utf8_lossy(&shot.stderr));
    assert!(std::fs::metadata(&png).unwrap().len() > 10_000);
    if let Ok(dest) = std::env::var("TRAINBENCH_SCREENSHOT") {
        std::fs::copy(&png, dest).unwrap();
    }
    if let Ok(keep) = std::env::var("TRAINBENCH_KEEP_REPORT") {
        std::fs::create_dir_all(&keep).unwrap();
        for entry in std::fs::read_dir(&out).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), Path::new(&keep).join(entry.file_name())).unwrap();
        }
    }
}
