//! Long runs stopped by a signal: whatever the run's length, the first SIGINT writes the result (status
//! `interrupted`, the measured steps counted) within seconds, a second SIGINT while it is written waits for it,
//! and the same holds for a repeat running in a worker process of its own.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use trainbench::result::{RunOutcome, RunResult};

use crate::common::mock_mlp_spec;

/// Longest wait from the first signal to the result on disk (the bound; finishing takes well under a
/// second for any run length, so this holds on a loaded machine too).
const RESULT_WITHIN: Duration = Duration::from_secs(5);

/// Start `trainbench run` on `spec` in a process group of its own (so a signal can reach the whole group, as
/// a terminal's Ctrl-C does).
fn start(spec: &Path, out: &Path) -> Child {
    use std::os::unix::process::CommandExt as _;
    Command::new(env!("CARGO_BIN_EXE_trainbench"))
        .args(["run", spec.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap()
}

fn signal(target: i32, sig: i32) {
    // SAFETY: `kill` with a pid (or a negated process group id) and a valid signal number has no memory effects.
    assert_eq!(unsafe { libc::kill(target, sig) }, 0, "kill({target}, {sig})");
}

/// Wait for `path` to hold a result, at most `limit`; the result and the time it took.
fn result_within(path: &Path, since: Instant, limit: Duration) -> (RunResult, Duration) {
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(r) = serde_json::from_str::<RunResult>(&text) {
                return (r, since.elapsed());
            }
        }
        assert!(since.elapsed() < limit, "no result at {} within {limit:?} of the signal", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Measure for `measure`, signal `target` with SIGINT (and again after `second` if given), and check the run's
/// result: interrupted, its measured steps counted and summarised, within [`RESULT_WITHIN`].
fn stopped_run_keeps_its_result(repeats: u32, to_group: bool, second: Option<Duration>) {
    let dir = tempfile::tempdir().unwrap();
    let spec = mock_mlp_spec(dir.path(), "long", 1_000_000_000, repeats);
    let out = dir.path().join("out");
    let mut child = start(&spec, &out);
    let pid = i32::try_from(child.id()).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(child.try_wait().unwrap().is_none(), "the run ended by itself");
    let target = if to_group { -pid } else { pid };
    let first = Instant::now();
    signal(target, libc::SIGINT);
    if let Some(after) = second {
        std::thread::sleep(after);
        signal(target, libc::SIGINT);
    }
    let (result, took) = result_within(&out.join("long/long.b2.fp32.1x1.r0.json"), first, RESULT_WITHIN);
    eprintln!("result {took:?} after the first SIGINT");
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(matches!(result.outcome, RunOutcome::Interrupted { .. }), "{:?}", result.outcome);
    let m = result.metrics.as_ref().expect("the measured steps are summarised");
    let seen = m.samples_seen.unwrap();
    assert!(seen > 0 && m.step_time.n as u64 <= seen, "{seen} steps seen, {} summarised", m.step_time.n);
    assert_eq!(m.samples_kept, Some(m.step_times_s.len() as u64));
    assert!(m.step_times_s.len() as u64 <= seen.min(trainbench_contract::steplog::KEPT_STEPS as u64));
}

#[test]
fn a_sigint_to_a_billion_iteration_run_writes_its_result_within_seconds() {
    stopped_run_keeps_its_result(1, false, None);
}

#[test]
fn a_second_sigint_while_the_result_is_written_waits_for_it() {
    stopped_run_keeps_its_result(1, false, Some(Duration::from_millis(500)));
}

#[test]
fn a_worker_process_stopped_with_its_parent_hands_over_its_result() {
    // Two repeats: each runs in a `trainbench worker` of its own; a terminal's Ctrl-C reaches both processes.
    stopped_run_keeps_its_result(2, true, Some(Duration::from_millis(500)));
}
