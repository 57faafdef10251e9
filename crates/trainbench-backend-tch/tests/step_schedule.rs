//! The step schedule on the tch backend (CPU): activation checkpointing gives the losses of keeping every
//! activation (dropout masks replayed) with fewer bytes kept by the forward pass, and gradient accumulation
//! over k micro-batches of b gives the losses of one batch of k x b. Figures for the notes are printed.

#![allow(clippy::unwrap_used)]

mod common;

use serde_json::json;
use trainbench_backend_tch::TchBackend;
use trainbench_contract::{Backend, NoProbe, RawMeasurements, RunPlan};
use trainbench_graph::graph::Graph;
use trainbench_graph::training::{Checkpointing, StepSchedule};
use trainbench_graph::{ModelSpec, OptimizerSpec, zoo};

/// A small Llama-style decoder: 4 blocks, GQA, RMSNorm, SwiGLU, rotary, untied, no bias.
fn gpt(dropout: f64) -> Graph {
    let spec: ModelSpec = serde_json::from_value(json!({
        "family": "gpt", "layers": 4, "d_model": 64, "heads": 4, "kv_heads": 2, "ffn": 96,
        "activation": "swiglu", "norm": "rmsnorm", "positions": "rotary", "vocab": 256, "seq_len": 32,
        "tied_embeddings": false, "bias": false, "dropout": dropout,
    }))
    .unwrap();
    zoo::build(&spec).unwrap()
}

fn adamw() -> OptimizerSpec {
    OptimizerSpec::Adamw { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.1 }
}

fn plan(batch: usize, schedule: StepSchedule) -> RunPlan {
    RunPlan { schedule, ..common::plan(batch, 5, adamw()) }
}

fn ckpt(checkpointing: Checkpointing) -> StepSchedule {
    StepSchedule { checkpointing, grad_accumulation: 1 }
}

/// libtorch's default random generator is one per process, and every run seeds it: the tests of this file
/// train one run at a time so that dropout draws only what its own run seeded.
static ONE_RUN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run(plan: &RunPlan, graph: &Graph) -> RawMeasurements {
    let _one = ONE_RUN.lock().unwrap_or_else(|p| p.into_inner());
    let mut be = TchBackend::new();
    be.check(plan, graph).unwrap();
    be.run(plan, graph, &mut NoProbe).unwrap_or_else(|e| panic!("{}: {e}", plan.id))
}

fn assert_close(a: &[f64], b: &[f64], rel: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let d = (x - y).abs() / x.abs().max(1e-12);
        assert!(d < rel, "{what}: step {i}: {x} vs {y} (relative {d:e}); {a:?} vs {b:?}");
    }
}

#[test]
fn checkpointing_keeps_the_losses_and_lowers_the_activations() {
    let graph = gpt(0.0);
    let none = run(&plan(4, StepSchedule::default()), &graph);
    let full = run(&plan(4, ckpt(Checkpointing::Full)), &graph);
    let every2 = run(&plan(4, ckpt(Checkpointing::EveryN { n: 2 })), &graph);
    assert_eq!(none.steps.loss_values().len(), 5);
    assert_close(&none.steps.loss_values(), &full.steps.loss_values(), 1e-5, "full");
    assert_close(&none.steps.loss_values(), &every2.steps.loss_values(), 1e-5, "every_n 2");
    let act = |r: &RawMeasurements| r.memory.activations.unwrap();
    println!("activations: none {} bytes, every_n 2 {} bytes, full {} bytes", act(&none), act(&every2), act(&full));
    assert!(act(&full) < act(&every2) && act(&every2) < act(&none), "{} {} {}", act(&none), act(&every2), act(&full));
    assert_eq!(none.memory.gradients, full.memory.gradients);
}

#[test]
fn a_recomputed_block_replays_its_dropout_masks() {
    let graph = gpt(0.2);
    let none = run(&plan(4, StepSchedule::default()), &graph);
    let full = run(&plan(4, ckpt(Checkpointing::Full)), &graph);
    assert_close(&none.steps.loss_values(), &full.steps.loss_values(), 1e-5, "full with dropout");
}

#[test]
fn accumulating_four_micro_batches_of_four_trains_as_one_batch_of_sixteen() {
    let graph = gpt(0.0);
    let sixteen = run(&plan(16, StepSchedule::default()), &graph);
    let accumulated = run(&plan(4, StepSchedule { checkpointing: Checkpointing::None, grad_accumulation: 4 }), &graph);
    assert_close(&sixteen.steps.loss_values(), &accumulated.steps.loss_values(), 1e-4, "4 x 4 vs 16");
    // One micro-batch is live at a time: the forward pass keeps what a batch of 4 keeps.
    let (a16, a4) = (sixteen.memory.activations.unwrap(), accumulated.memory.activations.unwrap());
    println!("activations: batch 16 {a16} bytes, 4 x 4 accumulated {a4} bytes");
    assert!(a4 < a16, "{a4} vs {a16}");
    // Checkpointing and accumulation together.
    let both = StepSchedule { checkpointing: Checkpointing::Full, grad_accumulation: 4 };
    assert_close(&sixteen.steps.loss_values(), &run(&plan(4, both), &graph).steps.loss_values(), 1e-4, "both");
}

/// The smoke GPT of specs/llm/smoke_gpt.toml (the same model table).
fn smoke_gpt() -> Graph {
    let spec: ModelSpec = serde_json::from_value(json!({
        "family": "gpt", "layers": 4, "d_model": 256, "heads": 8, "kv_heads": 4, "ffn": 688,
        "activation": "swiglu", "norm": "rmsnorm", "positions": "rotary", "rope_theta": 10000.0, "vocab": 4096,
        "seq_len": 128, "tied_embeddings": false, "bias": false,
    }))
    .unwrap();
    zoo::build(&spec).unwrap()
}

/// Figures for the notes (printed, never asserted; minutes on a small CPU):
/// `cargo test -p trainbench-backend-tch --release --test step_schedule -- --ignored --nocapture`.
#[test]
#[ignore = "prints figures; run by hand"]
fn smoke_gpt_figures() {
    let graph = smoke_gpt();
    let median = |r: &RawMeasurements| {
        let mut t: Vec<f64> = r.steps.phases().iter().map(|p| p.total_s).collect();
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    let fig = |batch: usize, schedule: StepSchedule| {
        let plan = RunPlan { warmup: 2, schedule, ..common::plan(batch, 5, adamw()) };
        let r = run(&plan, &graph);
        let p = r.steps.phases();
        let mean = |f: fn(&trainbench_contract::PhaseTimes) -> f64| p.iter().map(f).sum::<f64>() / p.len() as f64;
        println!(
            "FIGURE batch={batch} schedule={schedule:?} activations_bytes={} median_step_s={:.3} forward_s={:.3} \
             backward_s={:.3} tokens_per_s={:.0}",
            r.memory.activations.unwrap_or(0),
            median(&r),
            mean(|p| p.forward_s),
            mean(|p| p.backward_s),
            (plan.samples_per_step() * 128) as f64 / median(&r)
        );
    };
    for _round in 0..2 {
        fig(8, StepSchedule::default());
        fig(8, ckpt(Checkpointing::Full));
    }
    fig(16, StepSchedule::default());
    fig(4, StepSchedule { checkpointing: Checkpointing::None, grad_accumulation: 4 });
}

#[test]
fn bf16_autocast_on_the_cpu_recomputes_under_the_same_autocast() {
    // tch's bf16 on the CPU is libtorch's CPU autocast (no layer of this model needs AVX-512 for it): the
    // recomputed blocks run under it too, so checkpointing keeps the bf16 losses.
    let graph = gpt(0.0);
    let bf16 = |schedule| RunPlan { precision: trainbench_graph::Precision::Bf16, ..plan(4, schedule) };
    let none = run(&bf16(StepSchedule::default()), &graph);
    let full = run(&bf16(ckpt(Checkpointing::Full)), &graph);
    let fp32 = run(&plan(4, StepSchedule::default()), &graph);
    assert_close(&none.steps.loss_values(), &full.steps.loss_values(), 1e-5, "bf16 full");
    // Autocast is on: the bf16 losses are not the fp32 ones.
    assert_ne!(none.steps.loss_values(), fp32.steps.loss_values());
}
