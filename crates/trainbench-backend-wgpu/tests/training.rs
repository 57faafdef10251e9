//! Training on a real wgpu adapter (lavapipe in CI): losses fall, parameter counts match the contract, the
//! measurements are complete, and what the backend cannot run is refused up front.

use trainbench_backend_wgpu::{WgpuBackend, adapters, select};
use trainbench_contract::conformance::agreement::preset_for;
use trainbench_contract::conformance::{fixtures, prerequisite_missing};
use trainbench_contract::{Backend, BackendError, DeviceSelector, NoProbe, PhaseTimes, Probe, RunPlan, WgpuAdapter};
use trainbench_graph::params::parameters;
use trainbench_graph::{Graph, GraphBuilder, OptimizerSpec, Precision};

// The shared conformance kit on the best adapter (lavapipe in CI): losses fall, weights match the contract,
// same initial weights and 5 SGD steps as PyTorch within the preset for the adapter's kind, refusals.
trainbench_contract::conformance_tests!(
    backend = WgpuBackend::new(),
    device = DeviceSelector::Wgpu(WgpuAdapter::Default),
    preset = preset_for(select(DeviceSelector::Wgpu(WgpuAdapter::Default)).map(|a| a.kind()).unwrap_or("gpu")),
    available = !adapters().is_empty(),
);

/// Whether wgpu sees an adapter; a failure under `CI=true` (which installs lavapipe) when it sees none.
fn have_adapter() -> bool {
    if adapters().is_empty() {
        prerequisite_missing("wgpu found no adapter (install mesa-vulkan-drivers for lavapipe)");
        return false;
    }
    true
}

fn plan(batch: usize, iterations: u64, optimizer: OptimizerSpec) -> RunPlan {
    RunPlan {
        batch_size: batch,
        device: DeviceSelector::Wgpu(WgpuAdapter::Default),
        warmup: 0,
        seed: 3,
        optimizer,
        ..RunPlan::for_tests("test", iterations)
    }
}

fn fixture(name: &str) -> Graph {
    fixtures::build(name).expect("known fixture").expect("fixture builds")
}

/// Train a fixture at batch 8 and return the losses of every iteration.
fn train(name: &str, optimizer: OptimizerSpec, iterations: u64) -> Vec<f64> {
    let graph = fixture(name);
    let mut p = plan(8, iterations, optimizer);
    p.id = name.into();
    let out = WgpuBackend::new().run(&p, &graph, &mut NoProbe).expect("run succeeds");
    assert_eq!(out.steps.loss_values().len() as u64, iterations);
    assert!(out.steps.loss_values().iter().all(|l| l.is_finite()), "{name}: {:?}", out.steps.loss_values());
    out.steps.loss_values()
}

/// The pool cycles 4 batches, so compare the loss on batch 0 at the start with its loss on a later pass: it
/// must have fallen to below `factor` of where it started.
fn assert_falls(name: &str, losses: &[f64], factor: f64) {
    let first = losses[0];
    let later = losses[(losses.len() - 1) / 4 * 4];
    eprintln!("{name}: {first:.4} -> {later:.4}");
    assert!(later < first * factor, "{name}: loss did not fall below {factor} x start: {losses:?}");
}

#[test]
fn mlp_loss_falls_with_each_optimizer() {
    if !have_adapter() {
        return;
    }
    for opt in [
        OptimizerSpec::Sgd { lr: 0.1, momentum: 0.9, weight_decay: 1e-4, nesterov: true },
        OptimizerSpec::Adam { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 },
        OptimizerSpec::Adamw { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01 },
    ] {
        let losses = train("mlp", opt.clone(), 24);
        assert_falls(&format!("mlp/{}", opt.kind_name()), &losses, 0.9);
    }
}

#[derive(Default)]
struct Recorder {
    calls: Vec<(u64, bool, PhaseTimes)>,
    stop_after: Option<usize>,
}

impl Probe for Recorder {
    fn step(&mut self, index: u64, measured: bool, phases: &PhaseTimes) {
        self.calls.push((index, measured, *phases));
    }
    fn should_stop(&self) -> bool {
        self.stop_after.is_some_and(|n| self.calls.len() >= n)
    }
}

#[test]
fn measurements_are_complete_and_probe_can_stop() {
    if !have_adapter() {
        return;
    }
    let graph = fixture("cnn");
    let mut p = plan(4, 3, OptimizerSpec::default());
    p.warmup = 2;
    let mut rec = Recorder::default();
    let started = std::time::Instant::now();
    let out = WgpuBackend::new().run(&p, &graph, &mut rec).expect("run");
    let wall = started.elapsed().as_secs_f64();
    assert_eq!(out.warmup_steps.len(), 2);
    assert_eq!(out.steps.seen(), 3);
    assert_eq!(
        rec.calls.iter().map(|c| (c.0, c.1)).collect::<Vec<_>>(),
        vec![(0, false), (1, false), (2, true), (3, true), (4, true)]
    );
    // The probe saw each step's own figures, warm-up first.
    // (Two warm-up steps: the log's first and last are both of them.)
    let warm = &out.warmup_steps;
    let mut reported: Vec<PhaseTimes> = warm.first.into_iter().chain(warm.last).collect();
    reported.extend(out.steps.phases());
    assert_eq!(rec.calls.iter().map(|c| c.2).collect::<Vec<_>>(), reported);
    for s in &reported {
        assert!(s.forward_s > 0.0 && s.backward_s > 0.0 && s.optimizer_s > 0.0, "{s:?}");
        // Synthetic data: no wait for a batch, the upload is the copy.
        assert!(s.stall_s == 0.0 && s.copy_s > 0.0 && s.data_s == s.copy_s, "{s:?}");
    }
    // Each step's total is its own duration, not the time since the run (or the first step) began: the steps
    // follow one another inside the run, so their totals add up to no more than the run's wall time.
    let summed: f64 = reported.iter().map(|s| s.total_s).sum();
    assert!(summed <= wall, "steps total {summed} s in a run of {wall} s: {reported:?}");
    let params: u64 = graph.nodes.iter().flat_map(parameters).map(|d| d.numel()).sum();
    assert_eq!(out.memory.gradients, params * 4);
    assert_eq!(out.memory.optimizer_state, params * 4, "SGD with momentum keeps one buffer");
    assert!(out.memory.weights > out.memory.gradients, "batch-norm running statistics count as weights");
    let peak = out.memory.peak_allocated.expect("burn reports pool usage");
    assert!(peak >= out.memory.weights, "peak {peak} below the weights alone");
    assert!(out.memory.reserved.expect("reserved") >= peak);
    for key in ["burn", "wgpu", "graphics_api", "adapter_driver"] {
        assert!(out.versions.contains_key(key), "missing version {key}: {:?}", out.versions);
    }
    let dev = out.device.expect("device info");
    assert!(dev.selector.starts_with("wgpu:") && !dev.name.is_empty());

    let mut rec = Recorder { stop_after: Some(2), ..Recorder::default() };
    let mut p = plan(4, 50, OptimizerSpec::default());
    p.phase_timing = false;
    let out = WgpuBackend::new().run(&p, &graph, &mut rec).expect("run");
    assert!(out.interrupted);
    assert_eq!(out.steps.seen(), 2);
}

/// The refusal of `check`, which `supports` (plan time, no device) must give as well.
fn refusal(plan: &RunPlan, graph: &Graph) -> String {
    let backend = WgpuBackend::new();
    match backend.check(plan, graph) {
        Err(e @ BackendError::Unsupported { .. }) => {
            assert_eq!(backend.supports(plan, graph), Err(e.clone()), "supports() must refuse it too");
            e.to_string()
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn refuses_what_it_cannot_run() {
    let graph = fixture("mlp");
    let mut p = plan(8, 1, OptimizerSpec::default());
    p.precision = Precision::Fp16;
    let msg = refusal(&p, &graph);
    assert!(msg.contains("wgpu") && msg.contains("fp16"), "{msg}");
    p.precision = Precision::Bf16;
    assert!(refusal(&p, &graph).contains("bf16"));
    // Data parallelism is refused per run (`check`), not at plan time: a sweep may mix topologies.
    let mut p = plan(8, 1, OptimizerSpec::default());
    p.topology.devices_per_node = 2;
    assert_eq!(WgpuBackend::new().supports(&p, &graph), Ok(()));
    assert!(matches!(WgpuBackend::new().check(&p, &graph), Err(BackendError::Unsupported { .. })));

    let mut b = GraphBuilder::new("det");
    let x = b.input("img", &[8, 12, 12], trainbench_graph::graph::InputKind::Dense).expect("input");
    let r = b.roi_align("head.roi", x, 4, [2, 2], 1.0).expect("roi");
    let f = b.flatten("flat", r).expect("flat");
    let t = b.input("t", &[128], trainbench_graph::graph::InputKind::Dense).expect("target");
    b.loss("loss", trainbench_graph::graph::LossKind::Mse, &[f, t]).expect("loss");
    let g = b.finish(1, "samples").expect("graph");
    let msg = refusal(&plan(2, 1, OptimizerSpec::default()), &g);
    assert!(msg.contains("head.roi") && msg.contains("roi_align") && msg.contains("wgpu"), "{msg}");

    // WGAN-GP: the critic batch (real, fake, interpolates) feeds a gradient penalty.
    let mut b = GraphBuilder::new("gan");
    let real = b.input("real", &[4], trainbench_graph::graph::InputKind::Dense).expect("input");
    let fake = b.input("fake", &[4], trainbench_graph::graph::InputKind::Dense).expect("input");
    let batch = b.critic_batch("critic.batch", real, fake).expect("critic batch");
    let scores = b.linear("critic.fc", batch, 1, true).expect("linear");
    let loss = trainbench_graph::graph::LossKind::Wasserstein { gp_weight: 10.0 };
    b.loss("wloss", loss, &[scores, batch]).expect("loss");
    let g = b.finish(1, "samples").expect("graph");
    let msg = refusal(&plan(2, 1, OptimizerSpec::default()), &g);
    assert!(msg.contains("critic.batch") && msg.contains("second-order"), "{msg}");
}

#[test]
fn devices_and_selectors() {
    if !have_adapter() {
        return;
    }
    let be = WgpuBackend::new();
    let devices = be.devices();
    assert_eq!(devices.len(), adapters().len());
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(d.selector, format!("wgpu:{i}"));
        for key in ["api", "vendor", "driver", "device_type", "max_buffer_size"] {
            assert!(d.details.contains_key(key), "{key} missing from {d:?}");
        }
    }
    let graph = fixture("mlp");
    let mut p = plan(2, 1, OptimizerSpec::default());
    for ok in ["wgpu", "wgpu:0"] {
        p.device = ok.parse().expect("selector");
        assert!(be.check(&p, &graph).is_ok(), "{ok}");
    }
    p.device = DeviceSelector::Wgpu(WgpuAdapter::Index(devices.len()));
    let e = be.check(&p, &graph).expect_err("must fail");
    assert!(matches!(e, BackendError::Device { .. }) && e.to_string().contains("available"), "{e}");
    p.device = DeviceSelector::Cpu;
    assert!(be.check(&p, &graph).expect_err("must fail").to_string().contains("does not drive cpu devices"));
}
