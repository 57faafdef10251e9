//! Asking git about the repository a history's revisions come from: one command run in a folder (stdin closed,
//! output captured), and its trimmed output when it succeeded and said something.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Run `git ARGS` in `dir`, capturing what it prints.
pub fn run(dir: &Path, args: &[&str]) -> std::io::Result<Output> {
    Command::new("git").args(args).current_dir(dir).stdin(Stdio::null()).output()
}

/// `git ARGS` in `dir`: its trimmed standard output when it ran, succeeded and printed something.
pub fn text(dir: &Path, args: &[&str]) -> Option<String> {
    let out = run(dir, args).ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}
