//! Long runs stopped by a signal: whatever the run's length, the first SIGINT writes the result (status
//! `interrupted`, the measured steps counted) within seconds, a second SIGINT while it is written waits for it,
//! and the same holds for a repeat running in a worker process of its own.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use trainbench::result::{RunOutcome, RunResult};

use crate::common::mock_mlp_spec;

/// Longest wait from the first signal to the result on disk (the bound; finishing takes well under a
/// second for any run length, so this holds on a loaded machine too).
const RESULT_WITHIN: Duration = Duration::from_secs(5);

/// Longest wait for the run to start measuring (a loaded machine starts processes slowly); the bound under test
/// is [`RESULT_WITHIN`], from the signal on.
const MEASURING_WITHIN: Duration = Duration::from_secs(60);

/// Start `trainbench run` on `spec` in a process group of its own (so a signal can reach the whole group, as
/// a terminal's Ctrl-C does), with a progress line every 50 ms on stderr; its stderr lines arrive on the receiver.
fn start(spec: &Path, out: &Path) -> (Child, Receiver<String>) {
    use std::os::unix::process::CommandExt as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_trainbench"))
        .args(["run", spec.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .env("TRAINBENCH_PROGRESS_INTERVAL_S", "0.05")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let (send, lines) = channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    (child, lines)
}

/// Wait until a progress line says the run measures, at most [`MEASURING_WITHIN`]; the lines seen so far.
fn wait_until_measuring(lines: &Receiver<String>) -> Vec<String> {
    let since = Instant::now();
    let mut seen = Vec::new();
    while since.elapsed() < MEASURING_WITHIN {
        match lines.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                let measuring = line.starts_with("progress ") && line.contains(": measured ");
                seen.push(line);
                if measuring {
                    return seen;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    panic!("the run did not start measuring within {MEASURING_WITHIN:?}:\n{}", seen.join("\n"));
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
    let (mut child, lines) = start(&spec, &out);
    let pid = i32::try_from(child.id()).unwrap();
    let mut stderr = wait_until_measuring(&lines);
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
    stderr.extend(lines.iter());
    let stderr = stderr.join("\n");
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
