//! Handing a command from the `trainbench` front binary to `trainbench-engine`, the binary that links the
//! training engines: where the engine binary is (beside the front, or `TRAINBENCH_ENGINE`), replacing this
//! process with it (same arguments, same process id, so signals, Ctrl-C and the exit code are the engine's),
//! and the engine's check that it comes from the same build as the front that started it.

use std::ffi::OsString;
use std::path::PathBuf;

/// Names the engine binary to use instead of the one beside `trainbench`.
pub const ENGINE_VAR: &str = "TRAINBENCH_ENGINE";
/// Set by the front for the engine: the front's build ([`build_id`]).
const FRONT_BUILD_VAR: &str = "TRAINBENCH_FRONT_BUILD";

/// Why the engine binary could not take over.
#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    /// No engine binary where it should be.
    #[error(
        "`trainbench {command}` runs in the training engine, `{path}`, which is missing{why}. One build command \
         makes both binaries: `cargo build --release --features tch,wgpu,mpi` (or `cargo install --path . \
         --features tch,wgpu,mpi`); `cargo run` builds only `trainbench`. Set {ENGINE_VAR} to use an engine \
         binary elsewhere"
    )]
    Missing {
        /// The subcommand handed over.
        command: String,
        /// Where it was looked for.
        path: String,
        /// Why it could not be used, when it exists.
        why: String,
    },
    /// This program's own path is unknown, so the engine beside it cannot be found.
    #[error("cannot find the training engine beside this program ({0}); set {ENGINE_VAR} to trainbench-engine's path")]
    NoSelf(std::io::Error),
    /// The engine was started by a front of another build.
    #[error(
        "trainbench-engine ({engine}) and the trainbench that started it ({front}) come from different builds; \
         rebuild both with one command (`cargo build --release --features ...`), or set {ENGINE_VAR} to the \
         engine of the same build"
    )]
    OtherBuild {
        /// This engine's build.
        engine: String,
        /// The front's build.
        front: String,
    },
}

/// This build: crate version, git commit and the backend features, the same in both binaries of one build.
pub fn build_id() -> String {
    let features: Vec<&str> =
        [("tch", cfg!(feature = "tch")), ("wgpu", cfg!(feature = "wgpu")), ("mpi", cfg!(feature = "mpi"))]
            .into_iter()
            .filter_map(|(name, on)| on.then_some(name))
            .collect();
    format!(
        "{} ({}; features: {})",
        env!("CARGO_PKG_VERSION"),
        env!("TRAINBENCH_GIT_COMMIT"),
        if features.is_empty() { "none".to_string() } else { features.join(",") }
    )
}

/// The engine binary: `TRAINBENCH_ENGINE` when set, else `trainbench-engine` beside this program.
pub fn engine_path() -> Result<PathBuf, HandoffError> {
    if let Some(path) = std::env::var_os(ENGINE_VAR).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let me = std::env::current_exe().map_err(HandoffError::NoSelf)?;
    Ok(me.with_file_name(format!("trainbench-engine{}", std::env::consts::EXE_SUFFIX)))
}

/// Replace this process with the engine binary, given this process's arguments. Returns only on failure.
pub fn exec_engine() -> HandoffError {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let command = args.first().map(|a| a.to_string_lossy().into_owned()).unwrap_or_default();
    let path = match engine_path() {
        Ok(p) => p,
        Err(e) => return e,
    };
    let missing =
        |why: String| HandoffError::Missing { command: command.clone(), path: path.display().to_string(), why };
    if !path.is_file() {
        return missing(String::new());
    }
    let mut engine = std::process::Command::new(&path);
    engine.args(&args).env(FRONT_BUILD_VAR, build_id());
    missing(format!(" or would not start ({})", replace_with(engine)))
}

/// `exec`: the engine takes this process over; only an error comes back.
#[cfg(unix)]
fn replace_with(mut engine: std::process::Command) -> std::io::Error {
    use std::os::unix::process::CommandExt as _;
    engine.exec()
}

/// Where `exec` does not exist: run the engine as a child and leave with its exit code.
#[cfg(not(unix))]
fn replace_with(mut engine: std::process::Command) -> std::io::Error {
    match engine.status() {
        Ok(status) => std::process::exit(status.code().unwrap_or(1)),
        Err(e) => e,
    }
}

/// In the engine binary: refuse to run for a front of another build (its arguments and files may not mean the
/// same thing here). Nothing to check when the engine was started directly.
pub fn check_front() -> Result<(), HandoffError> {
    match std::env::var(FRONT_BUILD_VAR) {
        Ok(front) if front != build_id() => Err(HandoffError::OtherBuild { engine: build_id(), front }),
        _ => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_build_names_its_version_commit_and_features() {
        let id = build_id();
        assert!(id.starts_with(env!("CARGO_PKG_VERSION")), "{id}");
        assert!(id.contains(env!("TRAINBENCH_GIT_COMMIT")) && id.contains("features: "), "{id}");
    }

    #[test]
    fn a_missing_engine_says_what_to_build() {
        let e =
            HandoffError::Missing { command: "run".into(), path: "/x/trainbench-engine".into(), why: String::new() };
        let text = e.to_string();
        assert!(text.contains("`trainbench run`") && text.contains("/x/trainbench-engine"), "{text}");
        assert!(text.contains("cargo build --release --features") && text.contains(ENGINE_VAR), "{text}");
    }
}
