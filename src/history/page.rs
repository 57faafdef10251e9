//! The history page (`history report --out DIR`): one static HTML file in the report's style, every series
//! over time as an inline SVG: its points (each a link to its first result file, its figures in a tooltip), the
//! noise band of each segment (mean +- one standard deviation of the points between change points), change
//! points marked with their environment diff, and acknowledged changes. No scripts, no external requests.
//!
//! A point's link is relative to the page's folder when the result file and the page share a root (so the page
//! and the results can move or be served together), a `file://` URL otherwise. A source recorded as a relative
//! path (`run --out results --record` stores it as given) is taken relative to the directory the page is
//! written from.

use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use super::analysis::Detection;
use super::points::Series;
use crate::report::escape::escape;
use crate::report::html::STYLE;
use crate::stats::{mean, stdev};

/// Size of one plot, in SVG units.
const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 220.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 28.0;

/// Extra styles of the history page.
const EXTRA_STYLE: &str = ".band{fill:#4878d0;fill-opacity:.12}.line{fill:none;stroke:#4878d0;stroke-width:1.5}\
.pt{fill:#4878d0}.reg{stroke:#c0392b;stroke-dasharray:4 3}.imp{stroke:#27ae60;stroke-dasharray:4 3}\
.ack{stroke:#777;stroke-dasharray:1 3}.axis{stroke:#999}svg text{font-size:11px;fill:#555}";

/// `path` made absolute against `cwd`, with `.` and `..` components folded (no file system access).
fn absolute(path: &Path, cwd: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in cwd.join(path).components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Percent-encodes what a URL path cannot hold as is (all but unreserved characters and `/`).
fn url_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for byte in path.bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// Where the page's links start from: the folder the page is written to and the directory relative sources
/// were recorded from (both absolute).
#[derive(Debug, Clone)]
pub struct LinkBase {
    page_dir: PathBuf,
    cwd: PathBuf,
}

impl LinkBase {
    /// Links from a page in `page_dir`, relative sources taken against `cwd` (the working directory).
    pub fn new(page_dir: &Path, cwd: &Path) -> Self {
        LinkBase { page_dir: absolute(page_dir, cwd), cwd: cwd.to_path_buf() }
    }

    /// The link from the page to the result file `source` as the store recorded it.
    pub fn link(&self, source: &str) -> String {
        let target = absolute(Path::new(source), &self.cwd);
        let (from, to): (Vec<Component<'_>>, Vec<Component<'_>>) =
            (self.page_dir.components().collect(), target.components().collect());
        let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
        // Below the root only: a shared `/` alone is no common folder worth a relative link.
        if common > 1 {
            let mut parts: Vec<String> = vec!["..".to_string(); from.len() - common];
            parts.extend(to[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()));
            url_path(&parts.join("/"))
        } else {
            format!("file://{}", url_path(&target.to_string_lossy()))
        }
    }
}

/// The SVG of one series.
fn plot(series: &Series, detection: &Detection, links: &LinkBase) -> String {
    let values: Vec<f64> = series.points.iter().map(|p| p.value).collect();
    let (lo, hi) = values.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| (l.min(*v), h.max(*v)));
    if !(lo.is_finite() && hi.is_finite()) {
        return String::new();
    }
    let pad = ((hi - lo) * 0.1).max(hi.abs() * 0.01).max(f64::MIN_POSITIVE);
    let (lo, hi) = (lo - pad, hi + pad);
    let n = values.len().max(2) as f64 - 1.0;
    let x = |i: f64| LEFT + (WIDTH - LEFT - RIGHT) * i / n;
    let y = |v: f64| TOP + (HEIGHT - TOP - BOTTOM) * (1.0 - (v - lo) / (hi - lo));
    let mut s = String::new();
    let _ = write!(s, "<svg viewBox=\"0 0 {WIDTH} {HEIGHT}\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">");
    let _ = write!(
        s,
        "<line class=\"axis\" x1=\"{LEFT}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\"/><line class=\"axis\" x1=\"{LEFT}\" y1=\"{TOP}\" \
         x2=\"{LEFT}\" y2=\"{b}\"/><text x=\"2\" y=\"{t}\">{hi:.4e}</text><text x=\"2\" y=\"{b}\">{lo:.4e}</text>\
         <text x=\"{LEFT}\" y=\"{HEIGHT}\">#0</text><text x=\"{r2}\" y=\"{HEIGHT}\">#{last}</text>",
        b = HEIGHT - BOTTOM,
        r = WIDTH - RIGHT,
        t = TOP + 8.0,
        r2 = WIDTH - RIGHT - 24.0,
        last = values.len().saturating_sub(1)
    );
    // Segments: split at change points and acknowledged changes; each gets its noise band.
    let changes = match detection {
        Detection::Checked { changes } => changes.clone(),
        Detection::TooFewPoints { .. } => Vec::new(),
    };
    let mut cuts: Vec<usize> =
        changes.iter().map(|c| c.first_point.index).chain(series.acks.iter().map(|(i, _)| *i)).collect();
    cuts.push(0);
    cuts.push(values.len());
    cuts.sort_unstable();
    cuts.dedup();
    for pair in cuts.windows(2) {
        let segment = &values[pair[0]..pair[1]];
        let finite: Vec<f64> = segment.iter().copied().filter(|v| v.is_finite()).collect();
        if let (Some(m), Some(sd)) = (mean(&finite), stdev(&finite)) {
            let (x0, x1) = (x(pair[0] as f64 - 0.4).max(LEFT), x(pair[1] as f64 - 0.6).min(WIDTH - RIGHT));
            let (y0, y1) = (y(m + sd), y(m - sd));
            let _ = write!(
                s,
                "<rect class=\"band\" x=\"{x0:.1}\" y=\"{y0:.1}\" width=\"{:.1}\" height=\"{:.1}\"/>",
                (x1 - x0).max(1.0),
                (y1 - y0).max(1.0)
            );
        }
    }
    for c in &changes {
        let cx = x(c.first_point.index as f64 - 0.5);
        let diff: Vec<String> = c.environment.iter().map(ToString::to_string).collect();
        let class = if c.direction == "regression" { "reg" } else { "imp" };
        let _ = write!(
            s,
            "<line class=\"{class}\" x1=\"{cx:.1}\" y1=\"{TOP}\" x2=\"{cx:.1}\" y2=\"{:.1}\"><title>{}</title></line>",
            HEIGHT - BOTTOM,
            escape(&format!(
                "{} {:+.1}% at #{}: {}",
                c.direction,
                c.relative_change * 100.0,
                c.first_point.index,
                diff.join(", ")
            ))
        );
    }
    for (i, ack) in &series.acks {
        let ax = x(*i as f64 - 0.5);
        let _ = write!(
            s,
            "<line class=\"ack\" x1=\"{ax:.1}\" y1=\"{TOP}\" x2=\"{ax:.1}\" y2=\"{:.1}\"><title>acknowledged at #{i}: {}</title></line>",
            HEIGHT - BOTTOM,
            escape(&ack.why)
        );
    }
    let line: Vec<String> = values
        .iter()
        .enumerate()
        .filter(|(_, v)| v.is_finite())
        .map(|(i, v)| format!("{:.1},{:.1}", x(i as f64), y(*v)))
        .collect();
    let _ = write!(s, "<polyline class=\"line\" points=\"{}\"/>", line.join(" "));
    for p in series.points.iter().filter(|p| p.value.is_finite()) {
        let title = format!(
            "#{} {} {} value {:.6e} ({} run(s))",
            p.index,
            p.started_at,
            p.revision.as_deref().unwrap_or("-"),
            p.value,
            p.run_ids.len()
        );
        let href = p.sources.first().map(|s| links.link(s)).unwrap_or_default();
        let _ = write!(
            s,
            "<a class=\"point\" href=\"{}\"><circle class=\"pt\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\"><title>{}</title></circle></a>",
            escape(&href),
            x(p.index as f64),
            y(p.value),
            escape(&title)
        );
    }
    s.push_str("</svg>");
    s
}

/// The page for `series` (with their detections, in the same order), its points linking to their results
/// from where `links` says the page is.
pub fn render(series: &[Series], detections: &[Detection], links: &LinkBase) -> String {
    let mut h = String::from("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str("<title>trainbench history</title>\n");
    let _ = writeln!(h, "<style>{STYLE}{EXTRA_STYLE}</style>\n</head>\n<body>");
    h.push_str("<h1>trainbench history</h1>\n");
    let _ = writeln!(
        h,
        "<p class=\"note\">{} series. Blue band: mean +- one standard deviation of each segment; dashed red / green: a \
         regression / improvement change point (hover for the environment fields that changed); dotted grey: an \
         acknowledged change. Each point links to its result file.</p>",
        series.len()
    );
    h.push_str("<div class=\"grid\">\n");
    for (s, d) in series.iter().zip(detections) {
        let _ = write!(
            h,
            "<figure id=\"{}\">{}<figcaption><b>{}</b><br>{} | {} ({})",
            escape(&s.id.name()),
            plot(s, d, links),
            escape(&s.id.name()),
            escape(&s.id.machine_label),
            s.id.metric.name(),
            s.id.metric.unit()
        );
        match d {
            Detection::TooFewPoints { points, needed } => {
                let _ = write!(h, "<br>too few points for detection ({points}; it needs {needed})");
            }
            Detection::Checked { changes } => {
                for c in changes {
                    let diff: Vec<String> = c.environment.iter().map(ToString::to_string).collect();
                    let _ = write!(
                        h,
                        "<br>{} {:+.1}% at #{}: {}",
                        c.direction,
                        c.relative_change * 100.0,
                        c.first_point.index,
                        escape(&if diff.is_empty() {
                            "no environment field changed".to_string()
                        } else {
                            diff.join(", ")
                        })
                    );
                }
            }
        }
        for (i, ack) in &s.acks {
            let _ = write!(h, "<br>acknowledged at #{i}: {}", escape(&ack.why));
        }
        h.push_str("</figcaption></figure>\n");
    }
    h.push_str("</div>\n</body>\n</html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_relative_to_the_page_when_they_share_a_folder() {
        let links = LinkBase::new(Path::new("work/page"), Path::new("/home/u"));
        assert_eq!(links.link("work/results/a b#1.json"), "../results/a%20b%231.json");
        assert_eq!(links.link("/home/u/work/page/x.json"), "x.json");
        assert_eq!(links.link("./work/../work/r.json"), "../r.json");
        let elsewhere = LinkBase::new(Path::new("/srv/page"), Path::new("/"));
        assert_eq!(elsewhere.link("/home/u/r.json"), "file:///home/u/r.json");
    }
}
