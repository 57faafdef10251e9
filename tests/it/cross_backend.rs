//! Cross-backend agreement: six zoo models at tiny sizes, a CNN (ResNet-18), an LSTM model (Seq2Seq with
//! attention), a Transformer, a Llama-style decoder (GQA, rotary, RMSNorm, SwiGLU, tied head), a ViT and a
//! DLRM-DCNv2 (sum-pooled embedding bags), train on tch (CPU) and on wgpu (lavapipe, or the best adapter)
//! from the identical seeded initial weights and synthetic batches. Both backends must allocate the same number
//! of parameters (the static analysis's count), and their losses must agree within named tolerance presets:
//! at step 0 within `strict` for every model, and after each of 5 SGD steps (lr 0.05, momentum 0.9) within the
//! model's preset: `strict` for all but the CNN, `balanced` for the CNN, whose batch norms over
//! 2x2 maps and ReLU / max-pool decisions amplify last-bit differences of the two backends' reductions (on
//! lavapipe: 2e-6 relative after 4 steps, 6e-4 after 5). On a GPU every preset is at least `balanced`.
//! Dropout is 0: the two backends draw different masks.
//!
//! Needs both backends: `cargo test --features tch,wgpu --test it cross_backend:: -- --nocapture`. Without a wgpu
//! adapter it says it skips, except under `CI=true`, where that is an error.
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use serde_json::json;
use trainbench_backend_tch::TchBackend;
use trainbench_backend_wgpu::{WgpuBackend, adapters, select};
use trainbench_contract::conformance::agreement::{AGREEMENT_RUN, Preset, compare, max_relative_error, preset_for};
use trainbench_contract::conformance::prerequisite_missing;
use trainbench_contract::{Backend, NoProbe};
use trainbench_contract::{DeviceSelector, WgpuAdapter};
use trainbench_graph::analysis::analyze;
use trainbench_graph::{Graph, ModelSpec, zoo};

/// The three models, as `[model]` tables of a spec would write them, with the preset their 5 SGD steps meet on a
/// software adapter.
fn models() -> Vec<(&'static str, serde_json::Value, Preset)> {
    vec![
        (
            "resnet18-w4",
            json!({"family": "resnet", "depth": 18, "width": 4, "classes": 10, "image_size": 16, "stem": "cifar"}),
            Preset::Balanced,
        ),
        (
            "seq2seq-lstm-h16",
            json!({"family": "seq2seq", "src_vocab": 50, "tgt_vocab": 40, "hidden": 16, "layers": 1,
                   "seq_len": 6, "dropout": 0.0}),
            Preset::Strict,
        ),
        (
            "transformer-d16",
            json!({"family": "transformer", "vocab": 50, "encoder_layers": 1, "decoder_layers": 1, "d_model": 16,
                   "heads": 2, "ffn": 32, "seq_len": 6, "dropout": 0.0}),
            Preset::Strict,
        ),
        (
            "gpt-d32-gqa",
            json!({"family": "gpt", "layers": 2, "d_model": 32, "heads": 4, "kv_heads": 2, "ffn": 64,
                   "activation": "swiglu", "norm": "rmsnorm", "positions": "rotary", "rope_theta": 10000.0,
                   "vocab": 50, "seq_len": 8, "tied_embeddings": true, "bias": false}),
            Preset::Strict,
        ),
        (
            "vit-p4-h16",
            json!({"family": "vit", "image_size": 8, "patch_size": 4, "layers": 1, "hidden": 16, "heads": 2,
                   "mlp_dim": 32, "classes": 5}),
            Preset::Strict,
        ),
        (
            "dlrm-3-tables",
            json!({"family": "dlrm", "table_rows": [20, 30, 40], "bag_sizes": [3, 1, 2], "embedding_dim": 8,
                   "dense_features": 4, "bottom_mlp": [16, 8], "top_mlp": [16, 1], "cross_layers": 1,
                   "cross_rank": 4}),
            Preset::Strict,
        ),
    ]
}

fn graph(model: serde_json::Value) -> Graph {
    let spec: ModelSpec = serde_json::from_value(model).unwrap();
    zoo::build(&spec).unwrap()
}

#[test]
fn tch_cpu_and_wgpu_agree_on_six_zoo_models() {
    if adapters().is_empty() {
        prerequisite_missing("wgpu found no adapter (install mesa-vulkan-drivers for lavapipe)");
        return;
    }
    // Strict on a software adapter (lavapipe), balanced on a GPU.
    let best = DeviceSelector::Wgpu(WgpuAdapter::Default);
    let adapter = select(best).unwrap();
    let base = preset_for(adapter.kind());
    let mut failures = Vec::new();
    for (name, model, preset) in models() {
        let preset = match (base, preset) {
            (Preset::Strict, p) | (_, p @ Preset::Permissive) => p,
            _ => Preset::Balanced,
        };
        let started = Instant::now();
        let graph = graph(model);
        let parameters = analyze(&graph).parameters;
        let tch = TchBackend::new().run(&AGREEMENT_RUN.plan(name, DeviceSelector::Cpu), &graph, &mut NoProbe).unwrap();
        let wgpu = WgpuBackend::new().run(&AGREEMENT_RUN.plan(name, best), &graph, &mut NoProbe).unwrap();

        // Identical parameter counts: what each backend allocated and trained, and the static analysis.
        assert_eq!(WgpuBackend::new().parameter_count(&graph, best).unwrap(), parameters, "{name}");
        assert_eq!(tch.memory.gradients, 4 * parameters, "{name}: tch gradient bytes");
        assert_eq!(wgpu.memory.gradients, 4 * parameters, "{name}: wgpu gradient bytes");
        assert_eq!(tch.memory.weights, wgpu.memory.weights, "{name}: weight bytes");

        assert_eq!(tch.steps.loss_values().len(), 6, "{name}: step 0 and 5 SGD steps");
        eprintln!(
            "{name:<18} {parameters:>7} parameters  max relative loss difference {:.2e} (preset {}, {})  {:.1} s",
            max_relative_error(&wgpu.steps.loss_values(), &tch.steps.loss_values()),
            preset.name(),
            adapter.info.name,
            started.elapsed().as_secs_f64()
        );
        let step0 = compare(&wgpu.steps.loss_values()[..1], &tch.steps.loss_values()[..1], base);
        if let Err(d) = step0.and_then(|()| compare(&wgpu.steps.loss_values(), &tch.steps.loss_values(), preset)) {
            failures.push(format!(
                "{name}: {d}\n  wgpu {:?}\n  tch  {:?}",
                wgpu.steps.loss_values(),
                tch.steps.loss_values()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The same batches handed in through `RunContext::data` give the same losses on both backends: the MLP fixture
/// trained for 5 SGD steps on a separable dataset (one batch per step, none repeated) agrees within the preset
/// for the adapter's kind (`strict` on lavapipe), and the evaluation of the same held-out set gives the same
/// loss and accuracy.
#[test]
fn tch_and_wgpu_agree_on_given_batches() {
    use trainbench_contract::RunContext;
    use trainbench_contract::RunPlan;
    use trainbench_contract::conformance::data::{separable_batches, train_on};
    use trainbench_contract::conformance::fixtures;
    use trainbench_contract::target::{EvalEvery, TargetMetric, TargetPlan};
    use trainbench_data::{EvalSet, MemorySource};
    use trainbench_graph::OptimizerSpec;

    let Some(adapter) = select(DeviceSelector::Wgpu(WgpuAdapter::Default)).ok() else {
        prerequisite_missing("wgpu found no adapter (install mesa-vulkan-drivers for lavapipe)");
        return;
    };
    let preset = preset_for(adapter.kind());
    let graph = fixtures::mlp().unwrap();
    let sgd = OptimizerSpec::Sgd { lr: 0.05, momentum: 0.9, weight_decay: 0.0, nesterov: false };
    let plan =
        |device| RunPlan { batch_size: 8, warmup: 0, optimizer: sgd.clone(), device, ..RunPlan::for_tests("given", 5) };
    let batches = separable_batches(&graph, 8, 11, 5);
    let tch = train_on(&mut TchBackend::new(), &plan(DeviceSelector::Cpu), &graph, batches.clone()).unwrap();
    let wgpu_device = DeviceSelector::Wgpu(WgpuAdapter::Default);
    let wgpu = train_on(&mut WgpuBackend::new(), &plan(wgpu_device), &graph, batches.clone()).unwrap();
    eprintln!("given batches: tch {tch:?}\n               wgpu {wgpu:?} ({})", preset.name());
    if let Err(d) = compare(&wgpu, &tch, preset) {
        panic!("wgpu and tch disagree on the same batches: {d}\n  tch {tch:?}\n  wgpu {wgpu:?}");
    }

    // One evaluation after 5 steps: the same loss within the preset and the same accuracy.
    let target = TargetPlan {
        metric: TargetMetric::Loss,
        value: 1e-9,
        every: EvalEvery::Steps(5),
        max_epochs: None,
        max_steps: Some(5),
        max_seconds: None,
    };
    let eval = EvalSet { batches: separable_batches(&graph, 13, 12, 2), origin: "memory".into() };
    let evaluate = |backend: &mut dyn Backend, device| {
        let mut source = MemorySource::new(batches.clone());
        let mut probe = NoProbe;
        let mut ctx = RunContext { data: Some(&mut source), eval: Some(&eval), ..RunContext::new(&mut probe) };
        let p = RunPlan { target: Some(target.clone()), ..plan(device) };
        let out = backend.run_in(&p, &graph, &mut ctx).unwrap();
        let point = *out.target.unwrap().curve.last().unwrap();
        (point.loss, point.accuracy.unwrap())
    };
    let (tl, ta) = evaluate(&mut TchBackend::new(), DeviceSelector::Cpu);
    let (wl, wa) = evaluate(&mut WgpuBackend::new(), wgpu_device);
    eprintln!("evaluation: tch loss {tl} accuracy {ta}; wgpu loss {wl} accuracy {wa}");
    compare(&[wl], &[tl], preset).unwrap();
    assert_eq!(ta, wa);
}
