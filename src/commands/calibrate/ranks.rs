//! `trainbench calibrate --link`: the link between two local ranks as a data-parallel run sees it. Two
//! all-reduce training runs of 2 CPU ranks go through `trainbench run` (this executable; ranks started by
//! `mpirun` on the MPI engine), one of a model of a few hundred parameters and one of about 3 M; the exchange of
//! each (staging the gradients on the host, the ring all-reduce, copying back, agreeing to go on), taken as the
//! median step less the mean other phases (at most the mean comm phase, which a descheduled rank inflates), is
//! solved for the ring's per-message latency alpha and bandwidth B of the model's
//! `T = 2 (W - 1) alpha + 2 (W - 1) / W x S / B` at W = 2.

use std::path::Path;
use std::process::Command;

use crate::hardware::wire::{Link, LinkKind};

/// The measured link and how it was measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// The intra-node link.
    pub link: Link,
    /// What was run and the two points.
    pub method: String,
}

/// The two models' (inputs = classes, hidden) sizes: a few hundred parameters and about 3 M.
const MODELS: [(usize, usize); 2] = [(8, 8), (1024, 1024)];

fn spec_text(inputs: usize, hidden: usize, threads: Option<u32>) -> String {
    format!(
        "version = 1\nname = \"calibrate-link-{inputs}\"\ndescription = \"trainbench calibrate --link\"\n\n\
         [model]\nfamily = \"mlp\"\ninputs = {inputs}\nhidden = [{hidden}, {hidden}]\nclasses = {inputs}\n\n\
         [training.optimizer]\nkind = \"sgd\"\nlr = 0.001\n\n\
         [sweep]\nbatch_sizes = [2]\n\n\
         [topology]\nbackend = \"tch\"\ndevice = \"cpu\"\ndevices_per_node = 2\nstrategy = \"all-reduce\"\n\n\
         [run]\nwarmup = 5\niterations = 30\nrepeats = 1\ntimeout_s = 300\n{}",
        threads.map(|t| format!("cpu_threads = {t}\n")).unwrap_or_default()
    )
}

/// Mean comm seconds per step and gradient bytes of one 2-rank run of `spec` (a result read back from `out`).
fn one_run(exe: &Path, dir: &Path, inputs: usize, hidden: usize, threads: Option<u32>) -> Result<(f64, f64), String> {
    let spec = dir.join(format!("link-{inputs}.toml"));
    std::fs::write(&spec, spec_text(inputs, hidden, threads)).map_err(|e| format!("{}: {e}", spec.display()))?;
    let out = dir.join(format!("results-{inputs}"));
    let run = Command::new(exe)
        .arg("run")
        .arg(&spec)
        .args(["--quiet", "--format", "json", "--out"])
        .arg(&out)
        .output()
        .map_err(|e| format!("cannot start `{} run`: {e}", exe.display()))?;
    if !run.status.success() {
        let err = String::from_utf8_lossy(&run.stderr);
        return Err(format!("the 2-rank run failed: {}", err.lines().last().unwrap_or("no message")));
    }
    let lines: serde_json::Value = serde_json::from_slice(&run.stdout).map_err(|e| format!("run's output: {e}"))?;
    let file = lines.get(0).and_then(|r| r.get("file")).and_then(|f| f.as_str()).ok_or("the run wrote no result")?;
    let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
    let result: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{file}: {e}"))?;
    let mean = |phase: &str| result.pointer(&format!("/metrics/phases/{phase}/mean_s")).and_then(|v| v.as_f64());
    let mean_comm = mean("comm").ok_or("the result has no comm phase")?;
    // The median step less its mean other phases: a rank descheduled on a shared machine makes the other wait
    // in a few steps for many milliseconds, which the mean comm phase averages in and the median step does not.
    let others: f64 = ["data", "forward", "backward", "optimizer"].iter().filter_map(|p| mean(p)).sum();
    let median = result.pointer("/metrics/step_time/median_s").and_then(|v| v.as_f64());
    let comm = match median.map(|m| m - others) {
        Some(c) if c > 0.0 => c.min(mean_comm),
        _ => mean_comm,
    };
    let params =
        result.pointer("/analysis/parameters").and_then(|v| v.as_f64()).ok_or("the result has no parameter count")?;
    Ok((comm, params * 4.0))
}

/// Why the link between local ranks could not be measured (each kind carries its message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    /// This executable or a scratch folder could not be found or made.
    #[error("{0}")]
    Setup(String),
    /// A training run of the two ranks failed or reported no exchange.
    #[error("{0}")]
    Run(String),
    /// The two runs' figures give no bandwidth (the larger exchange was not slower).
    #[error("{0}")]
    Unsolvable(String),
}

/// Measure the link (see the module's text).
pub fn measure(threads: Option<u32>) -> Result<Measured, LinkError> {
    let exe = std::env::current_exe().map_err(|e| LinkError::Setup(format!("cannot find this executable: {e}")))?;
    let dir = std::env::temp_dir().join(format!("trainbench-calibrate-link-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| LinkError::Setup(format!("{}: {e}", dir.display())))?;
    let points: Result<Vec<_>, String> =
        MODELS.iter().map(|&(inputs, hidden)| one_run(&exe, &dir, inputs, hidden, threads)).collect();
    // Best effort: a leftover temporary folder is no error of the calibration.
    let _ = std::fs::remove_dir_all(&dir);
    let points = points.map_err(LinkError::Run)?;
    let ((ts, ss), (tl, sl)) = (points[0], points[1]);
    solve(ts, ss, tl, sl).map_err(LinkError::Unsolvable).map(|(alpha, bandwidth)| Measured {
        link: Link {
            kind: LinkKind::SharedMemory,
            name: "2 local ranks, MPI (measured)".into(),
            generation: None,
            lanes: None,
            bandwidth_gbs: bandwidth / 1e9,
            latency_us: alpha * 1e6,
        },
        method: format!(
            "all-reduce training runs of 2 CPU ranks through `trainbench run` (MPI engine, mpirun), MLPs of {:.0} and \
             {:.0} gradient bytes: exchange per step (the median step less the mean other phases, at most the mean comm phase) {:.1} and {:.1} us, solved for T = 2 alpha + S / B (alpha {:.1} us, \
             B {:.2} GB/s)",
            ss,
            sl,
            ts * 1e6,
            tl * 1e6,
            alpha * 1e6,
            bandwidth / 1e9
        ),
    })
}

/// (alpha seconds, bandwidth bytes/s) of `T = 2 alpha + S / B` through (S_small, T_small) and (S_large, T_large).
fn solve(t_small: f64, s_small: f64, t_large: f64, s_large: f64) -> Result<(f64, f64), String> {
    if !(s_large > s_small && t_large > t_small) {
        return Err(format!(
            "the large model's exchange ({:.1} us for {s_large:.0} B) was not slower than the small one's ({:.1} us \
             for {s_small:.0} B): no bandwidth to solve for",
            t_large * 1e6,
            t_small * 1e6
        ));
    }
    let b = (s_large - s_small) / (t_large - t_small);
    Ok((((t_small - s_small / b) / 2.0).max(0.0), b))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn latency_and_bandwidth_are_solved_back() {
        // alpha 10 us, B 2 GB/s.
        let t = |s: f64| 2.0 * 10e-6 + s / 2e9;
        let (alpha, b) = solve(t(400.0), 400.0, t(12e6), 12e6).unwrap();
        assert!((alpha - 10e-6).abs() < 1e-12 && (b - 2e9).abs() < 1.0, "{alpha} {b}");
        assert!(solve(t(12e6), 12e6, t(400.0), 400.0).is_err());
    }

    #[test]
    fn the_spec_validates() {
        let text = spec_text(8, 8, Some(1));
        let v: toml::Value = toml::from_str(&text).unwrap();
        assert_eq!(v["topology"]["devices_per_node"].as_integer(), Some(2));
        assert_eq!(v["run"]["cpu_threads"].as_integer(), Some(1));
    }
}
