//! The conformance kit every backend runs (feature `testing`): one function per property a backend must have,
//! on small fixture graphs ([`fixtures`]) that exercise every layer family, and [`crate::conformance_tests!`]
//! to run all of them from a backend's tests with one line.
//!
//! Properties: the loss falls ([`losses_fall`]); the weights allocated are exactly those the contract declares
//! ([`weights_match_declarations`]); every backend starts from the same initial weights and batches
//! ([`starts_from_the_shared_weights`]: step 0 equals PyTorch's within the preset); training agrees with
//! PyTorch step for step within a named tolerance preset ([`agrees_with_pytorch`]); and what
//! [`Backend::supports`] refuses is refused by `check` and `run` too, before anything trains
//! ([`refuses_what_supports_says`]). With data handed in ([`data`]): the batches given are the batches trained on,
//! a one-class dataset is learned, a dataset error names its file, and evaluation reaches full accuracy on a
//! separable set.

pub mod agreement;
pub mod data;
pub mod fixtures;

use crate::backend::{Backend, BackendError, NoProbe, RunPlan};
use crate::device::DeviceSelector;
use agreement::{AGREEMENT_RUN, Preset, compare, max_absolute_error, max_relative_error};
use trainbench_graph::graph::Graph;
use trainbench_graph::params::graph_tensors;
use trainbench_graph::{training::OptimizerSpec, training::Precision};

/// Why a fixture's reference losses cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    /// No reference file ships for the fixture (named).
    #[error("no reference for fixture `{0}`")]
    NoReference(String),
    /// The reference file is not JSON.
    #[error("{fixture}: {source}")]
    NotJson {
        /// The fixture.
        fixture: String,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// The reference was made for another batch size or seed than [`AGREEMENT_RUN`].
    #[error("{0}: the reference was made for another batch size or seed; regenerate it")]
    OtherRun(String),
    /// The reference holds no list of losses, or a loss that is not a number.
    #[error("{fixture}: {what}")]
    Malformed {
        /// The fixture.
        fixture: String,
        /// What is wrong.
        what: &'static str,
    },
}

/// The PyTorch reference losses of fixture `name` (step 0 and after each of 5 SGD steps), from
/// `crates/trainbench-contract/reference/<name>.json`, checked to be made for [`AGREEMENT_RUN`].
pub fn reference_losses(name: &str) -> Result<Vec<f64>, ReferenceError> {
    let text = match name {
        "mlp" => include_str!("../../reference/mlp.json"),
        "cnn" => include_str!("../../reference/cnn.json"),
        "lstm" => include_str!("../../reference/lstm.json"),
        "transformer" => include_str!("../../reference/transformer.json"),
        "gru" => include_str!("../../reference/gru.json"),
        "ctc" => include_str!("../../reference/ctc.json"),
        "gpt" => include_str!("../../reference/gpt.json"),
        "lora" => include_str!("../../reference/lora.json"),
        "vit" => include_str!("../../reference/vit.json"),
        "moe" => include_str!("../../reference/moe.json"),
        other => return Err(ReferenceError::NoReference(other.to_string())),
    };
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|source| ReferenceError::NotJson { fixture: name.to_string(), source })?;
    let run = AGREEMENT_RUN;
    if doc["batch"] != run.batch || doc["seed"] != run.seed {
        return Err(ReferenceError::OtherRun(name.to_string()));
    }
    let malformed = |what| ReferenceError::Malformed { fixture: name.to_string(), what };
    let losses = doc["losses"].as_array().ok_or_else(|| malformed("no `losses`"))?;
    losses.iter().map(|v| v.as_f64().ok_or_else(|| malformed("a loss is not a number"))).collect()
}

/// A prerequisite of a test that this machine lacks (a device, chromium, a wgpu adapter, a tool): under
/// `CI=true`, which provides every prerequisite the suite names, a failure saying `what` is missing and how to
/// get it; elsewhere a notice on stderr, and the caller skips. The one CI guard of every test that can skip.
pub fn prerequisite_missing(what: &str) {
    assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true but {what}");
    eprintln!("notice: skipping: {what}");
}

fn fixture(name: &str) -> Graph {
    match fixtures::build(name) {
        Some(Ok(g)) => g,
        Some(Err(e)) => panic!("fixture {name} does not build: {e:?}"),
        None => panic!("no fixture {name}"),
    }
}

fn plan(name: &str, device: DeviceSelector, steps: u64, optimizer: OptimizerSpec) -> RunPlan {
    RunPlan { batch_size: 8, warmup: 0, optimizer, device, ..RunPlan::for_tests(name, steps) }
}

fn train(backend: &mut dyn Backend, plan: &RunPlan, graph: &Graph) -> Vec<f64> {
    let name = &plan.id;
    let out = backend.run(plan, graph, &mut NoProbe).unwrap_or_else(|e| panic!("{name}: the run failed: {e}"));
    assert_eq!(out.steps.loss_values().len() as u64, out.steps.seen(), "{name}: a loss per measured step");
    assert!(
        out.steps.loss_values().iter().all(|l| l.is_finite()),
        "{name}: a loss is not finite: {:?}",
        out.steps.loss_values()
    );
    out.steps.loss_values()
}

/// The loss falls: each fixture trained with Adam (lr 0.01) for 13 steps on the 4 cycled batches has, on batch 0
/// at step 12, fallen below a share of its step-0 loss: 90% for the MLP, CNN, CTC, GPT and ViT models (tch on the
/// CPU: to 60%, 70%, 37%, 67% and 65%), 95% for the GRU and 97% for the LSTM and the Transformer (random
/// per-token labels over 40-50 classes leave little to learn in a few steps).
pub fn losses_fall(backend: &mut dyn Backend, device: DeviceSelector) {
    let adam = OptimizerSpec::Adam { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 };
    for (name, factor) in [
        ("mlp", 0.9),
        ("cnn", 0.9),
        ("lstm", 0.97),
        ("transformer", 0.97),
        ("gru", 0.95),
        ("ctc", 0.9),
        ("gpt", 0.9),
        ("vit", 0.9),
    ] {
        let losses = train(backend, &plan(name, device, 13, adam.clone()), &fixture(name));
        let (first, later) = (losses[0], losses[12]);
        eprintln!("{name}: {first:.4} -> {later:.4}");
        assert!(later < first * factor, "{name} on {}: loss {first} -> {later} at step 12: {losses:?}", backend.name());
    }
}

/// The weights a backend allocates are exactly those the contract declares: 4 bytes per declared parameter
/// element in fp32 (buffers such as batch-norm statistics included), and as many bytes of gradients as of
/// trained parameters.
pub fn weights_match_declarations(backend: &mut dyn Backend, device: DeviceSelector) {
    for name in fixtures::NAMES {
        let graph = fixture(name);
        let run_plan = plan(name, device, 1, OptimizerSpec::default());
        if fixtures::OPTIONAL.contains(&name)
            && let Err(e @ BackendError::Unsupported { .. }) = backend.supports(&run_plan, &graph)
        {
            eprintln!("{name}: not checked, {} refuses it: {e}", backend.name());
            continue;
        }
        let out = backend.run(&run_plan, &graph, &mut NoProbe).unwrap_or_else(|e| panic!("{name}: {e}"));
        let tensors = graph_tensors(&graph);
        let all: u64 = tensors.iter().map(|(_, d)| d.numel()).sum();
        let trained: u64 = tensors.iter().filter(|(_, d)| d.trainable()).map(|(_, d)| d.numel()).sum();
        assert_eq!(out.memory.weights, 4 * all, "{name} on {}: weight bytes", backend.name());
        assert_eq!(out.memory.gradients, 4 * trained, "{name} on {}: gradient bytes", backend.name());
    }
}

/// Every backend starts from the same weights and batches: each fixture's loss at step 0 (before any update)
/// equals PyTorch's from the same initial tensors within `preset`.
pub fn starts_from_the_shared_weights(backend: &mut dyn Backend, device: DeviceSelector, preset: Preset) {
    agreement_over(backend, device, preset, 1);
}

/// Training agrees with PyTorch: each fixture's losses at step 0 and after each of 5 SGD steps (momentum 0.9)
/// match the reference within `preset`.
pub fn agrees_with_pytorch(backend: &mut dyn Backend, device: DeviceSelector, preset: Preset) {
    agreement_over(backend, device, preset, AGREEMENT_RUN.steps as usize);
}

fn agreement_over(backend: &mut dyn Backend, device: DeviceSelector, preset: Preset, steps: usize) {
    let mut failures = Vec::new();
    for name in fixtures::NAMES {
        let (plan, graph) = (AGREEMENT_RUN.plan(name, device), fixture(name));
        if fixtures::OPTIONAL.contains(&name)
            && let Err(e @ BackendError::Unsupported { .. }) = backend.supports(&plan, &graph)
        {
            eprintln!("{name}: not compared, {} refuses it: {e}", backend.name());
            continue;
        }
        let got = train(backend, &plan, &graph);
        let want = reference_losses(name).unwrap_or_else(|e| panic!("{e}"));
        let (got, want) = (&got[..steps.min(got.len())], &want[..steps.min(want.len())]);
        eprintln!(
            "{name}: max absolute error {:.2e}, max relative error {:.2e} ({})",
            max_absolute_error(got, want),
            max_relative_error(got, want),
            preset.name()
        );
        if let Err(d) = compare(got, want, preset) {
            failures.push(format!("{name}: {d}\n  {} {got:?}\n  pytorch {want:?}", backend.name()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// What [`Backend::supports`] refuses (a precision the backend lacks on `device`, a layer kind it never runs)
/// is refused, with the same error, by `check` and by `run` before anything trains; what it accepts, `check`
/// accepts on this device.
pub fn refuses_what_supports_says(backend: &mut dyn Backend, device: DeviceSelector) {
    let caps = backend.kind().capabilities();
    let graph = fixture("mlp");
    for precision in [Precision::Fp32, Precision::Fp16, Precision::Bf16] {
        let p = RunPlan { precision, ..plan("refusal", device, 1, OptimizerSpec::default()) };
        let declared = caps.precisions_on(device.family()).contains(&precision);
        match backend.supports(&p, &graph) {
            Ok(()) => {
                assert!(declared, "{}: supports accepts undeclared {precision:?}", backend.name());
                assert_eq!(
                    backend.check(&p, &graph),
                    Ok(()),
                    "{}: check refuses what supports accepts",
                    backend.name()
                );
            }
            Err(e) => {
                assert!(!declared, "{}: supports refuses declared {precision:?}: {e}", backend.name());
                assert!(matches!(e, BackendError::Unsupported { .. }), "{e}");
                assert_eq!(backend.check(&p, &graph), Err(e.clone()), "{}: check", backend.name());
                assert_eq!(backend.run(&p, &graph, &mut NoProbe).map(|_| ()), Err(e), "{}: run", backend.name());
            }
        }
    }
    let zero = RunPlan { batch_size: 0, ..plan("refusal", device, 1, OptimizerSpec::default()) };
    assert!(backend.supports(&zero, &graph).is_err(), "{}: batch size 0 is accepted", backend.name());
}

/// Run the whole conformance kit as `#[test]` functions, one per property:
///
/// ```ignore
/// crate::conformance_tests!(backend = TchBackend::new(), device = DeviceSelector::Cpu,
///     preset = Preset::Strict, available = true);
/// ```
///
/// `available` is evaluated first in each test; when false the test prints why it skips (a wgpu machine with no
/// adapter) and passes, except under `CI=true`, where a missing device is an error.
#[macro_export]
macro_rules! conformance_tests {
    (backend = $backend:expr, device = $device:expr, preset = $preset:expr, available = $available:expr $(,)?) => {
        mod conformance {
            #[allow(unused_imports)]
            use super::*;
            use $crate::conformance as kit;

            fn ready() -> bool {
                let available: bool = $available;
                if !available {
                    // CI provides every device the suite names (lavapipe for wgpu): a missing one is an error there.
                    kit::prerequisite_missing("the conformance kit's device is not available here");
                }
                available
            }

            #[test]
            fn losses_fall() {
                if ready() {
                    kit::losses_fall(&mut $backend, $device);
                }
            }

            #[test]
            fn weights_match_declarations() {
                if ready() {
                    kit::weights_match_declarations(&mut $backend, $device);
                }
            }

            #[test]
            fn starts_from_the_shared_weights() {
                if ready() {
                    kit::starts_from_the_shared_weights(&mut $backend, $device, $preset);
                }
            }

            #[test]
            fn agrees_with_pytorch() {
                if ready() {
                    kit::agrees_with_pytorch(&mut $backend, $device, $preset);
                }
            }

            #[test]
            fn given_batches_are_trained_on() {
                if ready() {
                    kit::data::given_batches_are_trained_on(&mut $backend, $device);
                }
            }

            #[test]
            fn learns_a_one_class_dataset() {
                if ready() {
                    kit::data::learns_a_one_class_dataset(&mut $backend, $device);
                }
            }

            #[test]
            fn dataset_errors_name_the_file() {
                if ready() {
                    kit::data::dataset_errors_name_the_file(&mut $backend, $device);
                }
            }

            #[test]
            fn evaluation_reaches_full_accuracy() {
                if ready() {
                    kit::data::evaluation_reaches_full_accuracy(&mut $backend, $device);
                }
            }

            #[test]
            fn refuses_what_supports_says() {
                if ready() {
                    kit::refuses_what_supports_says(&mut $backend, $device);
                }
            }
        }
    };
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::mock::MockBackend;

    #[test]
    fn every_fixture_has_a_reference() {
        for name in fixtures::NAMES {
            assert_eq!(reference_losses(name).unwrap().len(), AGREEMENT_RUN.steps as usize, "{name}");
        }
        assert!(reference_losses("nope").is_err());
    }

    #[test]
    fn the_mock_backend_meets_the_properties_it_can() {
        // The mock computes no real loss (no agreement, no falling loss); its declarations and refusals must
        // still hold.
        let mut mock = MockBackend::default();
        weights_match_declarations(&mut mock, DeviceSelector::Cpu);
        refuses_what_supports_says(&mut mock, DeviceSelector::Cpu);
        // Its prior-only model learns label frequencies: a one-class dataset, not a separable one.
        data::learns_a_one_class_dataset(&mut mock, DeviceSelector::Cpu);
        data::dataset_errors_name_the_file(&mut mock, DeviceSelector::Cpu);
    }
}
