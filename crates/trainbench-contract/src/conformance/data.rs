//! Conformance properties of training on batches a run is given (`RunContext::data`) and of evaluating an
//! evaluation split (`RunContext::eval`, a run with a target): the batches given are the batches trained on,
//! a dataset error fails the run naming the file, and evaluation scores the classifier's predictions.

use crate::backend::{Backend, BackendError, NoProbe, RunContext, RunPlan};
use crate::device::DeviceSelector;
use crate::target::{EvalEvery, TargetMetric, TargetPlan};
use trainbench_data::memory::{constant_label_batches, synthetic_batches};
use trainbench_data::{DataError, EvalSet, HostBatch, MemorySource};
use trainbench_graph::graph::Graph;
use trainbench_graph::init::{HostTensor, SeededRng};
use trainbench_graph::training::OptimizerSpec;

use super::fixture;

fn adam() -> OptimizerSpec {
    OptimizerSpec::Adam { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }
}

fn data_plan(device: DeviceSelector, steps: u64, optimizer: OptimizerSpec) -> RunPlan {
    RunPlan { batch_size: 8, warmup: 0, optimizer, device, ..RunPlan::for_tests("data", steps) }
}

/// Train `graph` on `batches` (cycled) and return the losses.
pub fn train_on(
    backend: &mut dyn Backend,
    plan: &RunPlan,
    graph: &Graph,
    batches: Vec<HostBatch>,
) -> Result<Vec<f64>, BackendError> {
    let mut source = MemorySource::new(batches);
    let mut probe = NoProbe;
    let mut ctx = RunContext { data: Some(&mut source), ..RunContext::new(&mut probe) };
    let out = backend.run_in(plan, graph, &mut ctx)?;
    assert_eq!(out.steps.loss_values().len() as u64, out.steps.seen(), "{}: a loss per measured step", backend.name());
    for p in &out.steps.phases() {
        let sum = p.stall_s + p.copy_s;
        assert!((p.data_s - sum).abs() <= 1e-9 * p.data_s.max(1.0), "{}: data_s {p:?}", backend.name());
    }
    Ok(out.steps.loss_values())
}

/// Train `graph` on `batches` (cycled): the losses, the steps trained (warm-up, measured and free-running) and
/// the batches the run drew from its source.
fn train_counted(
    backend: &mut dyn Backend,
    plan: &RunPlan,
    graph: &Graph,
    batches: Vec<HostBatch>,
) -> (Vec<f64>, u64, u64) {
    let name = backend.name();
    let mut source = MemorySource::new(batches);
    let mut probe = NoProbe;
    let mut ctx = RunContext { data: Some(&mut source), ..RunContext::new(&mut probe) };
    let out = backend.run_in(plan, graph, &mut ctx).unwrap_or_else(|e| panic!("{name}: {e}"));
    let steps = out.warmup_steps.len() + out.steps.seen() + out.free_running.map_or(0, |f| f.steps);
    (out.steps.loss_values(), steps, source.delivered())
}

/// Whether two losses agree within 1e-5 relative (the same batches, the same arithmetic).
fn same_loss(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-5 * a.abs().max(1.0)
}

/// The batches given are the batches trained on, one per step, in order:
/// - the synthetic path's own batches handed through a source give its losses (within 1e-5 relative: a given
///   batch is read as the backend reads its own);
/// - batches it could not have made itself (a separable set, not [`synthetic_batches`]) give another loss from
///   the first step on, and the run draws exactly one batch per step;
/// - two sources that agree on their first two batches and differ from the third give the same first two
///   losses and another third one.
pub fn given_batches_are_trained_on(backend: &mut dyn Backend, device: DeviceSelector) {
    let name = backend.name();
    let graph = fixture("mlp");
    let plan = data_plan(device, 6, OptimizerSpec::default());
    let synthetic = backend.run(&plan, &graph, &mut NoProbe).unwrap_or_else(|e| panic!("{name}: {e}"));
    let synthetic_losses = synthetic.steps.loss_values();
    let own = synthetic_batches(&graph, plan.batch_size, plan.seed, 4);
    let (given, _, _) = train_counted(backend, &plan, &graph, own);
    assert_eq!(given.len(), synthetic_losses.len(), "{name}");
    let agree = synthetic_losses.iter().zip(&given).all(|(a, b)| same_loss(*a, *b));
    assert!(agree, "{name}: its own batches given: {given:?}, synthetic: {:?}", synthetic_losses);

    let foreign = separable_batches(&graph, plan.batch_size, 7, 6);
    let (on_foreign, steps, drawn) = train_counted(backend, &plan, &graph, foreign.clone());
    assert_eq!(drawn, steps, "{name}: one batch drawn per step trained");
    assert!(
        !same_loss(on_foreign[0], synthetic_losses[0]),
        "{name}: the first loss on batches it could not make ({}) is its synthetic one ({}): the given batches \
         were not trained on",
        on_foreign[0],
        synthetic_losses[0]
    );
    let mut mixed = foreign[..2].to_vec();
    mixed.extend(separable_batches(&graph, plan.batch_size, 8, 4));
    let (on_mixed, _, _) = train_counted(backend, &plan, &graph, mixed);
    assert!(
        same_loss(on_mixed[0], on_foreign[0]) && same_loss(on_mixed[1], on_foreign[1]),
        "{name}: the same first two batches must give the same first two losses: {on_mixed:?} vs {on_foreign:?}"
    );
    assert!(
        !same_loss(on_mixed[2], on_foreign[2]),
        "{name}: another third batch must give another third loss: {on_mixed:?} vs {on_foreign:?}"
    );
}

/// A dataset of one class trains the MLP fixture to a near-zero loss (below 0.05 after 40 Adam steps) where the
/// same inputs with random labels stay above 1.0 (40 distinct batches, each seen once: nothing to memorise).
pub fn learns_a_one_class_dataset(backend: &mut dyn Backend, device: DeviceSelector) {
    let name = backend.name();
    let graph = fixture("mlp");
    let plan = data_plan(device, 40, adam());
    let one = train_on(backend, &plan, &graph, constant_label_batches(&graph, 8, plan.seed, 40, 2))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let random = train_on(backend, &plan, &graph, synthetic_batches(&graph, 8, plan.seed, 40))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let (one_last, random_last) = (one[one.len() - 1], random[random.len() - 1]);
    eprintln!("{name}: one class {:.4} -> {one_last:.4}; random labels -> {random_last:.4}", one[0]);
    assert!(one_last < 0.05, "{name}: a one-class dataset ends at loss {one_last}: {one:?}");
    assert!(random_last > 1.0, "{name}: random labels end at loss {random_last}");
}

/// A dataset error met mid-run fails the run with [`BackendError::Data`] naming the file.
pub fn dataset_errors_name_the_file(backend: &mut dyn Backend, device: DeviceSelector) {
    let name = backend.name();
    let graph = fixture("mlp");
    let plan = data_plan(device, 10, adam());
    let err = DataError { file: "shard-3.npy".into(), reason: "truncated: 12 of 80 bytes".into() };
    let mut source = MemorySource::new(synthetic_batches(&graph, 8, plan.seed, 2)).failing_after(3, err);
    let mut probe = NoProbe;
    let mut ctx = RunContext { data: Some(&mut source), ..RunContext::new(&mut probe) };
    match backend.run_in(&plan, &graph, &mut ctx) {
        Err(BackendError::Data(m)) => assert!(m.contains("shard-3.npy"), "{name}: {m}"),
        other => panic!("{name}: a dataset error must fail the run naming the file, got {other:?}"),
    }
}

/// Batches of the MLP fixture (20 inputs, 4 classes) whose class is told by the sign of the first two inputs,
/// each at least 1 away from zero: a trivially separable set.
pub fn separable_batches(graph: &Graph, batch: usize, seed: u64, count: u64) -> Vec<HostBatch> {
    let mut rng = SeededRng::new(seed, "separable");
    let (x, y) = (graph.inputs().next().map(|(i, _)| i), graph.inputs().nth(1).map(|(i, _)| i));
    let (Some(x), Some(y)) = (x, y) else { return Vec::new() };
    let width = graph.nodes[x].shape.numel() as usize;
    (0..count)
        .map(|_| {
            let mut xs = Vec::with_capacity(batch * width);
            let mut ys = Vec::with_capacity(batch);
            for _ in 0..batch {
                let class = rng.below(4) as i64;
                let mut row: Vec<f32> = (0..width).map(|_| rng.normal() * 0.1).collect();
                row[0] = if class & 1 == 1 { 1.5 } else { -1.5 };
                row[1] = if class & 2 == 2 { 1.5 } else { -1.5 };
                xs.extend(row);
                ys.push(class);
            }
            HostBatch { inputs: vec![(x, HostTensor::Dense(xs)), (y, HostTensor::Ids(ys))] }
        })
        .collect()
}

/// Evaluation scores the classifier: the MLP fixture trained on a trivially separable set with an accuracy
/// target of 1.0 on a held-out set of the same kind (37 samples in batches of 16, 16 and 5) reaches it within
/// 300 steps, records the curve (accuracy never above 1, the last point at 1.0) and stops there.
pub fn evaluation_reaches_full_accuracy(backend: &mut dyn Backend, device: DeviceSelector) {
    let name = backend.name();
    let graph = fixture("mlp");
    let target = TargetPlan {
        metric: TargetMetric::Accuracy,
        value: 1.0,
        every: EvalEvery::Steps(10),
        max_epochs: None,
        max_steps: Some(300),
        max_seconds: None,
    };
    let plan = RunPlan { target: Some(target), ..data_plan(device, 1, adam()) };
    let mut eval_batches = separable_batches(&graph, 16, 99, 2);
    eval_batches.extend(separable_batches(&graph, 5, 98, 1));
    let eval = EvalSet { batches: eval_batches, origin: "memory".into() };
    let mut source = MemorySource::new(separable_batches(&graph, 8, 1, 16));
    let mut probe = NoProbe;
    let mut ctx = RunContext { data: Some(&mut source), eval: Some(&eval), ..RunContext::new(&mut probe) };
    let out = backend.run_in(&plan, &graph, &mut ctx).unwrap_or_else(|e| panic!("{name}: {e}"));
    let t = out.target.unwrap_or_else(|| panic!("{name}: a run with a target records its outcome"));
    eprintln!("{name}: {:?}", t.curve.iter().map(|p| (p.step, p.accuracy)).collect::<Vec<_>>());
    assert!(t.reached, "{name}: accuracy 1.0 not reached: {:?}", t.curve);
    assert_eq!(t.eval_samples, 37, "{name}: every eval sample, the smaller last batch included");
    let last = t.curve.last().and_then(|p| p.accuracy);
    assert_eq!(last, Some(1.0), "{name}");
    assert!(t.curve.iter().all(|p| p.accuracy.is_some_and(|a| (0.0..=1.0).contains(&a)) && p.loss.is_finite()));
    assert_eq!(t.steps_to_target, Some(out.steps.seen()), "{name}: the run stops at the target");
    assert!(t.time_to_target_s.is_some_and(|s| s > 0.0) && t.eval_s > 0.0 || name == "mock", "{name}: {t:?}");
}
