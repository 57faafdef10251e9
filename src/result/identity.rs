//! A configuration's identity: everything of a run that decides its performance, in one value that the report
//! (which runs pool as repeats), compare (which pairs are comparable), check (golden file names) and the
//! results history (series keys) all use. Two runs are repeats of one configuration only when their
//! identities are equal.
//!
//! What it holds, read from the result alone (so results written before it existed have one too):
//! - the **spec**: its name and a hash of its content (below);
//! - the **placement**: the backend and the device selector of the plan (`cuda` and `cuda:0` are one). Which
//!   device model that selector found is the machine's identity, not the configuration's: the report and
//!   compare key on it beside this;
//! - the **plan**: batch size, precision, topology (machines x workers), the data-parallel strategy with its
//!   server ranks, and for several workers the interconnect, the bucket size (strategies that bucket:
//!   all-reduce, ZeRO-1/2) and whether the exchange overlaps the computation (strategies that can), the device
//!   mesh when it splits the model (tensor and pipeline degrees, sequence parallelism, schedule, a given cut); the step
//!   schedule (activation checkpointing, gradient accumulation), the optimizer, TF32, cuDNN autotuning, fp16's
//!   initial loss scale, per-phase synchronisation, the CPU thread count and a training target.
//!
//! Left out: the run id and configuration id (names, not content), the repeat index and its seed, and the
//! measurement budget (`warmup`, iterations or seconds, `timeout_s`): how long a configuration is measured,
//! not what it is, so a run of 200 iterations is a repeat of one of 50. A field that cannot matter is
//! normalised: one worker has no link, bucket or overlap; a strategy that does not bucket has no bucket size.
//!
//! **The spec content hash** is the SHA-256 of the result's embedded canonical spec
//! (`environment.spec_canonical`, the only spec text a result stores) with every part the plan already
//! holds, or that cannot change what is trained, removed: the `[run]` budget, `[sweep]` (the plan holds the
//! batch size, precision and topology it chose), `[topology]` (backend, device and topology are in the plan),
//! `[training]` (precision, optimizer, numerics, schedule, target are in the plan; the seed varies by
//! repeat), `description` and `tags`. What is left is the spec's name and version, `[model]`, `[dataset]` and
//! `[metrics]`: what is trained on what. So `--set sweep.batch_sizes=[4]` or `--set run.iterations=50` leave
//! it unchanged, while an edited model changes it. The rest is serialised as JSON with sorted keys before
//! hashing, so neither key order nor the TOML writer's layout matters; an embedded spec that does not parse
//! is hashed as written.

use std::fmt::Write as _;

use trainbench_comm::{DataParallel, Topology, exchange::BUCKET_BYTES};
use trainbench_contract::{DeviceSelector, Numerics, RunPlan};
use trainbench_graph::Precision;
use trainbench_graph::training::{Checkpointing, StepSchedule};

use super::RunResult;

/// Top-level keys of a canonical spec that the content hash leaves out (see the module documentation).
const NOT_CONTENT: [&str; 6] = ["run", "sweep", "topology", "training", "description", "tags"];

/// The identity of a run's configuration (see the module documentation): equal for repeats of one
/// configuration, different as soon as anything that decides the performance differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigurationIdentity {
    /// Spec name.
    pub spec_name: String,
    /// SHA-256 (hex) of the spec's content: [`spec_content_sha256`].
    pub spec_content: String,
    /// Backend (`tch`, `wgpu`, `mock`).
    pub backend: String,
    /// Device selector of the plan, defaults made explicit (`cuda:0`).
    pub device: DeviceSelector,
    /// Global batch size (one micro-batch with accumulation).
    pub batch_size: usize,
    /// Precision.
    pub precision: Precision,
    /// Topology, normalised: one worker's link, bucket and overlap, and the bucket of a strategy that does not
    /// bucket, at their defaults.
    pub topology: Topology,
    /// A pipeline's cut as given (blocks per chunk); empty when balanced by FLOPs.
    pub pipeline_layers: Vec<usize>,
    /// Activation checkpointing and gradient accumulation.
    pub schedule: StepSchedule,
    /// The optimizer and its settings, as JSON with sorted keys.
    pub optimizer: String,
    /// TF32 for matrix multiplications.
    pub tf32_matmul: bool,
    /// TF32 for cuDNN.
    pub tf32_cudnn: bool,
    /// cuDNN autotuning.
    pub cudnn_benchmark: bool,
    /// fp16's initial loss scale, as written by Rust's shortest round-trip formatting.
    pub loss_scale: String,
    /// Device synchronised between phases.
    pub phase_timing: bool,
    /// Intra-op CPU threads, when set.
    pub cpu_threads: Option<u32>,
    /// The training target, as JSON with sorted keys, when the run trained to one.
    pub target: Option<String>,
}

/// One field in which two identities differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityDifference {
    /// The field, as people name it (`strategy`, `bucket size`, `spec content`).
    pub field: &'static str,
    /// Its value in the first identity; `-` where it does not apply.
    pub a: String,
    /// Its value in the second identity; `-` where it does not apply.
    pub b: String,
}

impl IdentityDifference {
    /// `field a vs b`.
    pub fn describe(&self) -> String {
        format!("{} {} vs {}", self.field, self.a, self.b)
    }
}

impl ConfigurationIdentity {
    /// The identity of a result's configuration, from its spec name, embedded spec, backend and plan.
    pub fn of(result: &RunResult) -> Self {
        Self::new(&result.spec_name, &result.environment.spec_canonical, &result.backend, &result.plan)
    }

    /// The identity of a planned run: its spec's name and canonical text, its backend and its plan.
    pub fn new(spec_name: &str, spec_canonical: &str, backend: &str, plan: &RunPlan) -> Self {
        let numerics: Numerics = plan.numerics;
        Self {
            spec_name: spec_name.to_string(),
            spec_content: spec_content_sha256(spec_canonical),
            backend: backend.to_string(),
            device: plan.device.canonical(),
            batch_size: plan.batch_size,
            precision: plan.precision,
            topology: normalised(plan.topology),
            pipeline_layers: plan.pipeline_layers.clone(),
            schedule: plan.schedule,
            optimizer: serde_json::to_value(&plan.optimizer).map(|v| canonical_json(&v)).unwrap_or_default(),
            tf32_matmul: numerics.tf32.matmul,
            tf32_cudnn: numerics.tf32.cudnn,
            cudnn_benchmark: numerics.cudnn_benchmark,
            loss_scale: format!("{:?}", numerics.loss_scale),
            phase_timing: plan.phase_timing,
            cpu_threads: plan.cpu_threads,
            target: plan.target.as_ref().and_then(|t| serde_json::to_value(t).ok()).map(|v| canonical_json(&v)),
        }
    }

    /// True when more than one worker (or a server beside one) exchanges gradients.
    fn distributed(&self) -> bool {
        is_distributed(&self.topology)
    }

    /// Every field in a fixed order, as `(name, value)`; `None` where the field does not apply or holds its
    /// default (so that a field added later leaves the key of every configuration without it unchanged).
    pub fn fields(&self) -> Vec<(&'static str, Option<String>)> {
        let t = &self.topology;
        let distributed = self.distributed();
        let bucketed =
            distributed && matches!(t.strategy, DataParallel::AllReduce | DataParallel::Zero1 | DataParallel::Zero2);
        let checkpointing = match self.schedule.checkpointing {
            Checkpointing::None => None,
            Checkpointing::Full => Some("full".to_string()),
            Checkpointing::EveryN { n } => Some(format!("every {n}")),
        };
        let default_numerics = Numerics::default();
        vec![
            ("spec", Some(self.spec_name.clone())),
            ("spec content", Some(self.spec_content.clone())),
            ("backend", Some(self.backend.clone())),
            ("device", Some(self.device.to_string())),
            ("batch size", Some(self.batch_size.to_string())),
            ("precision", Some(self.precision.as_str().to_string())),
            ("topology", Some(format!("{}x{}", t.nodes, t.devices_per_node))),
            ("strategy", Some(strategy_name(t.strategy))),
            ("interconnect", distributed.then(|| t.interconnect.name().to_string())),
            ("bucket size", bucketed.then(|| bucket_size(t.bucket_bytes))),
            ("overlap", (distributed && t.strategy.can_overlap()).then(|| yes_no(t.overlap))),
            ("mesh", (!t.mesh.is_flat()).then(|| crate::plan::mesh_token(&t.mesh).trim_start_matches('-').to_string())),
            (
                "pipeline cut",
                (!self.pipeline_layers.is_empty())
                    .then(|| self.pipeline_layers.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(",")),
            ),
            ("activation checkpointing", checkpointing),
            (
                "gradient accumulation",
                (self.schedule.micro_batches() > 1).then(|| self.schedule.micro_batches().to_string()),
            ),
            ("optimizer", Some(self.optimizer.clone())),
            ("TF32 matmul", (self.tf32_matmul != default_numerics.tf32.matmul).then(|| yes_no(self.tf32_matmul))),
            ("TF32 cuDNN", (self.tf32_cudnn != default_numerics.tf32.cudnn).then(|| yes_no(self.tf32_cudnn))),
            (
                "cuDNN benchmark",
                (self.cudnn_benchmark != default_numerics.cudnn_benchmark).then(|| yes_no(self.cudnn_benchmark)),
            ),
            (
                "initial loss scale",
                (self.loss_scale != format!("{:?}", default_numerics.loss_scale)).then(|| self.loss_scale.clone()),
            ),
            ("phase timing", (!self.phase_timing).then(|| "off".to_string())),
            ("CPU threads", self.cpu_threads.map(|n| n.to_string())),
            ("target", self.target.clone()),
        ]
    }

    /// A stable text key: `name=value` of every field that applies, in [`Self::fields`]' order, joined by
    /// `;` (a `\`, `;` or `=` inside a value escaped with `\`). Equal keys, equal identities.
    pub fn key(&self) -> String {
        let mut out = String::new();
        for (name, value) in self.fields() {
            let Some(value) = value else { continue };
            if !out.is_empty() {
                out.push(';');
            }
            let _ = write!(out, "{name}=");
            for c in value.chars() {
                if matches!(c, '\\' | ';' | '=') {
                    out.push('\\');
                }
                out.push(c);
            }
        }
        out
    }

    /// SHA-256 (hex) of [`Self::key`]: a fixed-length key for stores.
    pub fn digest(&self) -> String {
        crate::digest::sha256_hex(&self.key())
    }

    /// The configuration's name, as the planner names it today (`resnet50.b32.fp32.1x2-ar`; see
    /// [`crate::plan::config_name`]): a result written before the strategy was always in the id gets the
    /// name a run of its plan has now. Golden shape files are named by it.
    pub fn name(&self) -> String {
        crate::plan::config_name(&self.spec_name, self.batch_size, self.precision, &self.topology, &self.schedule)
    }

    /// Every field in which `self` and `other` differ, in [`Self::fields`]' order; the spec content shown by
    /// its first 12 hex digits.
    pub fn differences(&self, other: &Self) -> Vec<IdentityDifference> {
        let show = |name: &str, v: Option<String>| match v {
            None => "-".to_string(),
            Some(v) if name == "spec content" => v.get(..12).unwrap_or(&v).to_string(),
            Some(v) => v,
        };
        self.fields()
            .into_iter()
            .zip(other.fields())
            .filter(|((_, a), (_, b))| a != b)
            .map(|((field, a), (_, b))| IdentityDifference { field, a: show(field, a), b: show(field, b) })
            .collect()
    }
}

/// Fields that apply only to some topologies: one that applies to one identity and not to another follows from
/// their topologies, which name that difference.
const ONLY_SOME_TOPOLOGIES: [&str; 3] = ["interconnect", "bucket size", "overlap"];

/// What tells each of a set of identities apart: for each, `field value` of every field whose value is not the
/// same across the set (`strategy zero-2`), leaving out fields that do not apply to it; empty for a set of one or
/// of equal identities. Rows of one run id with different plans are labelled with it.
pub fn distinctions(identities: &[&ConfigurationIdentity]) -> Vec<Vec<String>> {
    let fields: Vec<Vec<(&'static str, Option<String>)>> = identities.iter().map(|i| i.fields()).collect();
    let Some(first) = fields.first() else { return Vec::new() };
    let varies = |k: usize| {
        let conditional = first.get(k).is_some_and(|(name, _)| ONLY_SOME_TOPOLOGIES.contains(name));
        let applied: Vec<&Option<String>> =
            fields.iter().filter_map(|f| f.get(k)).map(|(_, v)| v).filter(|v| !conditional || v.is_some()).collect();
        applied.iter().any(|v| Some(v) != applied.first())
    };
    let varying: Vec<usize> = (0..first.len()).filter(|&k| varies(k)).collect();
    fields
        .iter()
        .map(|f| {
            varying
                .iter()
                .filter_map(|&k| {
                    let (name, value) = f.get(k)?;
                    let value = value.as_deref()?;
                    let shown = if *name == "spec content" { value.get(..12).unwrap_or(value) } else { value };
                    Some(format!("{name} {shown}"))
                })
                .collect()
        })
        .collect()
}

/// Whether a topology exchanges anything: more than one worker, or a strategy other than `single`.
pub fn is_distributed(t: &Topology) -> bool {
    t.world_size() > 1 || !t.strategy.is_single()
}

/// A topology with what cannot matter set to its default: one worker's link, bucket and overlap; the bucket of
/// a strategy that does not bucket; the overlap of one that cannot overlap.
fn normalised(mut t: Topology) -> Topology {
    if !is_distributed(&t) {
        t.interconnect = Default::default();
    }
    if !is_distributed(&t) || !matches!(t.strategy, DataParallel::AllReduce | DataParallel::Zero1 | DataParallel::Zero2)
    {
        t.bucket_bytes = BUCKET_BYTES;
    }
    if !is_distributed(&t) || !t.strategy.can_overlap() {
        t.overlap = false;
    }
    t
}

/// `all-reduce`, `zero-2`, `parameter-server ×2` (two server ranks).
pub fn strategy_name(s: DataParallel) -> String {
    match s.servers() {
        0 => s.name().to_string(),
        n => format!("{} ×{n}", s.name()),
    }
}

/// `25 MiB`, or the bytes when not a whole number of MiB.
fn bucket_size(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    if bytes % MIB == 0 { format!("{} MiB", bytes / MIB) } else { format!("{bytes} bytes") }
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

/// SHA-256 (hex) of a canonical spec's content: the spec without what the plan holds or what cannot change what
/// is trained (see the module documentation). A text that is not TOML is hashed as written.
pub fn spec_content_sha256(spec_canonical: &str) -> String {
    let Ok(mut table) = toml::from_str::<toml::Table>(spec_canonical) else {
        return crate::digest::sha256_hex(spec_canonical);
    };
    for key in NOT_CONTENT {
        table.remove(key);
    }
    match serde_json::to_value(&table) {
        Ok(value) => crate::digest::sha256_hex(&canonical_json(&value)),
        Err(_) => crate::digest::sha256_hex(spec_canonical),
    }
}

/// JSON text with object keys sorted at every level, whatever order the value holds them in.
fn canonical_json(v: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(value) = map.get(k) {
                    write_canonical(value, out);
                }
            }
            out.push('}');
        }
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
#[path = "identity_tests.rs"]
mod tests;
