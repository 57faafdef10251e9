//! Rules about where a spec runs: the topologies of its sweep (world size vs strategy, batch divisibility,
//! interconnect), the device selector and its backend, and the precisions each backend and device support.

use std::collections::HashSet;

use trainbench_comm::Mesh;
use trainbench_contract::device::{DeviceParseError, SELECTOR_FORMS};
use trainbench_contract::{BackendKind, DeviceFamily, DeviceSelector};
use trainbench_graph::Precision;

use super::finding::Finding;
use crate::backend_registry::{self, Placement};
use crate::spec::path::FieldPath;
use crate::spec::wire::{BackendChoice, Interconnect, Strategy, SweepSpec, TopologySpec, TrainingSpec};

/// One topology a spec runs on: `[topology]` with a `sweep.topologies` entry applied.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectiveTopology {
    /// Where it is written (`topology` or `sweep.topologies[i]`).
    pub path: FieldPath,
    /// Machines.
    pub nodes: usize,
    /// Devices per machine.
    pub devices_per_node: usize,
    /// Strategy.
    pub strategy: Strategy,
    /// Parameter-server ranks (read with `strategy = "parameter-server"` only).
    pub parameter_servers: usize,
    /// Interconnect.
    pub interconnect: Interconnect,
    /// The device mesh (tensor and pipeline degrees of the entry or `[topology]`, the rest from `[topology]`).
    pub mesh: Mesh,
}

impl EffectiveTopology {
    /// World size (every rank), if it does not overflow.
    pub fn world_size(&self) -> Option<usize> {
        self.nodes.checked_mul(self.devices_per_node)
    }
    /// Data-parallel degree (the world size over the tensor and pipeline degrees), when those divide it.
    pub fn data_parallel(&self) -> Option<usize> {
        self.mesh.data_parallel(self.world_size()?).ok()
    }
    /// Path of one of its fields: in the sweep entry when written there, else in `[topology]`.
    pub(super) fn field(&self, key: &str, in_override: bool) -> FieldPath {
        if in_override { self.path.key(key) } else { FieldPath::keys(&["topology", key]) }
    }
}

/// The topologies a spec runs on, in sweep order.
pub fn effective_topologies(topology: &TopologySpec, sweep: &SweepSpec) -> Vec<EffectiveTopology> {
    let base = |path: FieldPath| EffectiveTopology {
        path,
        nodes: topology.nodes,
        devices_per_node: topology.devices_per_node,
        strategy: topology.strategy,
        parameter_servers: topology.parameter_servers,
        interconnect: topology.interconnect,
        mesh: topology.mesh_with(topology.tensor_parallel, topology.pipeline_parallel),
    };
    if sweep.topologies.is_empty() {
        return vec![base(FieldPath::keys(&["topology"]))];
    }
    let list = FieldPath::keys(&["sweep", "topologies"]);
    sweep
        .topologies
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let mut t = base(list.index(i));
            t.nodes = o.nodes.unwrap_or(t.nodes);
            t.devices_per_node = o.devices_per_node.unwrap_or(t.devices_per_node);
            t.strategy = o.strategy.unwrap_or(t.strategy);
            t.parameter_servers = o.parameter_servers.unwrap_or(t.parameter_servers);
            t.interconnect = o.interconnect.unwrap_or(t.interconnect);
            t.mesh = topology.mesh_with(
                o.tensor_parallel.unwrap_or(topology.tensor_parallel),
                o.pipeline_parallel.unwrap_or(topology.pipeline_parallel),
            );
            t.mesh.expert_parallel = o.expert_parallel.unwrap_or(topology.expert_parallel).max(1);
            t
        })
        .collect()
}

/// The precisions a spec runs, with where each is written.
pub fn effective_precisions(training: &TrainingSpec, sweep: &SweepSpec) -> Vec<(Precision, FieldPath)> {
    if sweep.precisions.is_empty() {
        vec![(training.precision, FieldPath::keys(&["training", "precision"]))]
    } else {
        let list = FieldPath::keys(&["sweep", "precisions"]);
        sweep.precisions.iter().enumerate().map(|(i, p)| (*p, list.index(i))).collect()
    }
}

/// `bucket_mb` is read by all-reduce, ZeRO-1 and ZeRO-2, `overlap` by those and ZeRO-3: each is refused when no
/// topology of the spec reads it (a sweep may keep a single-worker reference beside the data-parallel ones).
fn check_exchange_knobs(out: &mut Vec<Finding>, topology: &TopologySpec, sweep: &SweepSpec) {
    let strategies: Vec<Strategy> = effective_topologies(topology, sweep).iter().map(|t| t.strategy).collect();
    let bucketed = |s: &Strategy| matches!(s, Strategy::AllReduce | Strategy::Zero1 | Strategy::Zero2);
    let sharded3 = |s: &Strategy| matches!(s, Strategy::Zero3 | Strategy::Fsdp);
    if let Some(mb) = topology.bucket_mb.filter(|mb| !(mb.is_finite() && mb * 1024.0 * 1024.0 >= 4.0)) {
        if strategies.iter().any(bucketed) {
            out.push(
                Finding::new(
                    FieldPath::keys(&["topology", "bucket_mb"]),
                    format!("`bucket_mb = {mb}` holds no gradient"),
                )
                .expected("at least one f32 (4 bytes, about 0.000004 MiB)")
                .hint("leave it out for 25 MiB"),
            );
        }
    }
    let mut names: Vec<&str> = strategies.iter().map(|s| s.name()).collect();
    names.dedup();
    let knobs = [
        (
            "bucket_mb",
            topology.bucket_mb.is_some(),
            strategies.iter().any(bucketed),
            "`all-reduce`, `zero-1` and `zero-2`",
        ),
        (
            "overlap",
            topology.overlap.is_some(),
            strategies.iter().any(|s| bucketed(s) || sharded3(s)),
            "`all-reduce`, `zero-1`, `zero-2` and `zero-3`",
        ),
    ];
    for (key, set, read, readers) in knobs {
        if set && topology.backend == BackendChoice::Mock {
            out.push(
                Finding::new(
                    FieldPath::keys(&["topology", key]),
                    format!(
                        "`{key}` is not simulated by the mock backend, which prices the exchange as whole ring \
                         passes after the backward pass"
                    ),
                )
                .hint(format!("remove `{key}`, or run on `tch`")),
            );
            continue;
        }
        if set && !read {
            let why = if key == "bucket_mb" && strategies.iter().any(sharded3) {
                " (zero-3 exchanges block by block, one unit per recomputable block)"
            } else {
                ""
            };
            out.push(
                Finding::new(
                    FieldPath::keys(&["topology", key]),
                    format!("`{key}` is read by {readers}, and this spec runs only `{}`{why}", names.join("`, `")),
                )
                .hint(format!("remove `{key}`, or use one of those strategies")),
            );
        }
    }
}

pub(super) fn check_topologies(out: &mut Vec<Finding>, topology: &TopologySpec, sweep: &SweepSpec) {
    check_exchange_knobs(out, topology, sweep);
    let batches = FieldPath::keys(&["sweep", "batch_sizes"]);
    let mut reported: HashSet<(usize, usize)> = HashSet::new();
    for (ti, t) in effective_topologies(topology, sweep).iter().enumerate() {
        let entry = sweep.topologies.get(ti);
        if t.world_size().is_none() {
            out.push(Finding::new(
                t.field("nodes", entry.is_some_and(|e| e.nodes.is_some())),
                "nodes x devices_per_node overflows",
            ));
            continue;
        }
        // The strategy runs along the data-parallel dimension; a mesh that does not divide the world is the
        // mesh rules' finding.
        let Some(dp) = t.data_parallel() else { continue };
        let mut shape = format!("{} node(s) x {} device(s)", t.nodes, t.devices_per_node);
        if t.mesh.splits_model() {
            shape =
                format!("{shape} over tensor {} x pipeline {} ranks", t.mesh.tensor_parallel, t.mesh.pipeline_parallel);
        }
        let world = dp;
        let strategy_path = t.field("strategy", entry.is_some_and(|e| e.strategy.is_some()));
        match t.strategy {
            Strategy::Single if world > 1 => out.push(
                Finding::new(
                    strategy_path.clone(),
                    format!("strategy `single` trains on one device, but `{}` asks for {shape} = {world}", t.path),
                )
                .or_at(t.field("devices_per_node", entry.is_some_and(|e| e.devices_per_node.is_some())))
                .or_at(t.field("nodes", entry.is_some_and(|e| e.nodes.is_some())))
                .or_at(t.path.clone())
                .hint(
                    "use `strategy = \"all-reduce\"`, `\"zero-1\"`..`\"zero-3\"` or `\"parameter-server\"`, or set nodes \
                     and devices_per_node to 1",
                ),
            ),
            s if s.is_sharded() && world == 1 => out.push(
                Finding::new(
                    strategy_path.clone(),
                    format!("strategy `{}` on a single device has nothing to shard (`{}`)", s.name(), t.path),
                )
                .or_at(t.path.clone())
                .hint("use `strategy = \"single\"`, or more devices")
                .warning(),
            ),
            Strategy::AllReduce if world == 1 => out.push(
                Finding::new(
                    strategy_path.clone(),
                    format!("strategy `all-reduce` on a single device has nothing to reduce (`{}`)", t.path),
                )
                .or_at(t.path.clone())
                .hint("use `strategy = \"single\"`, or more devices")
                .warning(),
            ),
            _ => {}
        }
        if t.strategy != Strategy::ParameterServer && t.parameter_servers != 1 {
            out.push(
                Finding::new(
                    t.field("parameter_servers", entry.is_some_and(|e| e.parameter_servers.is_some())),
                    format!(
                        "`parameter_servers = {}` is only read with `strategy = \"parameter-server\"`, and `{}` uses `{}`",
                        t.parameter_servers,
                        t.path,
                        t.strategy.name()
                    ),
                )
                .or_at(t.path.clone())
                .hint("set `strategy = \"parameter-server\"`, or remove `parameter_servers`"),
            );
        }
        if t.nodes > 1 && matches!(t.interconnect, Interconnect::Pcie | Interconnect::Nvlink) {
            let name = if t.interconnect == Interconnect::Pcie { "pcie" } else { "nvlink" };
            out.push(
                Finding::new(
                    t.field("interconnect", entry.is_some_and(|e| e.interconnect.is_some())),
                    format!(
                        "interconnect `{name}` links devices inside one machine, but `{}` spans {} nodes",
                        t.path, t.nodes
                    ),
                )
                .or_at(t.path.clone())
                .expected("`ethernet` or `infiniband` between machines")
                .hint("set `interconnect = \"ethernet\"` (or `\"infiniband\"`) for multi-node topologies"),
            );
        }
        if t.strategy == Strategy::Single || world <= 1 {
            continue;
        }
        for (bi, &b) in sweep.batch_sizes.iter().enumerate() {
            if b % world != 0 && reported.insert((b, world)) {
                let lower = (b / world).max(1) * world;
                out.push(
                    Finding::new(
                        batches.index(bi),
                        format!(
                            "batch size {b} is not divisible by the data-parallel world size {world} ({shape} in `{}`)",
                            t.path
                        ),
                    )
                    .expected(format!("a multiple of {world}"))
                    .hint(format!(
                        "the global batch is split evenly over the devices; use e.g. {lower} or {}",
                        lower + world
                    )),
                );
            }
        }
    }
}

/// Check the device selector and its backend; returns where the spec runs (the backend with `auto` resolved,
/// see [`backend_registry::place`]), or `None` when the selector does not parse or an explicit backend does not drive
/// its family. What each backend drives comes from its declared capabilities.
pub(super) fn check_device(out: &mut Vec<Finding>, topology: &TopologySpec) -> Option<Placement> {
    let device_path = FieldPath::keys(&["topology", "device"]);
    let device: DeviceSelector = match topology.device.parse() {
        Ok(d) => d,
        Err(e) => {
            let e: DeviceParseError = e;
            let guess = match topology.device.to_ascii_lowercase().as_str() {
                s if s.starts_with("gpu") || s.starts_with("nvidia") => {
                    Some("did you mean `cuda` (or `cuda:0`)?".to_string())
                }
                s if s.starts_with("vulkan") || s.starts_with("metal") => Some("did you mean `wgpu`?".to_string()),
                s if s.starts_with("cuda") || s.starts_with("wgpu") || s == "cpu" => {
                    Some(format!("selectors are lower case, e.g. `{}`", s))
                }
                _ => None,
            };
            let f = Finding::new(device_path, e.to_string()).expected(SELECTOR_FORMS);
            out.push(match guess {
                Some(h) => f.hint(h),
                None => f,
            });
            return None;
        }
    };
    let placement = backend_registry::place(topology.backend, device);
    let caps = placement.backend.capabilities();
    let family = device.family();
    if topology.backend != BackendChoice::Auto && !caps.drives(family) {
        let families: Vec<String> = caps.devices.iter().map(|f| format!("`{f}`")).collect();
        let forms: Vec<&str> = caps.devices.iter().map(|f| family_forms(*f)).collect();
        let other = [BackendKind::Tch, BackendKind::Wgpu].into_iter().find(|k| k.capabilities().drives(family));
        let mut hint = match other {
            Some(k) => format!("use `backend = \"{}\"` (or `\"auto\"`) for `{family}` devices", k.name()),
            None => format!("no backend drives `{family}` devices"),
        };
        if family == DeviceFamily::Cpu && caps.drives(DeviceFamily::Wgpu) {
            hint = format!("for wgpu's software (CPU) adapter write `device = \"wgpu:cpu\"`; {hint}");
        }
        out.push(
            Finding::new(
                device_path,
                format!("backend `{}` runs on {} devices, not `{device}`", caps.name, families.join(" and ")),
            )
            .or_at(FieldPath::keys(&["topology", "backend"]))
            .expected(format!("{} with backend `{}`", forms.join(", "), caps.name))
            .hint(hint),
        );
        return None;
    }
    Some(placement)
}

/// The selector forms of a device family, for messages.
fn family_forms(family: DeviceFamily) -> &'static str {
    match family {
        DeviceFamily::Cpu => "`cpu`",
        DeviceFamily::Cuda => "`cuda` or `cuda:N`",
        DeviceFamily::Wgpu => "`wgpu`, `wgpu:N`, `wgpu:discrete`, `wgpu:integrated` or `wgpu:cpu`",
    }
}

/// Check every precision of the sweep against what the placed backend declares for the device's family.
pub(super) fn check_precisions(
    out: &mut Vec<Finding>,
    placement: Placement,
    training: &TrainingSpec,
    sweep: &SweepSpec,
) {
    let device_path = FieldPath::keys(&["topology", "device"]);
    let caps = placement.backend.capabilities();
    let (device, family) = (placement.device, placement.device.family());
    for (precision, path) in effective_precisions(training, sweep) {
        if caps.precisions_on(family).contains(&precision) {
            continue;
        }
        out.push(
            Finding::new(
                path,
                format!(
                    "precision `{}` is not supported by the {} backend on `{device}`",
                    precision.as_str(),
                    caps.name
                ),
            )
            .or_at(device_path.clone())
            .expected(format!("{} with backend `{}` on `{device}`", caps.precision_list(family), caps.name))
            .hint(caps.precision_hint),
        );
    }
}

/// The training settings that act on CUDA runs only, refused for a spec where no run would use them (accepted,
/// they would be ignored): `training.tf32` (CUDA's tensor cores) when written at all; `training.cudnn_benchmark`
/// (cuDNN's autotuning) and `training.loss_scale` (fp16's dynamic loss scaling) when other than the default (the
/// defaults stay accepted everywhere, as every result's resolved spec writes them).
pub(super) fn check_cuda_numerics(
    out: &mut Vec<Finding>,
    placement: Placement,
    training: &TrainingSpec,
    sweep: Option<&SweepSpec>,
) {
    let device = placement.device;
    let cuda = device.family() == DeviceFamily::Cuda;
    if let (Some(tf32), false) = (training.tf32, cuda) {
        out.push(
            Finding::new(
                FieldPath::keys(&["training", "tf32"]),
                format!(
                    "`training.tf32` ({}) applies to CUDA devices only; this spec runs on `{device}`",
                    tf32.label()
                ),
            )
            .or_at(FieldPath::keys(&["topology", "device"]))
            .expected("no `training.tf32`, or a `cuda` device")
            .hint("remove `[training.tf32]`, or run on `cuda` / `cuda:N` (fp32 is IEEE fp32 on the CPU and on wgpu)"),
        );
    }
    if !training.cudnn_benchmark && !cuda {
        out.push(
            Finding::new(
                FieldPath::keys(&["training", "cudnn_benchmark"]),
                format!(
                    "`training.cudnn_benchmark = false` applies to CUDA devices only; this spec runs on `{device}`"
                ),
            )
            .or_at(FieldPath::keys(&["topology", "device"]))
            .expected("no `training.cudnn_benchmark`, or a `cuda` device")
            .hint(
                "remove `training.cudnn_benchmark` (cuDNN autotuning exists on CUDA only), or run on `cuda` / `cuda:N`",
            ),
        );
    }
    let scale = training.loss_scale;
    if scale == trainbench_contract::Numerics::DEFAULT_LOSS_SCALE || !(scale > 0.0 && scale.is_finite()) {
        return;
    }
    let fp16 = match sweep {
        Some(sweep) => effective_precisions(training, sweep).iter().any(|(p, _)| *p == Precision::Fp16),
        None => training.precision == Precision::Fp16,
    };
    if !(cuda && fp16) {
        let why = if cuda { "this spec has no fp16 run".to_string() } else { format!("this spec runs on `{device}`") };
        out.push(
            Finding::new(
                FieldPath::keys(&["training", "loss_scale"]),
                format!("`training.loss_scale = {scale}` applies to fp16 runs on CUDA only; {why}"),
            )
            .expected("no `training.loss_scale`, or an fp16 run on a `cuda` device")
            .hint("remove `training.loss_scale`, or add \"fp16\" to `sweep.precisions` on a `cuda` device"),
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn world_size_rules_cover_every_topology() {
        let topology = TopologySpec { device: "cuda".into(), ..TopologySpec::default() };
        let sweep: SweepSpec = serde_json::from_value(serde_json::json!({
            "batch_sizes": [6, 8],
            "topologies": [{"devices_per_node": 4, "strategy": "all-reduce"}, {"nodes": 2, "strategy": "single"}]
        }))
        .unwrap();
        let mut out = Vec::new();
        check_topologies(&mut out, &topology, &sweep);
        let messages: Vec<&str> = out.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(out.len(), 3, "{messages:?}");
        assert!(messages[0].contains("batch size 6 is not divisible by the data-parallel world size 4"));
        assert!(messages[1].contains("strategy `single`"));
        assert!(messages[2].contains("interconnect `pcie`"));
    }

    #[test]
    fn bucket_mb_and_overlap_are_refused_only_where_no_topology_reads_them() {
        let refused = |strategies: &[&str], knobs: serde_json::Value| {
            let mut topology: TopologySpec = serde_json::from_value(knobs).unwrap();
            topology.devices_per_node = 2;
            let entries: Vec<serde_json::Value> =
                strategies.iter().map(|s| serde_json::json!({"devices_per_node": 2, "strategy": s})).collect();
            let sweep: SweepSpec =
                serde_json::from_value(serde_json::json!({"batch_sizes": [8], "topologies": entries})).unwrap();
            let mut out = Vec::new();
            check_exchange_knobs(&mut out, &topology, &sweep);
            out.iter().map(|f| f.paths[0].to_string()).collect::<Vec<_>>()
        };
        let both = serde_json::json!({"bucket_mb": 4.0, "overlap": false});
        assert!(refused(&["all-reduce"], both.clone()).is_empty());
        assert!(refused(&["zero-2", "parameter-server"], both.clone()).is_empty(), "one reader is enough");
        // ZeRO-3 reads `overlap` (its prefetch), not `bucket_mb` (one unit per block).
        assert_eq!(refused(&["zero-3"], both.clone()), ["topology.bucket_mb"]);
        assert_eq!(refused(&["fsdp"], serde_json::json!({"overlap": true})), Vec::<String>::new());
        assert_eq!(refused(&["parameter-server"], both), ["topology.bucket_mb", "topology.overlap"]);
        assert_eq!(refused(&["zero-1"], serde_json::json!({"bucket_mb": 0.0})), ["topology.bucket_mb"]);
        // The mock backend simulates neither.
        let on_mock = serde_json::json!({"backend": "mock", "bucket_mb": 4.0, "overlap": true});
        assert_eq!(refused(&["all-reduce"], on_mock), ["topology.bucket_mb", "topology.overlap"]);
    }

    #[test]
    fn cuda_numerics_are_refused_only_where_no_run_uses_them() {
        let findings = |device: &str, training: serde_json::Value, precisions: serde_json::Value| {
            let topology = TopologySpec { device: device.into(), ..TopologySpec::default() };
            let placement = check_device(&mut Vec::new(), &topology).unwrap();
            let training: TrainingSpec = serde_json::from_value(training).unwrap();
            let sweep: SweepSpec =
                serde_json::from_value(serde_json::json!({"batch_sizes": [8], "precisions": precisions})).unwrap();
            let mut out = Vec::new();
            check_cuda_numerics(&mut out, placement, &training, Some(&sweep));
            out.iter().map(|f| f.paths[0].to_string()).collect::<Vec<_>>()
        };
        let none = Vec::<String>::new();
        // The defaults, written out as every result's resolved spec writes them, are accepted everywhere.
        let defaults = serde_json::json!({"cudnn_benchmark": true, "loss_scale": 65536.0});
        assert_eq!(findings("cpu", defaults, serde_json::json!(["fp32"])), none);
        // Other values, where no run uses them: refused, naming the field.
        let off = serde_json::json!({"cudnn_benchmark": false, "loss_scale": 1024.0});
        assert_eq!(
            findings("cpu", off.clone(), serde_json::json!(["fp32"])),
            ["training.cudnn_benchmark", "training.loss_scale"]
        );
        assert_eq!(findings("cuda", off.clone(), serde_json::json!(["fp32", "bf16"])), ["training.loss_scale"]);
        // On CUDA with an fp16 run both are used.
        assert_eq!(findings("cuda", off, serde_json::json!(["fp32", "fp16"])), none);
    }
}
