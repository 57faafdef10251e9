//! `history detect` and `history gate` on real runs (feature `tch`): a small MLP trains on libtorch's CPU
//! backend eight times, then eight times beside a busy loop that takes half of its core, each run recorded with
//! `run --record`. The detector must put a regression at the ninth point (within one), and the gate must call
//! the loaded runs a regression against the unloaded ones. Eight a side, not six: one loaded run in a CI run
//! once came out unslowed, and six against five plus that outlier cannot reach the detector's p < 0.001 (Welch's
//! test gave about 0.004), while eight against seven plus one can (about 1e-4).
//!
//! The verdict must not depend on the host's speed or on what else runs on it, so the runs and the load share
//! one core under real-time scheduling: every run at `SCHED_FIFO` priority 1 (ordinary processes, other tests
//! included, never take its core while it runs), the load at priority 2 spinning 1 ms of CPU time and sleeping
//! 1 ms (it takes half the core whenever it wants, so the runs slow down about twice whatever the machine). The
//! measured values are not asserted, only the position and direction of the change. Where real-time priorities
//! may not be set (not root, no `CAP_SYS_NICE`), the test is skipped with a notice, and fails under `CI=true`.
#![allow(clippy::unwrap_used)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::history::history;

const SPEC: &str = r#"
version = 1
name = "history-real"
[model]
family = "mlp"
inputs = 512
hidden = [512, 512]
classes = 10
[topology]
backend = "tch"
device = "cpu"
[sweep]
batch_sizes = [256]
[run]
warmup = 3
iterations = 20
"#;

/// Runs before the load, and beside it.
const RUNS_EACH: usize = 8;

/// The last CPU this process may run on.
fn last_cpu() -> Option<usize> {
    // SAFETY: `set` is a plain bit set the call fills; its size is passed.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        (0..libc::CPU_SETSIZE as usize).rev().find(|&cpu| libc::CPU_ISSET(cpu, &set))
    }
}

/// Pin the calling thread to `cpu` at `SCHED_FIFO` priority `priority`; false when not permitted. Only
/// async-signal-safe system calls, so it may run between `fork` and `exec`.
fn pin_real_time(cpu: usize, priority: i32) -> bool {
    // SAFETY: plain system calls on the calling thread with initialised arguments.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let param = libc::sched_param { sched_priority: priority };
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
            && libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0
    }
}

/// CPU time of the calling thread, seconds.
fn thread_cpu_s() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// A busy loop on one core at real-time priority 2, half of every 2 ms, until dropped.
struct Load {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(cpu: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            assert!(pin_real_time(cpu, 2), "the load could not be pinned at real-time priority");
            while !flag.load(Ordering::Relaxed) {
                let until = thread_cpu_s() + 1e-3;
                while thread_cpu_s() < until {
                    std::hint::spin_loop();
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        });
        Load { stop, thread: Some(thread) }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One `trainbench run --record` of the spec on `cpu` at real-time priority 1, into `out`.
fn run_recorded(spec: &Path, out: &Path, store: &Path, revision: &str, cpu: usize) {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("trainbench"));
    cmd.args(["run", "--quiet", "--record", "--revision", revision, "--store"])
        .arg(store)
        .arg("--out")
        .arg(out)
        .arg(spec)
        .env_remove("TRAINBENCH_STORE");
    // SAFETY: the hook only makes system calls (see `pin_real_time`).
    unsafe {
        cmd.pre_exec(move || if pin_real_time(cpu, 1) { Ok(()) } else { Err(std::io::Error::last_os_error()) });
    }
    let done = cmd.output().unwrap();
    assert!(done.status.success(), "run failed: {}", String::from_utf8_lossy(&done.stderr));
}

#[test]
fn a_run_slowed_by_a_cpu_load_is_found_at_the_right_point_and_gated_as_a_regression() {
    let Some(cpu) = last_cpu() else {
        trainbench_contract::conformance::prerequisite_missing("the CPU affinity of this process cannot be read");
        return;
    };
    let permitted = std::thread::spawn(move || pin_real_time(cpu, 1)).join().unwrap_or(false);
    if !permitted {
        trainbench_contract::conformance::prerequisite_missing(
            "real-time scheduling (SCHED_FIFO) may not be set here (needs root or CAP_SYS_NICE)",
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("history-real.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let store = tmp.path().join("h.sqlite");
    let folder = |i: usize| -> PathBuf { tmp.path().join(format!("p{i:02}")) };
    // An unrecorded first run loads libtorch from a cold cache.
    run_recorded(&spec, &tmp.path().join("warm-up"), &tmp.path().join("warm-up.sqlite"), "-", cpu);
    for i in 0..RUNS_EACH {
        run_recorded(&spec, &folder(i), &store, "unloaded", cpu);
    }
    {
        let _load = Load::start(cpu);
        for i in RUNS_EACH..2 * RUNS_EACH {
            run_recorded(&spec, &folder(i), &store, "loaded", cpu);
        }
    }

    let store = store.to_str().unwrap();
    let (_, shown, _) = history(store, &["show", ":step_time", "--format", "json"]);
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    let values: Vec<f64> = shown["points"].as_array().unwrap().iter().map(|p| p["value"].as_f64().unwrap()).collect();
    assert_eq!(values.len(), 2 * RUNS_EACH, "{shown}");
    eprintln!("step time per point (s): {values:?}");
    let (code, detected, err) = history(store, &["detect", ":step_time", "--format", "json"]);
    assert_eq!(code, 1, "a regression: {detected}{err}");
    let detected: serde_json::Value = serde_json::from_str(&detected).unwrap();
    let changes = detected["series"][0]["detection"]["changes"].as_array().unwrap();
    let found = changes.iter().find(|c| c["first_point"]["index"].as_u64().unwrap().abs_diff(RUNS_EACH as u64) <= 1);
    let found = found.unwrap_or_else(|| panic!("no change point within one of #{RUNS_EACH}: {changes:?}; {values:?}"));
    assert_eq!(found["direction"], "regression", "{found}; {values:?}");
    assert!(found["relative_change"].as_f64().unwrap() > 0.3, "{found}; {values:?}");

    let loaded: Vec<String> = (RUNS_EACH..2 * RUNS_EACH).map(|i| folder(i).display().to_string()).collect();
    let mut args = vec!["gate"];
    args.extend(loaded.iter().map(String::as_str));
    args.extend(["--baseline", "unloaded", "--format", "json"]);
    let (code, verdict, err) = history(store, &args);
    assert_eq!(code, 1, "the loaded runs are a regression against the unloaded ones: {verdict}{err}; {values:?}");
}
