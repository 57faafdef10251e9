//! The rules over a [`PartialSpec`]: each table's own checks and the checks across tables, then the model's
//! graph against the spec ([`check_graph`]); the rules of one concern are in the sibling files.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde_json::Value;
use trainbench_contract::DeviceSelector;
use trainbench_graph::graph::{Graph, InputKind, Op};
use trainbench_graph::{ModelSpec, OptimizerSpec};

use super::finding::Finding;
use super::topology::{self, effective_topologies};
use super::{expert, float8, mesh, mlperf, schedule, target};
use crate::spec::path::FieldPath;
use crate::spec::wire::{
    DataSource, DatasetSpec, MetricGroup, MetricsSpec, MlperfSpec, RunSpec, SpecFile, SweepSpec, TopologySpec,
    TrainingSpec,
};

/// The spec's top-level fields that passed the schema (absent tables take their defaults); `None` where the
/// schema found a problem (or a required field is missing).
#[derive(Debug, Clone, Default)]
pub struct PartialSpec {
    /// `version`.
    pub version: Option<u32>,
    /// `name`.
    pub name: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `tags`.
    pub tags: Option<Vec<String>>,
    /// `[model]`.
    pub model: Option<ModelSpec>,
    /// `[dataset]`.
    pub dataset: Option<DatasetSpec>,
    /// `[training]`.
    pub training: Option<TrainingSpec>,
    /// `[sweep]`.
    pub sweep: Option<SweepSpec>,
    /// `[topology]`.
    pub topology: Option<TopologySpec>,
    /// `[run]`.
    pub run: Option<RunSpec>,
    /// `[metrics]`.
    pub metrics: Option<MetricsSpec>,
    /// `[mlperf]` (`Some(None)` when the spec has none).
    pub mlperf: Option<Option<MlperfSpec>>,
}

impl PartialSpec {
    /// Deserialize each top-level field of `doc` on its own, skipping those `broken` says have errors.
    pub fn from_json(doc: &Value, broken: impl Fn(&str) -> bool) -> Self {
        fn field<T: DeserializeOwned + Default>(
            doc: &Value,
            key: &str,
            broken: &dyn Fn(&str) -> bool,
            required: bool,
        ) -> Option<T> {
            if broken(key) {
                return None;
            }
            match doc.get(key) {
                Some(v) => serde_json::from_value(v.clone()).ok(),
                None if required => None,
                None => Some(T::default()),
            }
        }
        fn model(doc: &Value, broken: &dyn Fn(&str) -> bool) -> Option<ModelSpec> {
            if broken("model") {
                return None;
            }
            serde_json::from_value(doc.get("model")?.clone()).ok()
        }
        let b: &dyn Fn(&str) -> bool = &broken;
        Self {
            version: field(doc, "version", b, true),
            name: field(doc, "name", b, true),
            description: field(doc, "description", b, false),
            tags: field(doc, "tags", b, false),
            model: model(doc, b),
            dataset: field(doc, "dataset", b, false),
            training: field(doc, "training", b, false),
            sweep: field(doc, "sweep", b, false),
            topology: field(doc, "topology", b, false),
            run: field(doc, "run", b, false),
            metrics: field(doc, "metrics", b, false),
            mlperf: field(doc, "mlperf", b, false),
        }
    }

    /// The whole spec, when every field is present.
    pub fn complete(self) -> Option<SpecFile> {
        Some(SpecFile {
            version: self.version?,
            name: self.name?,
            description: self.description?,
            tags: self.tags?,
            model: self.model?,
            dataset: self.dataset?,
            training: self.training?,
            sweep: self.sweep?,
            topology: self.topology?,
            run: self.run?,
            metrics: self.metrics?,
            mlperf: self.mlperf?,
        })
    }
}

/// What rules may ask about the document besides its typed content.
pub struct RuleContext<'a> {
    /// Folder of the spec file (local dataset paths are relative to it); `None` when not read from a file.
    pub base_dir: Option<&'a Path>,
    /// Whether a path is written in the spec (or set by an override), as opposed to defaulted.
    pub written: &'a dyn Fn(&FieldPath) -> bool,
}

/// Check every rule that the present parts of the spec allow.
pub fn check(spec: &PartialSpec, cx: &RuleContext<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(v) = spec.version.filter(|&v| v != 1) {
        out.push(
            Finding::new(FieldPath::keys(&["version"]), format!("unsupported spec version {v}"))
                .expected("1")
                .hint("this trainbench reads spec version 1"),
        );
    }
    if let Some(tags) = &spec.tags {
        duplicates(&mut out, &FieldPath::keys(&["tags"]), tags, |t| format!("`{t}`"));
    }
    if let Some(sweep) = &spec.sweep {
        check_sweep(&mut out, sweep);
    }
    if let (Some(topology), Some(sweep)) = (&spec.topology, &spec.sweep) {
        topology::check_topologies(&mut out, topology, sweep);
        mesh::check_mesh(&mut out, topology, sweep, spec.model.as_ref());
        expert::check_expert_parallel(&mut out, topology, sweep, spec.model.as_ref());
    }
    let placement = spec.topology.as_ref().and_then(|t| topology::check_device(&mut out, t));
    if let (Some(placement), Some(training), Some(sweep)) = (placement, &spec.training, &spec.sweep) {
        topology::check_precisions(&mut out, placement, training, sweep);
    }
    if let (Some(placement), Some(training)) = (placement, &spec.training) {
        topology::check_cuda_numerics(&mut out, placement, training, spec.sweep.as_ref());
    }
    if let Some(training) = &spec.training {
        check_training(&mut out, training, spec.run.as_ref());
        schedule::check_schedule(&mut out, training);
        float8::check_float8(&mut out, training, spec.sweep.as_ref());
        target::check_target(&mut out, training, spec.dataset.as_ref());
    }
    if let (Some(training), Some(topology), Some(sweep)) = (&spec.training, &spec.topology, &spec.sweep) {
        target::check_target_world(&mut out, training, &effective_topologies(topology, sweep));
    }
    if let Some(run) = &spec.run {
        check_run(&mut out, run, cx);
    }
    if let Some(dataset) = &spec.dataset {
        check_dataset(&mut out, dataset, spec.model.as_ref(), cx);
    }
    if let (Some(metrics), Some(topology)) = (&spec.metrics, &spec.topology) {
        check_metrics(&mut out, metrics, topology);
    }
    if let Some(Some(mlperf)) = &spec.mlperf {
        mlperf::check_mlperf(&mut out, mlperf, spec.training.as_ref(), spec.model.as_ref());
    }
    out
}

fn duplicates<T: PartialEq>(out: &mut Vec<Finding>, list: &FieldPath, items: &[T], show: impl Fn(&T) -> String) {
    for (i, item) in items.iter().enumerate() {
        if let Some(first) = items[..i].iter().position(|x| x == item) {
            out.push(
                Finding::new(
                    list.index(i),
                    format!("{} appears twice in `{list}` (items {first} and {i})", show(item)),
                )
                .hint("remove the duplicate; each value is run once per repeat"),
            );
        }
    }
}

fn check_sweep(out: &mut Vec<Finding>, sweep: &SweepSpec) {
    duplicates(out, &FieldPath::keys(&["sweep", "batch_sizes"]), &sweep.batch_sizes, |b| format!("batch size {b}"));
    duplicates(out, &FieldPath::keys(&["sweep", "precisions"]), &sweep.precisions, |p| {
        format!("precision `{}`", p.as_str())
    });
    duplicates(out, &FieldPath::keys(&["sweep", "topologies"]), &sweep.topologies, |_| "the same topology".to_string());
}

fn check_training(out: &mut Vec<Finding>, training: &TrainingSpec, run: Option<&RunSpec>) {
    let opt = FieldPath::keys(&["training", "optimizer"]);
    let positive = |out: &mut Vec<Finding>, key: &str, v: f64| {
        if !(v > 0.0 && v.is_finite()) {
            out.push(
                Finding::new(opt.key(key), format!("`{}` must be greater than 0, found {v}", opt.key(key)))
                    .expected("a positive number"),
            );
        }
    };
    let unit = |out: &mut Vec<Finding>, key: &str, v: f64| {
        if !(0.0..1.0).contains(&v) {
            out.push(
                Finding::new(opt.key(key), format!("`{}` must lie in [0, 1), found {v}", opt.key(key)))
                    .expected("0 <= value < 1")
                    .hint("decay rates such as 0.9 or 0.999 keep a running average; 1 or more makes it diverge"),
            );
        }
    };
    let non_negative = |out: &mut Vec<Finding>, key: &str, v: f64| {
        if !(v >= 0.0 && v.is_finite()) {
            out.push(
                Finding::new(opt.key(key), format!("`{}` must be 0 or more, found {v}", opt.key(key)))
                    .expected("a number >= 0"),
            );
        }
    };
    match &training.optimizer {
        OptimizerSpec::Sgd { lr, momentum, weight_decay, nesterov } => {
            positive(out, "lr", *lr);
            unit(out, "momentum", *momentum);
            non_negative(out, "weight_decay", *weight_decay);
            if *nesterov && *momentum <= 0.0 {
                out.push(
                    Finding::new(opt.key("nesterov"), "Nesterov momentum needs `momentum` greater than 0")
                        .or_at(opt.key("momentum"))
                        .hint("set e.g. `momentum = 0.9`, or `nesterov = false`"),
                );
            }
        }
        OptimizerSpec::Adam { lr, beta1, beta2, eps, weight_decay }
        | OptimizerSpec::Adamw { lr, beta1, beta2, eps, weight_decay } => {
            positive(out, "lr", *lr);
            unit(out, "beta1", *beta1);
            unit(out, "beta2", *beta2);
            positive(out, "eps", *eps);
            non_negative(out, "weight_decay", *weight_decay);
        }
    }
    if !(training.loss_scale > 0.0 && training.loss_scale.is_finite()) {
        out.push(Finding::new(
            FieldPath::keys(&["training", "loss_scale"]),
            format!("`training.loss_scale` must be greater than 0, found {}", training.loss_scale),
        ));
    }
    if let Some(run) = run {
        let last_repeat = u64::from(run.repeats.saturating_sub(1));
        if training.seed.checked_add(last_repeat).is_none_or(|s| s > i64::MAX as u64) {
            out.push(
                Finding::new(
                    FieldPath::keys(&["training", "seed"]),
                    format!("seed {} + repeat {last_repeat} overflows", training.seed),
                )
                .hint("repeats use seed + repeat index; use a smaller seed"),
            );
        }
    }
}

fn check_run(out: &mut Vec<Finding>, run: &RunSpec, cx: &RuleContext<'_>) {
    let path = |k: &str| FieldPath::keys(&["run", k]);
    let seconds = |out: &mut Vec<Finding>, key: &str, v: Option<f64>| {
        if let Some(v) = v.filter(|v| !(*v > 0.0 && v.is_finite())) {
            out.push(
                Finding::new(path(key), format!("`run.{key}` must be a positive number of seconds, found {v}"))
                    .expected("a number > 0"),
            );
        }
    };
    seconds(out, "time_budget_s", run.time_budget_s);
    seconds(out, "timeout_s", run.timeout_s);
    match run.time_budget_s {
        None if run.warmup >= run.iterations => out.push(
            Finding::new(path("warmup"), format!("warm-up ({} iterations) must be shorter than the run ({} measured iterations)", run.warmup, run.iterations))
                .or_at(path("iterations"))
                .expected(format!("`run.warmup` < {}", run.iterations))
                .hint("lower `run.warmup` or raise `run.iterations` (with --set, set both: `--set run.warmup=2 --set run.iterations=5`)"),
        ),
        Some(budget) => {
            if (cx.written)(&path("iterations")) {
                out.push(
                    Finding::new(path("iterations"), "`run.iterations` is ignored when `run.time_budget_s` is set")
                        .or_at(path("time_budget_s"))
                        .hint("remove one of the two")
                        .warning(),
                );
            }
            if let Some(timeout) = run.timeout_s.filter(|t| *t <= budget && budget > 0.0) {
                out.push(
                    Finding::new(path("timeout_s"), format!("`run.timeout_s` ({timeout} s) is not longer than `run.time_budget_s` ({budget} s): every run would time out"))
                        .hint("raise `run.timeout_s` above the time budget plus warm-up"),
                );
            }
        }
        None => {}
    }
}

fn check_dataset(out: &mut Vec<Finding>, dataset: &DatasetSpec, model: Option<&ModelSpec>, cx: &RuleContext<'_>) {
    let path = |k: &str| FieldPath::keys(&["dataset", k]);
    match dataset.source {
        DataSource::Local => {
            for (key, present) in [("path", dataset.path.is_some()), ("format", dataset.format.is_some())] {
                if !present {
                    out.push(
                        Finding::new(path(key), format!("`source = \"local\"` needs `dataset.{key}`"))
                            .expected(if key == "path" { "a path relative to the spec file" } else { "`npy`, `raw-f32`, `cifar10` or `image-folder`" })
                            .hint("trainbench never downloads data: point `path` at files on disk and name their `format`"),
                    );
                }
            }
            if dataset.samples.is_some() {
                out.push(
                    Finding::new(
                        path("samples"),
                        "`dataset.samples` sizes synthetic data; a local dataset holds what its files hold",
                    )
                    .or_at(path("source"))
                    .hint("remove `samples`, or write a smaller dataset"),
                );
            }
            match (dataset.workers.unwrap_or(0), dataset.prefetch) {
                (0, Some(_)) => out.push(
                    Finding::new(path("prefetch"), "`dataset.prefetch` needs reading threads: `dataset.workers` is 0")
                        .or_at(path("workers"))
                        .hint("set `workers` to 1 or more, or remove `prefetch`"),
                ),
                (w, Some(p)) if p < w => out.push(
                    Finding::new(
                        path("prefetch"),
                        format!(
                            "`dataset.prefetch` ({p}) is below `dataset.workers` ({w}): {} threads would always wait",
                            w - p
                        ),
                    )
                    .expected(format!("at least {w}"))
                    .hint("raise `prefetch` (default: twice `workers`) or lower `workers`"),
                ),
                _ => {}
            }
            if let (Some(p), Some(base)) = (&dataset.path, cx.base_dir) {
                if !base.join(p).exists() {
                    out.push(
                        Finding::new(
                            path("path"),
                            format!("dataset path `{p}` does not exist (relative to the spec's folder)"),
                        )
                        .hint("paths are resolved relative to the folder holding the spec file"),
                    );
                }
            }
        }
        DataSource::Clicks => super::clicks::check_clicks(out, dataset),
        DataSource::Synthetic => {
            let keys = [
                ("path", dataset.path.is_some()),
                ("format", dataset.format.is_some()),
                ("workers", dataset.workers.is_some()),
                ("prefetch", dataset.prefetch.is_some()),
                ("on_error", dataset.on_error.is_some()),
            ];
            let hint = "set `source = \"local\"` to read files, or remove the key";
            super::dataset::refuse_local_only_keys(out, &keys, "synthetic", hint);
        }
    }
    if let (Some(ModelSpec::Custom(custom)), Some(shape)) = (model, &dataset.input_shape) {
        if *shape != custom.input {
            out.push(
                Finding::new(
                    path("input_shape"),
                    format!(
                        "dataset input shape {} does not match the model's input {}",
                        dims(shape),
                        dims(&custom.input)
                    ),
                )
                .or_at(FieldPath::keys(&["model", "input"]))
                .expected(dims(&custom.input))
                .hint("`model.input` declares what the first layer receives; make the two agree"),
            );
        }
    }
}

fn check_metrics(out: &mut Vec<Finding>, metrics: &MetricsSpec, topology: &TopologySpec) {
    let list = FieldPath::keys(&["metrics", "collect"]);
    duplicates(out, &list, &metrics.collect, |m| {
        format!("`{}`", serde_json::to_value(m).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default())
    });
    let on_cpu = matches!(topology.device.parse::<DeviceSelector>(), Ok(DeviceSelector::Cpu));
    for (i, m) in metrics.collect.iter().enumerate() {
        if on_cpu && matches!(m, MetricGroup::GpuUtilization | MetricGroup::PowerEnergy) {
            out.push(
                Finding::new(
                    list.index(i),
                    "GPU utilisation and power come from NVML; on a `cpu` device they stay empty",
                )
                .hint("drop it from `metrics.collect`, or run on a `cuda` device")
                .warning(),
            );
        }
    }
}

/// Rules that need the model's graph: the dataset's declared shape and classes against the graph's inputs, an
/// accuracy target against the graph's losses.
/// (A custom model's input shape is checked without the graph, in [`check`].)
pub fn check_graph(
    dataset: &DatasetSpec,
    model: &ModelSpec,
    training: Option<&TrainingSpec>,
    graph: &Graph,
) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(training) = training {
        target::check_target_graph(&mut out, training, graph);
        schedule::check_schedule_graph(&mut out, training, graph);
    }
    let dataset = &DatasetSpec {
        input_shape: if matches!(model, ModelSpec::Custom(_)) { None } else { dataset.input_shape.clone() },
        ..dataset.clone()
    };
    let data_input =
        graph.inputs().find(|(_, n)| matches!(n.op, Op::Input { kind: InputKind::Dense | InputKind::Tokens { .. } }));
    if let (Some(shape), Some((_, node))) = (&dataset.input_shape, data_input) {
        if *shape != node.shape.0 {
            out.push(
                Finding::new(FieldPath::keys(&["dataset", "input_shape"]), format!("dataset input shape {} does not match the model's input `{}` {}", dims(shape), node.name, node.shape))
                    .expected(node.shape.to_string())
                    .hint("the shape follows from the model's hyper-parameters (e.g. `image_size`); remove `input_shape` or make it agree"),
            );
        }
    }
    let labels = graph.inputs().find_map(|(_, n)| match n.op.input_kind() {
        Some(InputKind::Labels { classes }) => Some((n.name.clone(), *classes)),
        Some(InputKind::Dense | InputKind::Tokens { .. }) | None => None,
    });
    if let (Some(classes), Some((name, model_classes))) = (dataset.classes, labels) {
        if classes != model_classes {
            out.push(
                Finding::new(
                    FieldPath::keys(&["dataset", "classes"]),
                    format!(
                        "dataset classes ({classes}) do not match the model's labels `{name}` ({model_classes} classes)"
                    ),
                )
                .expected(model_classes.to_string())
                .hint("set the number of classes in [model] (e.g. `classes`), and remove or align `dataset.classes`"),
            );
        }
    }
    out
}

fn dims(shape: &[usize]) -> String {
    format!("[{}]", shape.iter().map(usize::to_string).collect::<Vec<_>>().join(", "))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use trainbench_graph::graph::Node;
    use trainbench_graph::model::MlpSpec;

    fn input(name: &str, shape: &[usize], kind: InputKind) -> Node {
        let op = serde_json::to_value(Op::Input { kind }).unwrap();
        let node = serde_json::json!({"name": name, "op": op, "inputs": [], "shape": shape, "part": null});
        serde_json::from_value(node).unwrap()
    }

    fn graph() -> Graph {
        Graph {
            name: "g".into(),
            nodes: vec![
                input("image", &[3, 224, 224], InputKind::Dense),
                input("labels", &[], InputKind::Labels { classes: 1000 }),
            ],
            losses: vec![],
            items_per_sample: 1,
            item_unit: "samples".into(),
            blocks: Vec::new(),
            decoder: None,
            frozen_dtype: Default::default(),
        }
    }

    fn mlp() -> ModelSpec {
        ModelSpec::Mlp(serde_json::from_value::<MlpSpec>(serde_json::json!({})).unwrap())
    }

    #[test]
    fn dataset_shape_and_classes_are_checked_against_the_graph() {
        let ok = DatasetSpec { input_shape: Some(vec![3, 224, 224]), classes: Some(1000), ..DatasetSpec::default() };
        assert!(check_graph(&ok, &mlp(), None, &graph()).is_empty());
        let bad = DatasetSpec { input_shape: Some(vec![3, 32, 32]), classes: Some(10), ..DatasetSpec::default() };
        let findings = check_graph(&bad, &mlp(), None, &graph());
        assert_eq!(findings.len(), 2);
        assert!(findings[0].message.contains("[3, 32, 32]") && findings[0].message.contains("[3, 224, 224]"));
        assert!(findings[1].message.contains("(10)") && findings[1].message.contains("1000"));
    }
}
