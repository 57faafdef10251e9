//! The root crate's integration tests as one test binary: each module is one area (CLI, runner, result tools,
//! schemas, backends), and `common` is their shared support (synthetic results, insta settings, spec runs). One
//! binary links the library and, in builds with backend features, libtorch and burn once instead of once per file.
//!
//! Tests that use insta's `glob!` stay binaries of their own (`tests/invalid_specs.rs`, `tests/spec_plans.rs`,
//! `tests/spec_shapes.rs`, `tests/spec_runs_tch.rs`, `tests/spec_runs_wgpu.rs`): insta collects `glob!` failures
//! process-wide: while one runs, a failing snapshot of any other test in the process is collected by it, and the
//! test it belongs to passes. They include `common` by path. Run one area with a filter: `cargo test --test it cli_run::`.

/// The `[model]` and `[training]` tables of the mesh tests' smoke GPT (specs/llm/smoke_gpt.toml's model: 4
/// layers, width 256, 8 heads over 4 key/value heads, SwiGLU, RMSNorm, rotary positions; fp32 AdamW, seed 0),
/// as a literal for `concat!`: the pipeline and tensor-parallel tests train the same model.
macro_rules! smoke_gpt_model_and_training {
    () => {
        r#"
[model]
family = "gpt"
layers = 4
d_model = 256
heads = 8
kv_heads = 4
ffn = 688
activation = "swiglu"
norm = "rmsnorm"
positions = "rotary"
rope_theta = 10000.0
vocab = 4096
seq_len = 128
tied_embeddings = false
bias = false
[training]
precision = "fp32"
seed = 0
optimizer = { kind = "adamw", lr = 3e-4, weight_decay = 0.1 }
"#
    };
}

/// The tiny ViT the tensor-parallel tests train: 16x16 images in 4x4 patches (16 + the class token), 2 layers of
/// width 32 with 4 heads and MLP 64, 10 classes, AdamW.
macro_rules! tiny_vit_model_and_training {
    () => {
        r#"
[model]
family = "vit"
image_size = 16
patch_size = 4
layers = 2
hidden = 32
heads = 4
mlp_dim = 64
classes = 10
[training]
precision = "fp32"
seed = 0
optimizer = { kind = "adamw", lr = 1e-3, weight_decay = 0.05 }
"#
    };
}

mod common;

mod audit_integrity;
mod calibrate_load;
mod check_cli;
mod cli;
mod cli_run;
mod compare_cli;
#[cfg(all(feature = "tch", feature = "wgpu"))]
mod cross_backend;
mod digits;
#[cfg(all(feature = "tch", feature = "mpi"))]
mod distributed;
mod editor_schema;
#[cfg(all(feature = "tch", feature = "mpi"))]
mod expert_parallel;
mod fixtures_check;
#[cfg(all(feature = "tch", feature = "wgpu"))]
mod formats_trained;
mod handoff;
mod history;
mod history_bisect;
mod history_order;
mod history_pg;
#[cfg(feature = "tch")]
mod history_real;
mod image_folder;
mod isolation;
mod local_data;
mod long_runs;
mod mfu_bound;
mod mlperf;
mod mlperf_import;
mod mock_pipeline;
mod no_panic;
#[cfg(all(feature = "tch", feature = "mpi"))]
mod pipeline;
mod plan_refusals;
mod predict_cli;
mod predict_gate;
mod predict_precision;
mod published_profiles;
mod report_browser;
mod report_expert_load;
mod report_files;
mod report_strategies;
mod result_schema;
mod run_prediction;
#[cfg(feature = "tch")]
mod run_tch;
mod runner;
mod scaling;
mod schema_sync;
mod slurm;
#[cfg(all(feature = "tch", feature = "mpi"))]
mod tensor_parallel;
#[cfg(all(feature = "tch", feature = "mpi"))]
mod tensor_parallel_vit;
#[cfg(all(feature = "tch", feature = "mpi"))]
mod tensor_pipeline;
mod tidy;
#[cfg(all(feature = "tch", feature = "mpi"))]
mod zero;
