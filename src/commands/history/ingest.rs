//! `history record`, `history rebuild` and `history ack`: what goes into the store.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::common::{RevisionArg, StoreArg, find_series, read_results, store_error};
use crate::commands::{CommandError, Outcome};
use crate::history::points::{Point, load_series};
use crate::history::store::{Ack, StoreError, is_postgres};

/// Arguments of `history record` and `history rebuild`.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// Result files or results folders (searched recursively).
    #[arg(required = true, value_name = "RESULTS")]
    pub results: Vec<PathBuf>,
    /// The store.
    #[command(flatten)]
    pub store: StoreArg,
    /// The revision the results measured.
    #[command(flatten)]
    pub revision: RevisionArg,
}

/// Print what was not recorded and why.
fn report_skipped(unmeasured: &[(String, &'static str)], refused: &[String]) {
    for reason in refused {
        eprintln!("refused: {reason}");
    }
    for (path, status) in unmeasured {
        eprintln!("not recorded: {path}: nothing was measured ({status})");
    }
}

/// Carry out `history record`: add the runs not yet in the store; refused files are named (exit 2) and the
/// others recorded.
pub fn record(args: &RecordArgs) -> Result<Outcome, CommandError> {
    let revision = args.revision.get();
    let read = read_results(&args.results, &|_| revision.clone())?;
    let mut store = args.store.open()?;
    let added = store.insert_runs(&read.runs).map_err(store_error)?;
    report_skipped(&read.unmeasured, &read.refused);
    outln!(
        "recorded {added} new run(s) into {} ({} already there)",
        store.location(),
        read.runs.len().saturating_sub(added)
    );
    Ok(if read.refused.is_empty() { Outcome::Success } else { Outcome::InvalidInput })
}

/// Set a damaged SQLite store aside as `<file>.corrupt`, with its WAL files removed.
fn set_aside(path: &Path) -> Result<PathBuf, CommandError> {
    let aside = PathBuf::from(format!("{}.corrupt", path.display()));
    std::fs::rename(path, &aside).map_err(|source| CommandError::Io { path: path.display().to_string(), source })?;
    for suffix in ["-wal", "-shm"] {
        let side = PathBuf::from(format!("{}{suffix}", path.display()));
        if side.exists() {
            std::fs::remove_file(&side)
                .map_err(|source| CommandError::Io { path: side.display().to_string(), source })?;
        }
    }
    Ok(aside)
}

/// Carry out `history rebuild`: recreate the store from the result files. What only the store knows (each
/// run's revision, the acknowledgements) is carried over when the old store can be read; a damaged SQLite file
/// is set aside as `<file>.corrupt`. Nothing is changed when a file is refused.
pub fn rebuild(args: &RecordArgs) -> Result<Outcome, CommandError> {
    let location = args.store.location();
    let (old_revisions, old_acks, damaged): (BTreeMap<String, Option<String>>, Vec<Ack>, bool) =
        match crate::history::open(&location) {
            Ok(mut old) => {
                (old.revisions().map_err(store_error)?.into_iter().collect(), old.acks().map_err(store_error)?, false)
            }
            Err(StoreError::Corrupt { .. }) if !is_postgres(&location) => (BTreeMap::new(), Vec::new(), true),
            Err(e) => return Err(store_error(e)),
        };
    let revision = args.revision.get();
    let read = read_results(&args.results, &|run| {
        old_revisions.get(&run.run_key).cloned().unwrap_or_else(|| revision.clone())
    })?;
    if !read.refused.is_empty() {
        report_skipped(&[], &read.refused);
        eprintln!("the store was not changed");
        return Ok(Outcome::InvalidInput);
    }
    if damaged {
        let aside = set_aside(Path::new(&location))?;
        eprintln!("the damaged store was moved to {}", aside.display());
    }
    let mut store = args.store.open()?;
    store.reset().map_err(store_error)?;
    let added = store.insert_runs(&read.runs).map_err(store_error)?;
    let mut kept = 0;
    for ack in &old_acks {
        if read.runs.iter().any(|r| r.run_key == ack.at_run_key) {
            store.add_ack(ack).map_err(store_error)?;
            kept += 1;
        }
    }
    report_skipped(&read.unmeasured, &[]);
    outln!("rebuilt {} from {added} run(s) ({kept} acknowledged change(s) kept)", store.location());
    Ok(Outcome::Success)
}

/// Arguments of `history ack`.
#[derive(Debug, clap::Args)]
pub struct AckArgs {
    /// The series (its name as `history list` prints it, or a part naming one series).
    #[arg(value_name = "SERIES")]
    pub series: String,
    /// The point the accepted change starts at: its number (`#12` or `12`), a run id, or a revision.
    #[arg(long, value_name = "POINT")]
    pub at: String,
    /// Why the change is accepted (kept with it, shown by `show` and the report).
    #[arg(long, value_name = "TEXT")]
    pub why: String,
    /// The store.
    #[command(flatten)]
    pub store: StoreArg,
}

/// The point `at` names: a number, a run id, or a revision (its first point).
fn find_point<'a>(points: &'a [Point], at: &str) -> Option<&'a Point> {
    if let Ok(i) = at.trim_start_matches('#').parse::<usize>() {
        return points.get(i);
    }
    points.iter().find(|p| p.run_ids.iter().any(|r| r == at)).or_else(|| {
        points.iter().find(|p| p.revision.as_deref().is_some_and(|r| r == at || (at.len() >= 7 && r.starts_with(at))))
    })
}

/// Carry out `history ack`.
pub fn ack(args: &AckArgs) -> Result<Outcome, CommandError> {
    if args.why.trim().is_empty() {
        return Err(CommandError::Input("--why must say why the change is accepted".into()));
    }
    let mut store = args.store.open()?;
    let all = load_series(store.as_mut(), &|name| name.contains(&args.series)).map_err(store_error)?;
    let series = find_series(&all, &args.series)?;
    let name = series.id.name();
    let point = find_point(&series.points, &args.at).ok_or_else(|| {
        CommandError::Input(format!(
            "{name} has no point `{}` (points #0 to #{})",
            args.at,
            series.points.len().saturating_sub(1)
        ))
    })?;
    let Some(run_key) = point.run_keys.first() else {
        return Err(CommandError::Internal(format!(
            "point #{} of {name} has no runs (a bug: every point holds one)",
            point.index
        )));
    };
    store
        .add_ack(&Ack { series: name.clone(), at_run_key: run_key.clone(), why: args.why.trim().to_string() })
        .map_err(store_error)?;
    outln!(
        "acknowledged the change of {name} at point #{} ({}); its statistics restart there",
        point.index,
        point.started_at
    );
    Ok(Outcome::Success)
}
