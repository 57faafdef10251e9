//! The `analyze` subcommand: parameters, FLOPs and the memory estimate of a spec's model, before anything runs.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;
use trainbench_graph::Precision;
use trainbench_graph::analysis::{Analysis, MemoryEstimate, analyze, memory_estimate_checkpointed};

use super::args::{FormatArg, OutputFormat, SetArgs, parse_precision};
use super::spec_input::load_spec;
use super::{CommandError, Outcome};
use crate::format::human_bytes;
use crate::spec::ValidatedSpec;

/// Arguments of `trainbench analyze`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The spec file whose `[model]` is analysed.
    pub spec: PathBuf,
    /// Batch size of the memory estimate [default: the spec's first `sweep.batch_sizes` entry].
    #[arg(long)]
    pub batch: Option<usize>,
    /// Precision of the memory estimate: fp32, fp16 or bf16 [default: the spec's first swept precision, else
    /// `training.precision`].
    #[arg(long, value_parser = parse_precision)]
    pub precision: Option<Precision>,
    /// Output format (text: a summary; JSON: one object with `parameters`, `flops`, `activations`, `memory`,
    /// ...).
    #[command(flatten)]
    pub format: FormatArg,
    /// Include every layer (text: a table; JSON: a `layers` array).
    #[arg(long)]
    pub per_layer: bool,
    /// Spec values overridden before analysing.
    #[command(flatten)]
    pub set: SetArgs,
}

/// What `analyze` prints as JSON: the analysis of the model plus the memory estimate of the chosen setting.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Spec name.
    pub spec: String,
    /// The static analysis.
    #[serde(flatten)]
    pub analysis: Analysis,
    /// Memory estimate at the chosen batch size, precision and the spec's optimizer.
    pub memory: MemoryEstimate,
}

/// Build the report of a validated spec: its graph's analysis and the memory estimate at `batch` (default:
/// the first swept batch size) and `precision` (default: the first swept precision, else the training one).
pub fn report(
    spec: &ValidatedSpec,
    batch: Option<usize>,
    precision: Option<Precision>,
) -> Result<Report, CommandError> {
    let s = spec.spec();
    let batch = batch.or_else(|| s.sweep.batch_sizes.first().copied()).unwrap_or(1);
    if batch == 0 {
        return Err(CommandError::Input("--batch must be at least 1".into()));
    }
    let precision = precision.or_else(|| s.sweep.precisions.first().copied()).unwrap_or(s.training.precision);
    let analysis = analyze(spec.graph());
    let checkpointing = s.training.schedule().checkpointing;
    let memory = memory_estimate_checkpointed(&analysis, batch, precision, &s.training.optimizer, checkpointing);
    Ok(Report { spec: s.name.clone(), analysis, memory })
}

/// Carry out `trainbench analyze`.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    let format = args.format.get();
    let spec = match load_spec(&args.spec, &args.set, format) {
        Ok(spec) => spec,
        Err(stopped) => return stopped.into_result(),
    };
    let mut report = report(&spec, args.batch, args.precision)?;
    if !args.per_layer {
        report.analysis.layers.clear();
    }
    let out = match format {
        OutputFormat::Json => {
            let json = serde_json::to_string_pretty(&report)?;
            json + "\n"
        }
        OutputFormat::Text => render_text(&report),
    };
    out!("{out}");
    Ok(Outcome::Success)
}

/// Thousands separators.
fn int(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// FLOPs with an SI prefix.
fn flops(f: u64) -> String {
    let f = f as f64;
    let (v, u) = match f {
        f if f >= 1e12 => (f / 1e12, "TFLOP"),
        f if f >= 1e9 => (f / 1e9, "GFLOP"),
        f if f >= 1e6 => (f / 1e6, "MFLOP"),
        f if f >= 1e3 => (f / 1e3, "kFLOP"),
        f => return format!("{f:.0} FLOP"),
    };
    format!("{v:.2} {u}")
}

/// The text rendering: summary, memory estimate, per-kind totals, notes, and the layer table if present.
pub fn render_text(r: &Report) -> String {
    let a = &r.analysis;
    let m = &r.memory;
    let mut s = String::new();
    let _ = writeln!(s, "model {} (spec `{}`)", a.model, r.spec);
    let _ = writeln!(s, "  parameters        {:>16}  (+ {} buffer elements)", int(a.parameters), int(a.buffers));
    if a.trainable_parameters != a.parameters {
        let frozen = a.parameters - a.trainable_parameters;
        let _ = writeln!(s, "  trainable         {:>16}  ({} frozen)", int(a.trainable_parameters), int(frozen));
    }
    if a.active_parameters != a.parameters {
        let _ = writeln!(
            s,
            "  active per token  {:>16}  (mixture of experts: the chosen experts only)",
            int(a.active_parameters)
        );
    }
    for (part, p) in &a.parameters_by_part {
        let _ = writeln!(s, "    {part:<15} {:>16}", int(*p));
    }
    let per = if a.items_per_sample > 1 {
        format!(" ({} {} per sample)", a.items_per_sample, a.item_unit)
    } else {
        String::new()
    };
    let _ = writeln!(s, "  forward FLOPs     {:>16}  per sample{per}", flops(a.flops.forward_per_sample));
    let _ = writeln!(s, "  training FLOPs    {:>16}  per sample (forward + backward)", flops(a.flops.train_per_sample));
    let per_token = a.model_flops.per_token.map(|t| format!(", {} per token", flops(t))).unwrap_or_default();
    let _ = writeln!(
        s,
        "  model FLOPs       {:>16}  per sample{per_token} (MFU's numerator)",
        flops(a.model_flops.per_sample)
    );
    let _ = writeln!(s, "    convention: {}", a.model_flops.convention);
    let _ =
        writeln!(s, "  saved activations {:>16}  elements per sample", int(a.activations.saved_elements_per_sample));
    let _ = writeln!(
        s,
        "\nmemory estimate: batch {}, {}, {} (training step {})",
        m.batch_size,
        m.precision.as_str(),
        m.optimizer,
        flops(a.flops.train_per_sample * m.batch_size as u64)
    );
    let share = |b: u64| if m.total == 0 { 0.0 } else { 100.0 * b as f64 / m.total as f64 };
    for (name, b) in [
        ("weights", m.weights),
        ("gradients", m.gradients),
        ("optimizer state", m.optimizer_state),
        ("activations", m.activations),
        ("workspace", m.workspace),
    ] {
        let _ = writeln!(s, "  {name:<17} {:>12}  {:>5.1}%", human_bytes(b), share(b));
    }
    let _ = writeln!(s, "  {:<17} {:>12}", "total", human_bytes(m.total));
    let verdict = if m.feature_maps_dominate { "yes" } else { "no" };
    let _ = writeln!(s, "  feature maps dominate: {verdict}");
    let _ = writeln!(
        s,
        "\n  {:<22} {:>7} {:>14} {:>14} {:>14}",
        "by kind", "layers", "parameters", "fwd FLOPs", "saved elems"
    );
    for (k, t) in &a.by_kind {
        let _ = writeln!(
            s,
            "  {k:<22} {:>7} {:>14} {:>14} {:>14}",
            t.layers,
            int(t.parameters),
            flops(t.forward_flops),
            int(t.saved_elements)
        );
    }
    for n in &a.notes {
        let _ = writeln!(s, "note: {n}");
    }
    if !a.layers.is_empty() {
        let _ = writeln!(
            s,
            "\n{:<44} {:<16} {:<20} {:>12} {:>12} {:>12} {:>12}",
            "layer", "op", "shape", "parameters", "fwd FLOPs", "bwd FLOPs", "saved"
        );
        for l in &a.layers {
            let shape = format!("{:?}", l.shape);
            let _ = writeln!(
                s,
                "{:<44} {:<16} {:<20} {:>12} {:>12} {:>12} {:>12}",
                l.name,
                l.op,
                shape,
                int(l.parameters),
                flops(l.forward_flops),
                flops(l.backward_flops),
                int(l.saved_elements)
            );
        }
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const CUSTOM: &str = r#"
version = 1
name = "bad-mlp"

[model]
family = "custom"
input = [784]

[[model.layers]]
type = "linear"
out_features = 100
name = "fc1"

[[model.layers]]
type = "relu"

[[model.layers]]
type = "linear"
in_features = 128
out_features = 10
name = "fc2"
"#;

    fn check(text: &str) -> Result<ValidatedSpec, Vec<crate::spec::Diagnostic>> {
        let validator = crate::spec::SpecValidator::new().unwrap();
        validator.check_bytes("bad-mlp.toml", text.as_bytes(), None, &crate::spec::Overrides::none()).into_result()
    }

    #[test]
    fn custom_shape_error_names_location_layer_and_widths() {
        let e = crate::spec::diagnostics::render_text(&check(CUSTOM).unwrap_err());
        assert!(e.contains("model.layers[2].in_features") || e.contains("model.layers.2.in_features"), "{e}");
        assert!(e.contains("bad-mlp.toml:19:15"), "{e}");
        assert!(e.contains("fc2") && e.contains("128") && e.contains("100"), "{e}");
    }

    #[test]
    fn json_report_has_the_promised_keys() {
        let spec = check(&CUSTOM.replace("in_features = 128", "in_features = 100")).unwrap();
        let r = report(&spec, Some(4), Some(Precision::Bf16)).unwrap();
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["parameters"], 784 * 100 + 100 + 100 * 10 + 10);
        assert_eq!(v["flops"]["forward_per_sample"], 2 * (784 * 100 + 100 * 10));
        // fc1 reads the data: backward = weight gradient only.
        assert_eq!(v["flops"]["train_per_sample"], 2 * (2 * 784 * 100) + 3 * (2 * 100 * 10));
        assert_eq!(v["memory"]["batch_size"], 4);
        assert_eq!(v["memory"]["precision"], "bf16");
        assert!(render_text(&r).contains("79,510"));
    }

    #[test]
    fn thousands_and_units() {
        assert_eq!(int(25_557_032), "25,557,032");
        assert_eq!(int(999), "999");
        assert_eq!(flops(8_178_368_512), "8.18 GFLOP");
    }
}
