//! What a backend cannot run is refused when the spec is validated and planned, never mid-run: `validate`,
//! `plan` and `run --backend` name the layer and the backend and exit with status 2 before anything runs.
//! Every case holds in every build and on every CPU: a backend compiled out still answers from its declared
//! capabilities (`trainbench_contract::capability`), and the CPU-feature case caps oneDNN with
//! `ONEDNN_MAX_CPU_ISA`, so the host's own instruction sets cannot change the answer.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Output;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn trainbench(args: &[&str]) -> Output {
    assert_cmd::Command::new(env!("CARGO_BIN_EXE_trainbench")).current_dir(root()).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Faster R-CNN on wgpu: RoIAlign has no burn implementation.
const FASTER_RCNN_ON_WGPU: &[&str] = &["--set", "topology.backend=wgpu", "--set", "topology.device=wgpu"];

#[test]
fn validate_and_plan_refuse_a_layer_wgpu_cannot_run() {
    for command in ["validate", "plan"] {
        let mut args = vec![command, "specs/tbd/faster_rcnn.toml"];
        args.extend(FASTER_RCNN_ON_WGPU);
        let out = trainbench(&args);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{command}: {t}");
        assert!(t.contains("the wgpu backend cannot run layer `") && t.contains("roi_align"), "{command}: {t}");
    }
    // The same spec on tch (its own backend) stays valid.
    let out = trainbench(&["validate", "specs/tbd/faster_rcnn.toml"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn a_mixture_of_experts_is_refused_on_wgpu_with_its_reason() {
    let out = trainbench(&[
        "plan",
        "specs/llm/smoke_moe.toml",
        "--set",
        "topology.backend=wgpu",
        "--set",
        "topology.device=wgpu",
    ]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(t.contains("the wgpu backend cannot run layer `") && t.contains("mixture-of-experts"), "{t}");
    assert!(t.contains("use the tch backend"), "{t}");
}

/// Under activation checkpointing a block's forward runs without gradients, so tch refuses an MoE whose
/// load-balancing loss would silently not train, rather than accepting `aux_loss` and ignoring it.
#[test]
fn an_moe_load_balancing_loss_under_checkpointing_is_refused_on_tch() {
    let spec = "specs/llm/smoke_moe.toml";
    let out = trainbench(&["plan", spec, "--set", "training.activation_checkpointing=full"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(t.contains("load-balancing loss would not train") && t.contains("model.moe.aux_loss = 0"), "{t}");
    let without_aux = ["--set", "training.activation_checkpointing=full", "--set", "model.moe.aux_loss=0"];
    let out = trainbench(&[&["plan", spec][..], &without_aux[..]].concat());
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn run_with_backend_override_refuses_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_str().unwrap();
    let out = trainbench(&["run", "specs/tbd/faster_rcnn.toml", "--backend", "wgpu", "--quiet", "--out", out_dir]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(t.contains("the wgpu backend cannot run layer `") && t.contains("RoIAlign"), "{t}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing may run or be written: {t}");
}

/// A bf16 LSTM on the CPU without AVX-512 (oneDNN capped at AVX2, what an AVX2-only CPU offers) is refused by
/// `validate`, `plan` and `run` alike, with status 2 and nothing written, naming the layer, the precision and the
/// missing feature: the plan-time refusal path, not a failed run with oneDNN's internal message.
#[test]
fn bf16_lstm_on_a_cpu_without_avx512_is_refused_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_str().unwrap();
    for command in [&["validate"][..], &["plan"], &["run", "--out", out_dir]] {
        let mut args = command.to_vec();
        args.extend([
            "specs/smoke/seq2seq_tiny.toml",
            "--set",
            "training.precision=bf16",
            "--set",
            "topology.backend=tch",
        ]);
        let out = assert_cmd::Command::new(env!("CARGO_BIN_EXE_trainbench"))
            .current_dir(root())
            .env("ONEDNN_MAX_CPU_ISA", "AVX2")
            .env_remove("DNNL_MAX_CPU_ISA")
            .args(&args)
            .output()
            .unwrap();
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {t}");
        assert!(t.contains("the tch backend cannot run layer `encoder.lstm` (lstm)"), "{command:?}: {t}");
        assert!(t.contains("precision bf16") && t.contains("needs AVX-512"), "{command:?}: {t}");
        assert!(!t.contains("primitive descriptor"), "{command:?}: {t}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing may run or be written");
}

#[test]
fn smoke_specs_pass_the_backend_check() {
    let out = trainbench(&["validate", "specs/smoke"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

/// A mesh that splits the model over tensor x pipeline parallelism is accepted by `validate`, `plan` and
/// `analyze`; `run` trains it on the tch backend's CPU ranks only (`tests/it/tensor_pipeline.rs`) and refuses,
/// before anything starts and naming why, what does not run: the other backends (no pipeline stages), a
/// pipeline's ranks without a data-parallel strategy, and what a pipeline does not support yet (bf16,
/// activation checkpointing, ZeRO along it), each naming the field and the fix (never trained as plain data
/// parallelism).
#[test]
fn run_refuses_a_split_model_that_plan_accepts() {
    let mesh = [
        "--set",
        "topology.devices_per_node=4",
        "--set",
        "topology.tensor_parallel=2",
        "--set",
        "topology.pipeline_parallel=2",
    ];
    for command in ["validate", "plan", "analyze"] {
        let mut args = vec![command, "specs/llm/smoke_gpt.toml"];
        args.extend(mesh);
        let out = trainbench(&args);
        assert_eq!(out.status.code(), Some(0), "{command}: {}", text(&out));
    }
    let all_reduce = ["--set", "topology.strategy=all-reduce"];
    let cases: [(&str, &[&str], &str); 6] = [
        ("mock", &all_reduce, "the mock backend runs no pipeline stages"),
        ("wgpu", &all_reduce, "the wgpu backend runs no pipeline stages"),
        ("tch", &[], "start as a group with `strategy = \"all-reduce\"`"),
        ("tch", &["--set", "topology.strategy=all-reduce", "--set", "training.precision=bf16"], "training.precision"),
        (
            "tch",
            &["--set", "topology.strategy=all-reduce", "--set", "training.activation_checkpointing=full"],
            "training.activation_checkpointing",
        ),
        (
            "tch",
            &["--set", "topology.devices_per_node=8", "--set", "topology.strategy=zero-1"],
            "`zero-1` along the data-parallel dimension",
        ),
    ];
    for (backend, extra, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["run", "specs/llm/smoke_gpt.toml", "--quiet", "--backend", backend, "--out"];
        args.push(dir.path().to_str().unwrap());
        args.extend(mesh);
        args.extend(extra);
        let out = trainbench(&args);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{backend} {extra:?}: {t}");
        assert!(t.contains(expected) && t.contains("pipeline"), "{backend} {extra:?}: {t}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing may run or be written: {t}");
    }
}

/// Tensor parallelism without a pipeline trains on the tch backend; the others refuse it before anything runs
/// rather than train it as plain data parallelism.
#[test]
fn tensor_parallelism_is_refused_outside_the_tch_backend() {
    for backend in ["mock", "wgpu"] {
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["run", "specs/llm/smoke_gpt.toml", "--quiet", "--backend", backend, "--out"];
        args.push(dir.path().to_str().unwrap());
        args.extend(["--set", "topology.devices_per_node=2", "--set", "topology.tensor_parallel=2"]);
        args.extend(["--set", "topology.strategy=all-reduce"]);
        let out = trainbench(&args);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{backend}: {t}");
        assert!(t.contains("tensor_parallel 2 trains on the tch backend only"), "{backend}: {t}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing may run or be written: {t}");
    }
}
