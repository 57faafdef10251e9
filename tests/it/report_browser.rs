//! The HTML report and the history page in a real headless Chromium. The report renders, its overview table
//! comes first with a row per configuration, every plot is a panel of a grid in the DOM with its title, and the
//! page references nothing on the network. The history page loads without a console message, draws every
//! series, marks its change points with their environment diff and its acknowledged changes, and each point is
//! a link Chromium opens to that point's result file. The browser is `$TRAINBENCH_CHROMIUM`, else the first of
//! chromium, chromium-browser and google-chrome on `PATH`; without one the tests are skipped with a notice, and
//! fail under `CI=true`.
#![allow(clippy::unwrap_used)] // test helpers outside test functions

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command as Proc;

use assert_cmd::Command;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/results");

/// The names a headless Chromium goes by, in the order they are looked for on `PATH`.
const BROWSERS: &[&str] = &["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];

/// The browser to run: `$TRAINBENCH_CHROMIUM`, else the first of [`BROWSERS`] in a directory of `path`.
fn find_chromium(explicit: Option<&OsStr>, path: Option<&OsStr>) -> Option<PathBuf> {
    if let Some(explicit) = explicit.filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(explicit));
    }
    let dirs: Vec<PathBuf> = path.map(|p| std::env::split_paths(p).collect()).unwrap_or_default();
    BROWSERS.iter().flat_map(|name| dirs.iter().map(move |d| d.join(name))).find(|p| p.is_file())
}

fn chromium(browser: &Path, args: &[&str], profile: &Path) -> std::process::Output {
    Proc::new(browser)
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

/// The overview table is the first table and comes before any plot; it has one row per configuration (10: one
/// `<tbody>` per spec), throughput with its interval over repeats, step times, peak memory, utilisation and the
/// outcome; the best throughput of each spec is bold.
fn overview_comes_first_with_a_row_per_configuration(dom: &str) {
    let at = dom.find("<table id=\"overview-table\">").expect("an overview table");
    assert_eq!(dom.find("<table"), Some(at), "the overview is the first table");
    assert!(at < dom.find("<svg").unwrap(), "the overview comes before the plots");
    let table = dom[at..].split("</table>").next().unwrap();
    for head in ["configuration", "outcome", "samples/s [repeats]", "median step", "p95 step", "peak memory"] {
        assert!(table.contains(&format!("<th>{head}</th>")), "no column `{head}`: {table}");
    }
    assert!(table.contains("<th>FLOP of peak</th>") && table.contains("<th>data</th>"), "{table}");
    assert!(!table.contains("<th>GPU busy</th>") && !table.contains("<th>comm</th>"), "no GPU, one device: {table}");
    let rows: Vec<&str> = table.split("<tr data-config=\"").skip(1).collect();
    assert_eq!(rows.len(), 10, "{table}");
    assert_eq!(table.matches("<tbody data-spec=").count(), 2);
    let configs: Vec<&str> = rows.iter().map(|r| r.split('"').next().unwrap()).collect();
    assert_eq!(configs[0], "fixture-mlp.b8.fp32.1x1");
    assert!(configs.contains(&"fixture-resnet.b65536.fp32.1x1"));
    let oom = rows.iter().find(|r| r.starts_with("fixture-resnet.b65536")).unwrap();
    assert!(oom.contains("<td class=\"bad\">1 out_of_memory, 1 skipped</td>"), "{oom}");
    // Two repeats each: the samples/s cell carries the interval; the largest batch is the best of its spec.
    let best = rows.iter().find(|r| r.starts_with("fixture-resnet.b256")).unwrap();
    assert!(best.contains("<td class=\"num best\">") && best.contains("<span class=\"range\">["), "{best}");
    assert_eq!(table.matches("class=\"num best\"").count(), 3, "the best of fixture-resnet and a tie in fixture-mlp");
}

/// The browser, or `None` after the skip notice (a failure under `CI=true`).
fn browser() -> Option<PathBuf> {
    let found = find_chromium(std::env::var_os("TRAINBENCH_CHROMIUM").as_deref(), std::env::var_os("PATH").as_deref());
    if found.is_none() {
        trainbench_contract::conformance::prerequisite_missing(
            "no Chromium found (TRAINBENCH_CHROMIUM, or chromium, chromium-browser, google-chrome on PATH): \
             install chromium (scripts/system-deps.sh)",
        );
    }
    found
}

#[test]
fn report_renders_in_chromium_with_all_plots_and_no_network() {
    let Some(browser) = browser() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = report(tmp.path());
    let html_path = out.join("index.html");
    let html = std::fs::read_to_string(&html_path).unwrap();
    for needle in ["http://", "https://", "<script", "<link", "@import", "url("] {
        assert!(!html.contains(needle), "the page contains `{needle}`");
    }

    let url = format!("file://{}", html_path.display());
    let dom = chromium(&browser, &["--dump-dom", &url], &tmp.path().join("profile"));
    assert!(dom.status.success(), "chromium failed: {}", String::from_utf8_lossy(&dom.stderr));
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.contains("<h1>trainbench report</h1>"), "{dom}");
    overview_comes_first_with_a_row_per_configuration(&dom);
    for title in [
        "Throughput vs batch size: fixture-resnet",
        "Throughput vs batch size: fixture-mlp",
        "GPU and FLOP utilisation vs batch size: fixture-mlp",
        "Memory breakdown per batch size: fixture-resnet (fp32)",
        "Memory breakdown per batch size: fixture-mlp (bf16)",
        "Step-time distribution: fixture-mlp",
        "Phase shares of an iteration: fixture-resnet",
    ] {
        assert!(dom.contains(&format!("<title>{title}</title>")), "no plot titled `{title}` in the DOM");
    }
    let svgs = dom.matches("<svg").count();
    assert_eq!(svgs, 11, "2 specs x (throughput, utilisation, phases, step times) + 3 memory (one per precision)");
    // Small multiples: every plot is a panel of a grid, none stands alone in a section.
    let grids: Vec<&str> = dom.split("<div class=\"grid\">").skip(1).collect();
    assert_eq!(grids.len(), 5, "one grid per plot section");
    let in_grids: usize = grids.iter().map(|g| g.split("</div>").next().unwrap().matches("<svg").count()).sum();
    assert_eq!(in_grids, svgs);
    for src in dom.split("src=\"").skip(1).chain(dom.split("href=\"").skip(1)) {
        assert!(!src.starts_with("http"), "external reference: {}", &src[..src.len().min(80)]);
    }
    // Every configuration has a row in the detail table too; the out-of-memory one is marked.
    assert_eq!(dom.matches("<td>fixture-resnet</td>").count(), 4);
    assert_eq!(dom.matches("<td>fixture-mlp</td>").count(), 6);
    assert!(dom.contains("<td class=\"bad\">1 out_of_memory, 1 skipped</td>"), "{dom}");

    // It also rasterises.
    let png = tmp.path().join("shot.png");
    let shot = chromium(
        &browser,
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

#[test]
fn the_browser_is_the_one_named_else_the_first_on_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(b.join("chromium-browser"), "").unwrap();
    std::fs::write(b.join("chromium"), "").unwrap();
    std::fs::create_dir_all(a.join("chromium")).unwrap(); // a directory is not a browser
    let path = std::env::join_paths([&a, &b]).unwrap();
    assert_eq!(find_chromium(None, Some(&path)), Some(b.join("chromium")));
    assert_eq!(find_chromium(Some(OsStr::new("/opt/chrome")), Some(&path)), Some(PathBuf::from("/opt/chrome")));
    assert_eq!(find_chromium(Some(OsStr::new("")), Some(&path)), Some(b.join("chromium")));
    std::fs::remove_file(b.join("chromium")).unwrap();
    assert_eq!(find_chromium(None, Some(&path)), Some(b.join("chromium-browser")));
    assert_eq!(find_chromium(None, None), None);
}

/// `trainbench history ARGS --store h.sqlite` in `dir`: its standard output.
fn history_in(dir: &Path, args: &[&str]) -> String {
    let out = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir)
        .arg("history")
        .args(args)
        .args(["--store", "h.sqlite"])
        .env_remove("TRAINBENCH_STORE")
        .output()
        .unwrap();
    assert!(out.status.code().is_some_and(|c| c <= 1), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The figure of the series named `name` in the page's DOM.
fn figure<'a>(dom: &'a str, name: &str) -> &'a str {
    let at = dom.find(&format!("<figure id=\"{name}\">")).unwrap_or_else(|| panic!("no figure of {name}"));
    dom[at..].split("</figure>").next().unwrap()
}

#[test]
fn history_page_draws_every_series_with_its_marks_and_links_each_point_to_its_result() {
    let Some(browser) = browser() else { return };
    let tmp = tempfile::tempdir().unwrap();
    // 18 points: libtorch 2.13 makes it 30% slower at #6, 2.14 slower again at #12, which is acknowledged.
    for minute in 0..18 {
        let (slowdown, libtorch) = match minute {
            0..6 => (1.0, "2.12.0"),
            6..12 => (1.3, "2.13.0"),
            _ => (1.6, "2.14.0"),
        };
        crate::history::write_point(&tmp.path().join("results"), minute, slowdown, libtorch, 2);
    }
    // Recorded by a relative path, as `run --out results --record` records it.
    history_in(tmp.path(), &["record", "results"]);
    history_in(tmp.path(), &["ack", ":step_time", "--at", "12", "--why", "libtorch 2.14 upgrade"]);
    history_in(tmp.path(), &["report", "--out", "page"]);
    let list: serde_json::Value = serde_json::from_str(&history_in(tmp.path(), &["list", "--format", "json"])).unwrap();
    let series = list["series"].as_array().unwrap();
    assert!(series.len() >= 3, "step time, throughput and more: {list}");

    let page = tmp.path().join("page/history.html");
    let html = std::fs::read_to_string(&page).unwrap();
    for needle in ["<script", "<link", "@import", "url(", "src=\"http", "href=\"http"] {
        assert!(!html.contains(needle), "the page contains `{needle}`");
    }
    let url = format!("file://{}", page.display());
    let loaded = chromium(&browser, &["--enable-logging=stderr", "--v=0", "--dump-dom", &url], &tmp.path().join("p1"));
    assert!(loaded.status.success(), "chromium failed: {}", String::from_utf8_lossy(&loaded.stderr));
    let console: Vec<String> =
        String::from_utf8_lossy(&loaded.stderr).lines().filter(|l| l.contains(":CONSOLE")).map(String::from).collect();
    assert!(console.is_empty(), "the page logged to the console: {console:#?}");
    let dom = String::from_utf8_lossy(&loaded.stdout).into_owned();

    // Every series is drawn: one figure each, with its line and one linked dot per point.
    assert_eq!(dom.matches("<figure id=").count(), series.len());
    for s in series {
        let fig = figure(&dom, s["name"].as_str().unwrap());
        assert_eq!(fig.matches("<svg").count(), 1, "{fig}");
        assert!(fig.contains("<polyline class=\"line\" points=\""), "{fig}");
        let points = s["points"].as_u64().unwrap() as usize;
        assert_eq!((fig.matches("<circle").count(), fig.matches("<a class=\"point\"").count()), (points, points));
        assert!(fig.contains("<rect class=\"band\""), "each segment's noise band: {fig}");
    }
    // The change point at #6 is marked with its environment diff; the acknowledged change at #12 is shown.
    let step = series.iter().find(|s| s["metric"] == "step_time").unwrap();
    let fig = figure(&dom, step["name"].as_str().unwrap());
    let mark = fig.split("<line class=\"reg\"").nth(1).expect("a regression marked on the plot");
    let title = mark.split("<title>").nth(1).unwrap().split("</title>").next().unwrap();
    assert!(title.starts_with("regression +") && title.contains("at #6: libtorch 2.12.0 -&gt; 2.13.0"), "{title}");
    assert!(fig.contains("at #6: libtorch 2.12.0 -&gt; 2.13.0"), "the caption lists it too: {fig}");
    assert!(fig.contains("<line class=\"ack\"") && fig.contains("acknowledged at #12: libtorch 2.14 upgrade"), "{fig}");

    // One click from a point to its result: each link, resolved against the page, is that point's result file,
    // and Chromium opens it.
    let shown: serde_json::Value =
        serde_json::from_str(&history_in(tmp.path(), &["show", ":step_time", "--format", "json"])).unwrap();
    let hrefs: Vec<&str> =
        fig.split("<a class=\"point\" href=\"").skip(1).map(|a| a.split('"').next().unwrap()).collect();
    for (href, point) in hrefs.iter().zip(shown["points"].as_array().unwrap()) {
        assert!(href.starts_with("../results/"), "relative to the page: {href}");
        let file = tmp.path().join("page").join(href);
        let source = tmp.path().join(point["sources"][0].as_str().unwrap());
        assert_eq!(file.canonicalize().unwrap(), source.canonicalize().unwrap(), "{href}");
    }
    let target = format!("file://{}", tmp.path().join("page").join(hrefs[7]).canonicalize().unwrap().display());
    let opened = chromium(&browser, &["--dump-dom", &target], &tmp.path().join("p2"));
    let run_id = shown["points"][7]["run_ids"][0].as_str().unwrap();
    assert!(String::from_utf8_lossy(&opened.stdout).contains(&format!("\"run_id\": \"{run_id}\"")), "{target}");
}
