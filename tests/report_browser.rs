//! The HTML report in a real headless Chromium: it renders, every plot is in the DOM with its title, and the
//! page references nothing on the network. Skipped (with a notice) only where /usr/bin/chromium is absent.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

mod common;

use std::path::{Path, PathBuf};
use std::process::Command as Proc;

use assert_cmd::Command;
use common::Synth;

const CHROMIUM: &str = "/usr/bin/chromium";

/// A small sweep: two specs, three batch sizes, two repeats, plus one out-of-memory run.
fn write_results(dir: &Path) {
    for spec in ["cnn", "mlp"] {
        for (i, batch) in [8usize, 32, 128].into_iter().enumerate() {
            for repeat in 0..2 {
                let mut s = Synth::new(spec, batch, repeat, (i * 10 + repeat as usize) as u64);
                if spec == "mlp" {
                    s.step_s /= 3.0;
                }
                s.write(&dir.join(spec));
            }
        }
    }
    Synth { oom: true, ..Synth::new("cnn", 512, 0, 7) }.write(&dir.join("cnn"));
}

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

fn report(dir: &Path) -> PathBuf {
    let results = dir.join("results");
    write_results(&results);
    let out = dir.join("report");
    Command::cargo_bin("trainbench").unwrap().arg("report").arg(&results).arg("--out").arg(&out).assert().success();
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
    for title in [
        "Throughput vs batch size: cnn",
        "Throughput vs batch size: mlp",
        "GPU and FLOP utilisation vs batch size: cnn",
        "Memory breakdown per batch size: cnn (fp32 · mock · Mock CPU)",
        "Step-time distribution: mlp",
        "Phase shares of an iteration",
    ] {
        assert!(dom.contains(&format!("<title>{title}</title>")), "no plot titled `{title}` in the DOM");
    }
    let svgs = dom.matches("<svg").count();
    assert_eq!(svgs, 9, "2 specs x (throughput, utilisation, memory, step times) + phases");
    for src in dom.split("src=\"").skip(1).chain(dom.split("href=\"").skip(1)) {
        assert!(!src.starts_with("http"), "external reference: {}", &src[..src.len().min(80)]);
    }
    // Every configuration has a row.
    assert_eq!(dom.matches("<td>cnn</td>").count(), 4);
    assert!(dom.contains("<td class=\"bad\">out_of_memory</td>"));

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
