//! The `validate` subcommand: checks spec files (and folders of them, recursively) and prints every problem.
//! Hardware profiles (a top-level `kind = "hardware"`, or a `#:schema` line naming `hardware.schema.json`;
//! see `crate::hardware::looks_like_profile`) are checked against the hardware schema instead.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::args::{FormatArg, OutputFormat, SetArgs};
use super::spec_input::SpecLoader;
use super::{CommandError, Outcome};
use crate::hardware::{ProfileValidator, looks_like_profile};
use crate::spec::Diagnostic;
use crate::spec::diagnostics::{FileReport, render_text};

/// Arguments of `trainbench validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Spec files, or folders searched recursively for `*.toml` files.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[command(flatten)]
    pub format: FormatArg,
    /// Spec values overridden before validating.
    #[command(flatten)]
    pub set: SetArgs,
}

/// The whole report of `trainbench validate --format json`.
#[derive(Debug, Serialize)]
struct JsonReport {
    /// One entry per file checked (and per path that could not be used).
    files: Vec<FileReport>,
    /// Files without errors.
    valid: usize,
    /// Files with at least one error.
    invalid: usize,
}

/// Carry out `trainbench validate`.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    let format = args.format.get();
    let loader = match SpecLoader::new(&args.set, format) {
        Ok(loader) => loader,
        Err(stopped) => return stopped.into_result(),
    };
    let (files, mut path_errors) = collect_specs(&args.paths);
    let mut reports: Vec<FileReport> = path_errors
        .drain(..)
        .map(|d| FileReport {
            file: d.file.clone(),
            valid: false,
            name: None,
            sha256: None,
            runs: None,
            kind: None,
            diagnostics: vec![d],
        })
        .collect();
    let mut profiles: Option<ProfileValidator> = None;
    for (path, display) in &files {
        let text = crate::hardware::load::read_bounded(path).unwrap_or_default();
        if looks_like_profile(&String::from_utf8_lossy(&text)) {
            let validator = match &profiles {
                Some(v) => v,
                None => profiles.insert(ProfileValidator::new()?),
            };
            let checked = validator.check_file(path, display);
            let (name, diagnostics) = match checked {
                Ok(f) => (Some(f.name), Vec::new()),
                Err(d) => (None, d),
            };
            let valid = !diagnostics.iter().any(Diagnostic::is_error);
            let sha256 = valid.then(|| crate::digest::sha256_hex(&String::from_utf8_lossy(&text)));
            reports.push(FileReport {
                file: display.clone(),
                valid,
                name,
                sha256,
                runs: None,
                kind: Some("hardware"),
                diagnostics,
            });
            continue;
        }
        let checked = loader.check(path, display);
        let spec = checked.spec.as_ref();
        reports.push(FileReport {
            file: checked.file.clone(),
            valid: spec.is_some(),
            name: spec.map(|s| s.name().to_string()),
            sha256: spec.map(|s| s.sha256().to_string()),
            runs: spec.map(|s| crate::plan::plan(s).len()),
            kind: None,
            diagnostics: checked.diagnostics,
        });
    }
    let invalid = reports.iter().filter(|r| !r.valid).count();
    let valid = reports.len() - invalid;
    match format {
        OutputFormat::Json => {
            let report = JsonReport { files: reports, valid, invalid };
            outln!("{}", serde_json::to_string_pretty(&report)?);
        }
        OutputFormat::Text => out!("{}", text_report(&reports, valid, invalid)),
    }
    Ok(if invalid > 0 { Outcome::InvalidInput } else { Outcome::Success })
}

/// What the summary line says was checked: `files` in all, `profiles` of them hardware profiles.
fn checked_noun(files: usize, profiles: usize) -> String {
    let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    match (files - profiles, profiles) {
        (_, 0) => plural(files, "spec file", "spec files"),
        (0, p) => plural(p, "hardware profile", "hardware profiles"),
        (specs, p) => format!(
            "{} ({}, {})",
            plural(files, "file", "files"),
            plural(specs, "spec", "specs"),
            plural(p, "hardware profile", "hardware profiles")
        ),
    }
}

fn text_report(reports: &[FileReport], valid: usize, invalid: usize) -> String {
    let mut out = String::new();
    let (mut errors, mut warnings) = (0, 0);
    for r in reports {
        out.push_str(&render_text(&r.diagnostics));
        errors += r.diagnostics.iter().filter(|d| d.is_error()).count();
        warnings += r.diagnostics.len() - r.diagnostics.iter().filter(|d| d.is_error()).count();
        if let (true, Some(name), Some(kind)) = (r.valid, &r.name, r.kind) {
            out.push_str(&format!("ok: {} ({name}, {kind} profile)\n", r.file));
        }
        if let (true, Some(name), Some(runs)) = (r.valid, &r.name, r.runs) {
            out.push_str(&format!("ok: {} ({name}, {runs} run{})\n", r.file, if runs == 1 { "" } else { "s" }));
        }
    }
    let files = valid + invalid;
    let what = checked_noun(files, reports.iter().filter(|r| r.kind.is_some()).count());
    if invalid == 0 {
        out.push_str(&format!(
            "checked {what}: all valid ({warnings} warning{})\n",
            if warnings == 1 { "" } else { "s" }
        ));
    } else {
        out.push_str(&format!(
            "checked {what}: {invalid} invalid, {valid} valid ({errors} error{}, {warnings} warning{})\n",
            if errors == 1 { "" } else { "s" },
            if warnings == 1 { "" } else { "s" }
        ));
    }
    out
}

/// Expand the paths given into spec files (folders: every `*.toml` below, sorted), with problems for paths
/// that do not exist or folders without specs.
pub fn collect_specs(paths: &[PathBuf]) -> (Vec<(PathBuf, String)>, Vec<Diagnostic>) {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        let display = path.display().to_string();
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => {
                let before = files.len();
                walk(path, 0, &mut files);
                if files.len() == before {
                    errors.push(
                        Diagnostic::error(display, "no spec files (`*.toml`) in this folder or below")
                            .hint("pass spec files, or a folder holding `*.toml` specs such as `specs/`"),
                    );
                }
            }
            Ok(_) => files.push((path.clone(), display)),
            Err(e) => errors.push(
                Diagnostic::error(display, format!("cannot read this path: {e}"))
                    .hint("check the spelling; paths are relative to the current folder"),
            ),
        }
    }
    (files, errors)
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<(PathBuf, String)>) {
    if depth > 32 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if meta.is_dir() {
            walk(&path, depth + 1, out);
        } else if path.extension().is_some_and(|e| e == "toml") {
            let display = path.display().to_string();
            out.push((path, display));
        }
    }
}
