//! The `plan` subcommand: prints the runs a spec expands to (the sweep product) as a table or JSON.

use std::path::PathBuf;

use comfy_table::{ContentArrangement, Table, presets};
use serde::Serialize;
use trainbench_contract::{BackendKind, Budget, RunPlan};

use super::args::{FormatArg, OutputFormat, SetArgs};
use super::spec_input::SpecLoader;
use super::{CommandError, Outcome};
use crate::plan::{PlacementOverride, placement, plan_on};
use crate::spec::diagnostics::{Diagnostic, render_text};
use crate::spec::rules;
use crate::spec::wire::Isolation;

/// Arguments of `trainbench plan`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The spec file.
    #[arg(value_name = "SPEC")]
    pub spec: PathBuf,
    /// Output format.
    #[command(flatten)]
    pub format: FormatArg,
    /// Spec values overridden before planning.
    #[command(flatten)]
    pub set: SetArgs,
}

/// `trainbench plan --format json`.
#[derive(Debug, Serialize)]
struct JsonPlan<'a> {
    name: &'a str,
    sha256: &'a str,
    /// The backend every run goes to (`auto` resolved for this build).
    backend: BackendKind,
    runs: Vec<RunPlan>,
}

/// Carry out `trainbench plan`.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    let format = args.format.get();
    let loader = match SpecLoader::new(&args.set, format) {
        Ok(loader) => loader,
        Err(stopped) => return stopped.into_result(),
    };
    let display = args.spec.display().to_string();
    let mut checked = loader.check(&args.spec, &display);
    if let Some(spec) = &checked.spec {
        // What this machine cannot start (the engine of a data-parallel group) is refused as `run` would.
        let refused = rules::check_launch(spec, PlacementOverride::default())?;
        if !refused.is_empty() {
            checked
                .diagnostics
                .extend(refused.into_iter().map(|f| Diagnostic::error(&display, f.message).maybe_hint(f.hint)));
            checked.spec = None;
        }
    }
    let Some(spec) = checked.spec else {
        match format {
            OutputFormat::Json => {
                let report = crate::spec::diagnostics::FileReport {
                    file: checked.file,
                    valid: false,
                    name: None,
                    sha256: None,
                    runs: None,
                    kind: None,
                    diagnostics: checked.diagnostics,
                };
                outln!("{}", serde_json::to_string_pretty(&report)?);
            }
            OutputFormat::Text => out!("{}", render_text(&checked.diagnostics)),
        }
        return Ok(Outcome::InvalidInput);
    };
    let placed = placement(&spec, PlacementOverride::default());
    let runs = plan_on(&spec, placed);
    match format {
        OutputFormat::Json => {
            let plan = JsonPlan { name: spec.name(), sha256: spec.sha256(), backend: placed.backend, runs };
            outln!("{}", serde_json::to_string_pretty(&plan)?);
        }
        OutputFormat::Text => {
            eprint!("{}", render_text(spec.warnings()));
            outln!("{}", plan_table(&runs));
            outln!(
                "{} run{} of `{}` (spec sha256 {})",
                runs.len(),
                if runs.len() == 1 { "" } else { "s" },
                spec.name(),
                spec.sha256()
            );
            let run = &spec.spec().run;
            if run.repeats > 1 {
                let where_ = match run.isolation {
                    Isolation::Process => "each in a process of its own (run.isolation = \"process\")",
                    Isolation::Shared => "all in the `trainbench run` process (run.isolation = \"shared\")",
                };
                outln!("{} repeats per configuration, {where_}", run.repeats);
            }
        }
    }
    Ok(Outcome::Success)
}

/// The runs as a Markdown-compatible table.
pub fn plan_table(runs: &[RunPlan]) -> String {
    let mut table = Table::new();
    table.load_preset(presets::ASCII_MARKDOWN).set_content_arrangement(ContentArrangement::Disabled);
    table.set_header([
        "id",
        "batch",
        "precision",
        "device",
        "topology",
        "strategy",
        "interconnect",
        "warmup",
        "budget",
        "seed",
    ]);
    for r in runs {
        let budget = match r.budget {
            Budget::Iterations(n) => format!("{n} it"),
            Budget::Seconds(s) => format!("{s} s"),
        };
        table.add_row([
            r.id.clone(),
            r.batch_size.to_string(),
            r.precision.as_str().to_string(),
            r.device.to_string(),
            format!("{}x{}", r.topology.nodes, r.topology.devices_per_node),
            r.topology.strategy.name().to_string(),
            r.topology.interconnect.name().to_string(),
            r.warmup.to_string(),
            budget,
            r.seed.to_string(),
        ]);
    }
    table.to_string()
}
