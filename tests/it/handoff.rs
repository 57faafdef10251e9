//! The two binaries: `trainbench` (the front) links no training library and hands the commands that train to
//! `trainbench-engine`; a missing engine or one of another build is a clear error, never a crash or a silent
//! run of stale code.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Output;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run(bin: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = std::process::Command::new(bin);
    c.current_dir(root()).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// The shared libraries the dynamic loader opened for `bin args` (glibc's `LD_DEBUG=libs` trace on stderr).
fn loaded_libraries(bin: &str, args: &[&str]) -> Vec<String> {
    let out = run(bin, args, &[("LD_DEBUG", "libs")]);
    assert!(out.status.success(), "{bin} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let trace = String::from_utf8_lossy(&out.stderr);
    trace
        .lines()
        .filter_map(|l| l.split("calling init: ").nth(1))
        .map(|lib| lib.trim().rsplit('/').next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn the_front_binary_starts_without_any_training_library() {
    let front = loaded_libraries(env!("CARGO_BIN_EXE_trainbench"), &["validate", "specs/smoke/mlp.toml"]);
    assert!(!front.is_empty(), "the loader trace is read (it names at least libc)");
    let heavy = |libs: &[String]| -> Vec<String> {
        libs.iter()
            .filter(|l| {
                ["libtorch", "libc10", "libmpi", "libnccl", "libcudnn", "libcublas"].iter().any(|h| l.starts_with(h))
            })
            .cloned()
            .collect()
    };
    assert_eq!(heavy(&front), Vec::<String>::new(), "the front loaded a training library: {front:?}");
    if trainbench::backend_registry::built(trainbench_contract::BackendKind::Tch) {
        // The same trace on the engine binary does see libtorch: the check above can fail.
        let engine = loaded_libraries(env!("CARGO_BIN_EXE_trainbench-engine"), &["--version"]);
        assert!(heavy(&engine).iter().any(|l| l.starts_with("libtorch")), "{engine:?}");
    }
}

#[test]
fn a_missing_engine_is_named_with_the_command_that_builds_it() {
    for args in [&["devices"][..], &["run", "specs/smoke/mlp.toml", "--backend", "mock", "--out", "/nonexistent/x"]] {
        let out =
            run(env!("CARGO_BIN_EXE_trainbench"), args, &[("TRAINBENCH_ENGINE", "/nonexistent/trainbench-engine")]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(&format!("`trainbench {}`", args[0])), "{stderr}");
        assert!(
            stderr.contains("/nonexistent/trainbench-engine") && stderr.contains("cargo build --release"),
            "{stderr}"
        );
    }
    // Commands that do not train never look for it.
    let out = run(
        env!("CARGO_BIN_EXE_trainbench"),
        &["plan", "specs/smoke/mlp.toml"],
        &[("TRAINBENCH_ENGINE", "/nonexistent")],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_engine_refuses_a_front_of_another_build() {
    let out = run(
        env!("CARGO_BIN_EXE_trainbench-engine"),
        &["devices"],
        &[("TRAINBENCH_FRONT_BUILD", "0.0.1 (0000000; features: none)")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("different builds") && stderr.contains("0.0.1 (0000000"), "{stderr}");
}

#[test]
fn handed_over_commands_keep_their_output_and_exit_code() {
    // `run` in the front is the engine's run: same files, same exit code (2 for a spec that does not exist).
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let out = run(
        env!("CARGO_BIN_EXE_trainbench"),
        &["run", "specs/smoke/mlp.toml", "--backend", "mock", "--quiet", "--out", out_dir.to_str().unwrap()],
        &[],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out_dir.join("smoke-mlp/index.json").is_file());
    let out = run(env!("CARGO_BIN_EXE_trainbench"), &["run", "no-such-spec.toml", "--backend", "mock"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn sigterm_to_the_pid_that_was_started_stops_the_run_and_keeps_its_result() {
    use std::io::BufRead as _;
    // `kill PID` or Slurm's `scancel` reach the engine that replaced `trainbench`, and stop the run as Ctrl-C
    // does: after the current iteration, the result written as interrupted, exit 1.
    let dir = tempfile::tempdir().unwrap();
    let spec = crate::common::mock_mlp_spec(dir.path(), "long", 10_000_000, 1);
    let out = dir.path().join("out");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_trainbench"))
        .args(["run", spec.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .env("TRAINBENCH_PROGRESS_INTERVAL_S", "0")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("progress") {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "the run ended before it reported progress");
    }
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: `kill` with a child's pid and a valid signal number has no memory effects.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{rest}");
    let result = std::fs::read_to_string(out.join("long/long.b2.fp32.1x1.r0.json")).unwrap();
    let result: trainbench::result::RunResult = serde_json::from_str(&result).unwrap();
    assert!(matches!(result.outcome, trainbench::result::RunOutcome::Interrupted { .. }), "{:?}", result.outcome);
}
