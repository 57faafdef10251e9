//! The step schedule in a prediction: checkpointing pays the recomputed blocks' forward again in the backward
//! pass, frees their activations and reports HFU; accumulation pays data, forward and backward per
//! micro-batch and the exchange and optimizer once.

use trainbench_comm::Topology;
use trainbench_graph::training::{Checkpointing, StepSchedule};
use trainbench_graph::{ModelSpec, OptimizerSpec, Precision, zoo};

use super::{Setting, predict};
use crate::hardware::{Profile, ProfileValidator};
use crate::result::Sampled;

fn small_gpt() -> trainbench_graph::Graph {
    let spec: ModelSpec = serde_json::from_value(serde_json::json!({
        "family": "gpt", "layers": 4, "d_model": 64, "heads": 4, "ffn": 128, "vocab": 256, "seq_len": 32
    }))
    .unwrap();
    zoo::build(&spec).unwrap()
}

fn h100() -> Profile {
    ProfileValidator::new().unwrap().resolve("h100").unwrap()
}

fn setting(schedule: StepSchedule) -> Setting {
    Setting {
        batch: 8,
        precision: Precision::Bf16,
        optimizer: OptimizerSpec::default(),
        topology: Topology::single(),
        schedule,
        numerics: Default::default(),
        pipeline_layers: Vec::new(),
        steps_run: None,
    }
}

#[test]
fn checkpointing_costs_a_forward_again_frees_activations_and_reports_hfu() {
    let (g, p) = (small_gpt(), h100());
    let plain = predict(&g, &setting(StepSchedule::default()), &p.file).unwrap();
    let full = StepSchedule { checkpointing: Checkpointing::Full, ..StepSchedule::default() };
    let ckpt = predict(&g, &setting(full), &p.file).unwrap();
    assert_eq!(ckpt.phases.forward_s, plain.phases.forward_s);
    assert!(ckpt.phases.backward_s > plain.phases.backward_s);
    assert!(ckpt.phases.backward_s < plain.phases.backward_s + plain.phases.forward_s);
    assert!(ckpt.figures.memory.activation_bytes < plain.figures.memory.activation_bytes);
    let (Sampled::Available(mfu), Sampled::Available(plain_mfu)) = (&ckpt.figures.mfu, &plain.figures.mfu) else {
        panic!("MFU unavailable")
    };
    assert!(plain_mfu.hfu.is_none());
    let hfu = mfu.hfu.as_ref().unwrap();
    assert!(hfu.hfu > mfu.mfu && hfu.recomputed_flops_per_sample > 0, "{hfu:?}");
}

#[test]
fn accumulation_pays_each_micro_batch_and_one_optimizer_step() {
    let (g, p) = (small_gpt(), h100());
    let plain = predict(&g, &setting(StepSchedule::default()), &p.file).unwrap();
    let four =
        predict(&g, &setting(StepSchedule { grad_accumulation: 4, ..StepSchedule::default() }), &p.file).unwrap();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1e-15);
    assert!(close(four.phases.forward_s, 4.0 * plain.phases.forward_s));
    assert!(close(four.phases.backward_s, 4.0 * plain.phases.backward_s));
    assert!(close(four.phases.optimizer_s, plain.phases.optimizer_s));
    assert!(close(four.samples_per_s, 32.0 / four.step_time_s));
    assert!(four.samples_per_s > plain.samples_per_s);
}
