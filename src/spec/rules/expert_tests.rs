//! Unit tests of the expert-parallel rules, through the validator: each bad combination is refused at its
//! field with the numbers and a fix, and good layouts validate.
#![allow(clippy::unwrap_used)]

use crate::spec::diagnostics::Diagnostic;
use crate::spec::overrides::Overrides;
use crate::spec::validate::SpecValidator;

/// A small MoE decoder: 8 experts, top-2.
const MODEL: &str = "[model]\nfamily = \"gpt\"\nlayers = 2\nd_model = 32\nheads = 4\nactivation = \"swiglu\"\n\
    norm = \"rmsnorm\"\npositions = \"rotary\"\nvocab = 64\nseq_len = 16\n\
    [model.moe]\nexperts = 8\ntop_k = 2\nexpert_ffn = 32\n";

fn check(model: &str, topology: &str) -> (bool, Vec<Diagnostic>) {
    let text = format!("version = 1\nname = \"m\"\n{model}[sweep]\nbatch_sizes = [8]\n[topology]\n{topology}");
    let checked = SpecValidator::new().unwrap().check_bytes("m.toml", text.as_bytes(), None, &Overrides::none());
    let errors = checked.diagnostics.iter().filter(|d| d.is_error()).cloned().collect();
    (checked.spec.is_some(), errors)
}

fn refused(model: &str, topology: &str) -> Vec<(String, String, String)> {
    let (ok, errors) = check(model, topology);
    assert!(!ok, "{topology} validated");
    errors.into_iter().map(|d| (d.path, d.message, d.hint.unwrap_or_default())).collect()
}

#[test]
fn expert_parallel_layouts_validate() {
    for topology in [
        "backend = \"tch\"\ndevices_per_node = 2\nstrategy = \"all-reduce\"\nexpert_parallel = 2\n",
        "backend = \"tch\"\ndevices_per_node = 8\nstrategy = \"all-reduce\"\nexpert_parallel = 4\n",
        "backend = \"tch\"\ndevices_per_node = 4\nstrategy = \"zero-1\"\nexpert_parallel = 2\n",
        "backend = \"tch\"\ndevices_per_node = 4\nstrategy = \"zero-2\"\nexpert_parallel = 2\n",
        // ZeRO-3 (tch replays every block for it).
        "backend = \"tch\"\ndevices_per_node = 4\nstrategy = \"zero-3\"\nexpert_parallel = 2\n\
         [training]\nactivation_checkpointing = \"full\"\n",
        // Beside a pipeline: each stage's experts over its 2 replicas.
        "backend = \"tch\"\ndevices_per_node = 4\nstrategy = \"all-reduce\"\nexpert_parallel = 2\npipeline_parallel = 2\n",
        // Beside a tensor degree: the experts over the 2 replicas of each tensor index.
        "backend = \"tch\"\ndevices_per_node = 4\nstrategy = \"all-reduce\"\nexpert_parallel = 2\ntensor_parallel = 2\n",
        // CUDA ranks (NCCL groups).
        "backend = \"tch\"\ndevice = \"cuda\"\ndevices_per_node = 8\nstrategy = \"all-reduce\"\nexpert_parallel = 8\n",
    ] {
        let (ok, errors) = check(MODEL, topology);
        assert!(ok, "{topology}: {errors:?}");
    }
}

#[test]
fn bad_expert_parallel_layouts_are_refused_at_the_field_with_a_fix() {
    let ar = "backend = \"tch\"\nstrategy = \"all-reduce\"\n";
    // Not a divisor of the experts (8) nor the world size (4).
    let found = refused(MODEL, &format!("{ar}devices_per_node = 4\nexpert_parallel = 3\n"));
    assert!(found.iter().all(|f| f.0 == "topology.expert_parallel"), "{found:?}");
    assert!(
        found
            .iter()
            .any(|f| f.1.contains("does not divide the model's 8 experts") && f.2.contains("`expert_parallel = 2`")),
        "{found:?}"
    );
    assert!(found.iter().any(|f| f.1.contains("does not divide the world size 4")), "{found:?}");
    // A model without experts.
    let dense = MODEL.split("[model.moe]").next().unwrap();
    let found = refused(dense, &format!("{ar}devices_per_node = 2\nexpert_parallel = 2\n"));
    assert!(found[0].1.contains("this `gpt` model has none"), "{found:?}");
    // Another strategy, an explicit overlap, too few replicas beside a tensor degree, another backend.
    let found = refused(
        MODEL,
        "backend = \"tch\"\ndevices_per_node = 2\nstrategy = \"parameter-server\"\nexpert_parallel = 2\n",
    );
    assert!(found.iter().any(|f| f.0 == "topology.strategy" && f.1.contains("not `parameter-server`")), "{found:?}");
    let found = refused(MODEL, &format!("{ar}devices_per_node = 2\nexpert_parallel = 2\noverlap = true\n"));
    assert!(found.iter().any(|f| f.0 == "topology.overlap" && f.2.contains("overlap = false")), "{found:?}");
    let found = refused(MODEL, &format!("{ar}devices_per_node = 4\nexpert_parallel = 4\ntensor_parallel = 2\n"));
    assert!(found.iter().any(|f| f.1.contains("over tensor_parallel 2: 2 data-parallel replicas")), "{found:?}");
    assert!(found.iter().any(|f| f.2.contains("`expert_parallel = 2`") && f.2.contains("multiple of 8")), "{found:?}");
    // Beside a pipeline: the experts are sharded over each stage's replicas, whose number the degree must divide.
    let found = refused(MODEL, &format!("{ar}devices_per_node = 4\nexpert_parallel = 4\npipeline_parallel = 2\n"));
    assert!(found.iter().any(|f| f.1.contains("over 2 pipeline stages: 2 data-parallel replicas")), "{found:?}");
    let found =
        refused(MODEL, "backend = \"mock\"\nstrategy = \"all-reduce\"\ndevices_per_node = 2\nexpert_parallel = 2\n");
    assert!(found.iter().any(|f| f.0 == "topology.backend" && f.1.contains("tch backend only")), "{found:?}");
}
