//! The `predict` subcommand: the PAI performance model (`crate::predict`) for every configuration a spec plans,
//! on one or more hardware profiles, with the per-layer table and the what-if table on request.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use super::args::{FormatArg, OutputFormat, SetArgs};
use super::spec_input::load_spec;
use super::{CommandError, Outcome};
use crate::format;
use crate::hardware::{Profile, ProfileValidator, THIS_MACHINE};
use crate::plan::plan;
use crate::predict::mesh::{MeshPrediction, predict_mesh};
use crate::predict::parallel::{self, ParallelRow};
use crate::predict::terms::{Breakdown, Term, Terms};
use crate::predict::uncertainty;
use crate::predict::whatif::{WhatIf, what_if};
use crate::predict::{AnalyzedGraph, Bound, Prediction, Setting, predict_analyzed};
use crate::spec::diagnostics::render_text as render_diagnostics;

/// Arguments of `trainbench predict`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The spec whose planned configurations are predicted.
    pub spec: PathBuf,
    /// Hardware profile: a path, or a shipped profile's name (`pai-assumed`, `p100`, `v100`, `a100`, `h100`,
    /// `h200`); repeat for several [default: this machine's calibrated profile, `$TRAINBENCH_HARDWARE` or
    /// `hardware/this-machine.toml`].
    #[arg(long = "hardware", value_name = "PROFILE")]
    pub hardware: Vec<String>,
    /// Output format (JSON: `{ spec, predictions: [{ config, step_time_s, samples_per_s, shares, ... }] }`).
    #[command(flatten)]
    pub format: FormatArg,
    /// Include every layer's forward and backward cost and its seconds by term (text: a table; JSON: `layers`,
    /// each phase's `terms`).
    #[arg(long)]
    pub per_layer: bool,
    /// Switch a term of the model off (repeatable): an additive term then prices as zero, a rate choice at the
    /// simpler rate (`docs/performance-model.md` lists them; e.g. `first-node-cold-start`).
    #[arg(long = "without-term", value_name = "TERM", value_parser = Term::parse)]
    pub without_terms: Vec<Term>,
    /// Add the what-if table: other strategy, each alternative link, the other shipped devices, other
    /// precisions, with predicted speed-ups.
    #[arg(long)]
    pub what_if: bool,
    /// Add the parallelism table for this many GPUs of the profile in one machine: data parallelism
    /// replicated and with ZeRO-1/2/3 (FSDP) sharding, tensor parallelism and pipeline parallelism, each with
    /// memory per GPU, whether it fits, the exchange per step, step time, items/s per GPU and MFU (formulas:
    /// `crate::predict::parallel`), at the spec's batch per GPU.
    #[arg(long, value_name = "GPUS", value_parser = clap::value_parser!(u16).range(1..=4096))]
    pub parallel: Option<u16>,
    /// Spec values overridden before predicting.
    #[command(flatten)]
    pub set: SetArgs,
}

/// One configuration on one profile.
#[derive(Debug, Serialize)]
pub struct Entry {
    /// Configuration id (as in run ids, without the repeat).
    pub config: String,
    /// Where the profile came from (path or `shipped:<name>`).
    pub hardware_origin: String,
    /// Strategy, topology and link, as planned.
    pub topology: String,
    /// The prediction.
    #[serde(flatten)]
    pub prediction: Prediction,
    /// What-if rows (with `--what-if`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub what_if: Vec<WhatIf>,
    /// Parallelism rows (with `--parallel`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parallel: Vec<ParallelRow>,
    /// The device mesh's prediction, for a plan with tensor, pipeline or expert parallelism (then `prediction` is one
    /// data-parallel replica's whole model on one device, before the mesh splits it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh: Option<MeshPrediction>,
}

/// What `predict --format json` prints.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Spec name.
    pub spec: String,
    /// One entry per configuration and profile.
    pub predictions: Vec<Entry>,
}

fn topology(run: &trainbench_contract::RunPlan) -> String {
    let t = run.topology;
    format!("{} {}x{} over {}", t.strategy.name(), t.nodes, t.devices_per_node, t.interconnect.name())
}

fn profiles(args: &Args) -> Result<Vec<Profile>, CommandError> {
    let v = ProfileValidator::new()?;
    let fail = |d: Vec<crate::spec::Diagnostic>| CommandError::Input(render_diagnostics(&d).trim_end().to_string());
    if args.hardware.is_empty() {
        let here = std::env::current_dir().unwrap_or_default();
        return match v.this_machine(&here).map_err(fail)? {
            Some(p) => Ok(vec![p]),
            None => Err(CommandError::Input(format!(
                "no hardware profile: pass --hardware (a path, or one of pai-assumed, p100, v100, a100, h100, h200), \
                 or calibrate this machine first: `trainbench calibrate --out {THIS_MACHINE}`"
            ))),
        };
    }
    args.hardware.iter().map(|h| v.resolve(h).map_err(fail)).collect()
}

/// The mesh block of one entry: layout, step, bubble, bytes per dimension and the per-stage memory table with
/// the maximum over ranks as headline.
fn mesh_text(p: &MeshPrediction) -> String {
    let gib = |b: f64| b / (1u64 << 30) as f64;
    let m = &p.mesh;
    let mut s = String::new();
    let mut layout = format!("DP {} x TP {} x PP {}", p.data_parallel, m.tensor_parallel, m.pipeline_parallel);
    if m.sequence_parallel {
        layout.push_str(", sequence parallel");
    }
    if m.expert_parallel > 1 {
        layout.push_str(&format!(", experts over EP {} inside DP", m.expert_parallel));
    }
    if m.pipeline_parallel > 1 {
        layout.push_str(&format!(
            ", {} with {} micro-batches of {}",
            m.pipeline_schedule.name(),
            m.microbatches,
            p.microbatch_size
        ));
        if m.virtual_stages > 1 {
            layout.push_str(&format!(", {} virtual stages", m.virtual_stages));
        }
    }
    let mfu = p.mfu.map_or_else(|| "n/a".to_string(), format::percent);
    let _ = writeln!(
        s,
        "  mesh {layout} on {} ranks: step {} (80%: {}-{}; {} overlapped), {} items/s, MFU {mfu} (each token once, \
         over all ranks)",
        p.world_size,
        format::duration(p.step_time_s),
        format::duration(p.interval.low_s),
        format::duration(p.interval.high_s),
        format::duration(p.step_time_overlapped_s),
        si(p.items_per_s)
    );
    if let Some(b) = &p.bubble {
        let _ = writeln!(
            s,
            "  bubble {} (the schedule replayed over the chunks' passes and the hops; {} = {} for equal chunks)",
            format::percent(b.fraction),
            b.formula,
            format::percent(b.formula_fraction)
        );
    }
    for b in &p.bytes {
        let _ = writeln!(
            s,
            "  {:<9} {:<15} {:>10.3} GB per rank per step",
            b.dimension.name(),
            b.collective,
            b.bytes_per_rank / 1e9
        );
    }
    let _ = writeln!(
        s,
        "  memory per rank: max {:.2} GiB on stage {} ({})",
        gib(p.max_memory_per_rank_bytes),
        p.max_memory_stage,
        if p.fits { "fits" } else { "DOES NOT FIT" }
    );
    let _ = writeln!(s, "  stage  blocks         weights  grads  optim  activations (held)   peak GiB");
    for st in &p.stages {
        let blocks: Vec<String> = st.blocks.iter().map(|[a, b]| format!("{a}..{b}")).collect();
        let _ = writeln!(
            s,
            "  {:>5}  {:<12} {:>8.2} {:>6.2} {:>6.2} {:>8.2} ({:>3}) {:>10.2}",
            st.stage,
            blocks.join(","),
            gib(st.weights_bytes),
            gib(st.gradients_bytes),
            gib(st.optimizer_bytes),
            gib(st.activations_bytes),
            st.microbatches_held,
            gib(st.peak_bytes)
        );
    }
    s
}

/// The parallelism table of one entry.
fn parallel_text(rows: &[ParallelRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  layout                                          mem/GPU  fits  sent/GPU/step       step  overlapped   items/s/GPU     MFU"
    );
    for r in rows {
        let mfu = r.mfu.map_or_else(|| "n/a".to_string(), format::percent);
        let _ = writeln!(
            s,
            "  {:<45} {:>9.1} GiB {:>4} {:>10.2} GB {:>10} {:>11} {:>13.0} {:>7}",
            r.layout,
            r.memory_per_gpu_bytes / (1u64 << 30) as f64,
            if r.fits { "yes" } else { "no" },
            r.exchange_bytes_per_gpu / 1e9,
            format::duration(r.step_time_s),
            format::duration(r.step_time_overlapped_s),
            r.items_per_s_per_gpu,
            mfu
        );
        let _ = writeln!(s, "      {}", r.formula);
    }
    s
}

/// Carry out `trainbench predict`.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    let format = args.format.get();
    let spec = match load_spec(&args.spec, &args.set, format) {
        Ok(spec) => spec,
        Err(stopped) => return stopped.into_result(),
    };
    let profiles = profiles(args)?;
    let others: Vec<_> = if args.what_if {
        ProfileValidator::new()?.shipped().into_iter().map(|p| p.file).collect()
    } else {
        Vec::new()
    };
    // One analysis of the graph for every run, profile and what-if row.
    let analyzed = AnalyzedGraph::new(spec.graph());
    let terms = Terms::without(&args.without_terms);
    let mut entries = Vec::new();
    for run in plan(&spec).iter().filter(|r| r.repeat == 0) {
        let meshed = Setting::of(run);
        // With a mesh, the headline prediction is one replica's whole model per device over the data dimension.
        let mut setting = meshed.clone();
        // Expert parallelism is priced by the mesh prediction too; the headline keeps the experts replicated.
        let meshed_out = meshed.topology.mesh.splits_model() || meshed.topology.mesh.expert_parallel > 1;
        if meshed_out {
            let t = &mut setting.topology;
            (t.nodes, t.devices_per_node, t.mesh) = (1, meshed.topology.data_parallel(), trainbench_comm::Mesh::flat());
        }
        for profile in &profiles {
            let mesh = match meshed_out {
                true => Some(
                    predict_mesh(&analyzed, &meshed, &profile.file, &terms)
                        .map_err(|e| CommandError::Input(format!("{}: {e}", run.config)))?,
                ),
                false => None,
            };
            let mut prediction = predict_analyzed(&analyzed, &setting, &profile.file, &terms)
                .map_err(|e| CommandError::Input(format!("{}: {e}", run.config)))?;
            let what_if = if args.what_if {
                what_if(&analyzed, &setting, &profile.file, &prediction, &others, &terms)
            } else {
                Vec::new()
            };
            let parallel = match args.parallel {
                Some(gpus) => parallel::rows(&analyzed, &setting, &profile.file, &terms, usize::from(gpus))
                    .map_err(|e| CommandError::Input(format!("{}: {e}", run.config)))?,
                None => Vec::new(),
            };
            if !args.per_layer {
                prediction.layers.clear();
            }
            entries.push(Entry {
                config: run.config.clone(),
                hardware_origin: profile.origin.clone(),
                topology: topology(run),
                prediction,
                what_if,
                parallel,
                mesh,
            });
        }
    }
    let report = Report { spec: spec.name().to_string(), predictions: entries };
    match format {
        OutputFormat::Json => {
            let json = serde_json::to_string_pretty(&report)?;
            outln!("{json}");
        }
        OutputFormat::Text => out!("{}", render_text(&report)),
    }
    Ok(Outcome::Success)
}

/// A phase's seconds by term, largest first: `roofline-compute 1.2 ms, per-op-overhead 3.0 us`.
fn terms_text(b: &Breakdown) -> String {
    let mut v: Vec<(&Term, &f64)> = b.iter().collect();
    v.sort_by(|a, b| b.1.total_cmp(a.1));
    v.iter().map(|(t, s)| format!("{} {}", t.name(), format::duration(**s))).collect::<Vec<_>>().join(", ")
}

/// Throughput in items and MFU with its peak, or why there is none: `8.1k tokens/s (8.1k per device); MFU 41.2%
/// of 989.4 TFLOP/s bf16 (profile h100: ...; palm: ...)`.
fn figures_text(f: &crate::predict::fit_and_rates::Figures) -> String {
    use crate::result::Sampled;
    let memory = format!(
        "memory {:.1} GiB estimated of {:.1} GiB",
        f.memory.estimate_bytes as f64 / (1u64 << 30) as f64,
        f.memory.device_bytes as f64 / (1u64 << 30) as f64
    );
    let t = match &f.throughput {
        Sampled::Available(t) => {
            format!("{} {}/s ({} per device), {memory}", si(t.items_per_s), t.item_unit, si(t.items_per_s_per_device))
        }
        Sampled::Unavailable { reason } => return format!("no throughput: {reason}"),
    };
    match &f.mfu {
        Sampled::Available(m) => format!(
            "{t}\n  MFU {} of {} FLOP/s {} (peak: {}; model FLOPs: {} convention)",
            format::percent(m.mfu),
            si(m.peak.flop_per_s),
            m.peak.precision,
            m.peak.source,
            m.convention.split(':').next().unwrap_or_default()
        ),
        Sampled::Unavailable { reason } => format!("{t}\n  MFU unavailable: {reason}"),
    }
}

/// A rate with an SI prefix (`8.1k`, `989.4T`).
fn si(x: f64) -> String {
    let (v, p) = match x.abs() {
        a if a >= 1e12 => (x / 1e12, "T"),
        a if a >= 1e9 => (x / 1e9, "G"),
        a if a >= 1e6 => (x / 1e6, "M"),
        a if a >= 1e3 => (x / 1e3, "k"),
        _ => (x, ""),
    };
    format!("{v:.1}{p}")
}

/// The text rendering: one block per configuration and profile.
pub fn render_text(r: &Report) -> String {
    let mut s = String::new();
    for e in &r.predictions {
        let p = &e.prediction;
        let _ = writeln!(
            s,
            "{} on {} ({}){}",
            e.config,
            p.hardware,
            e.topology,
            if p.calibrated { ", calibrated" } else { ", datasheet" }
        );
        if let Some(w) = &p.loaded_calibration {
            let _ = writeln!(s, "  WARNING: {w}");
        }
        if !p.terms_off.is_empty() {
            let off: Vec<String> = p.terms_off.iter().map(|t| t.name()).collect();
            let _ = writeln!(s, "  terms switched off: {}", off.join(", "));
        }
        let rate = if p.figures.memory.fits {
            format!("{:.1} samples/s", p.samples_per_s)
        } else {
            "DOES NOT FIT (the step's price as if it fit)".to_string()
        };
        let _ = writeln!(
            s,
            "  step {} ({:.0}% interval {} - {}; {} overlapped), {rate}; batch {} per device x {} workers",
            format::duration(p.step_time_s),
            p.interval.level * 100.0,
            format::duration(p.interval.low_s),
            format::duration(p.interval.high_s),
            format::duration(p.step_time_overlapped_s),
            p.per_device_batch,
            p.world_size
        );
        // The sigmas every term shares, each alone as a range of the step.
        let shared = [
            (p.model_error, "the model's own error where it was tuned"),
            (p.machine_drift, "the machine's drift while it was calibrated"),
        ];
        for (sigma, what) in shared {
            if let Some(x) = sigma {
                let (low, high) = ((-uncertainty::Z80 * x).exp(), (uncertainty::Z80 * x).exp());
                let _ = writeln!(s, "  the interval holds {what} ({x:.3}): alone, x{low:.2} to x{high:.2} of the step");
            }
        }
        let _ = writeln!(s, "  {}", figures_text(&p.figures));
        let ph = &p.phases;
        let _ = writeln!(
            s,
            "  data {} | forward {} | backward {} | optimizer {} | comm {}",
            format::duration(ph.data_s),
            format::duration(ph.forward_s),
            format::duration(ph.backward_s),
            format::duration(ph.optimizer_s),
            format::duration(ph.comm_s)
        );
        let _ = writeln!(
            s,
            "  shares: data {}, compute {}, comm {}; compute: {} compute-bound, {} memory-bound, {} per-op overhead",
            format::percent(p.shares.data),
            format::percent(p.shares.compute),
            format::percent(p.shares.comm),
            format::duration(p.bound.compute_bound_s),
            format::duration(p.bound.memory_bound_s),
            format::duration(p.bound.overhead_s)
        );
        if p.world_size > 1 {
            let _ = writeln!(
                s,
                "  comm: {} over {} ({:.1} MB per worker)",
                p.comm.formula,
                p.comm.link,
                p.comm.bytes_per_worker / 1e6
            );
        }
        if !p.layers.is_empty() {
            let _ = writeln!(
                s,
                "  {:<32} {:<14} {:>11} {:>7} {:>11} {:>7}",
                "layer", "op", "forward", "bound", "backward", "bound"
            );
            let b = |x: Bound| match x {
                Bound::Compute => "compute",
                Bound::Memory => "memory",
            };
            for l in &p.layers {
                let _ = writeln!(
                    s,
                    "  {:<32} {:<14} {:>11} {:>7} {:>11} {:>7}",
                    l.name,
                    l.op,
                    format::duration(l.forward.time_s),
                    b(l.forward.bound),
                    format::duration(l.backward.time_s),
                    if l.backward.time_s > 0.0 { b(l.backward.bound) } else { "-" }
                );
                let _ = writeln!(s, "      forward: {}", terms_text(&l.forward.terms));
                if !l.backward.terms.is_empty() {
                    let _ = writeln!(s, "      backward: {}", terms_text(&l.backward.terms));
                }
            }
        }
        if let Some(m) = &e.mesh {
            s.push_str(&mesh_text(m));
        }
        if !e.parallel.is_empty() {
            s.push_str(&parallel_text(&e.parallel));
        }
        if !e.what_if.is_empty() {
            let _ = writeln!(
                s,
                "  what if                                                      step       speed-up  comm share"
            );
            for w in &e.what_if {
                match (w.step_time_s, w.speedup, w.comm_share) {
                    (Some(t), Some(x), Some(c)) => {
                        let _ = writeln!(
                            s,
                            "  {:<60} {:>10} {:>8.2}x {:>10}",
                            w.change,
                            format::duration(t),
                            x,
                            format::percent(c)
                        );
                    }
                    _ => {
                        let _ = writeln!(s, "  {:<60} n/a: {}", w.change, w.error.as_deref().unwrap_or(""));
                    }
                }
            }
        }
        s.push('\n');
    }
    s
}
