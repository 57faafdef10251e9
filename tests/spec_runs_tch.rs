//! Every spec under `specs/` trains for real through the tch backend on the CPU at smoke scale (feature `tch`):
//! each run must complete with a finite loss and a positive throughput, its result file must validate against
//! `schema/result.schema.json`, the measured weights and gradients must match the static analysis, and the
//! *shape* of the result (which metrics exist, units, series lengths, memory categories, environment fields)
//! is snapshotted per spec in `golden/shapes-tch/`.
//!
//! Smoke scale is reached with `--set` overrides, the same the CLI takes: [`COMMON`] for every spec, then the
//! spec's row of [`SHRINK`], which makes the heavy models cheap enough for a 2-core CPU while keeping their
//! architecture (the same layer kinds, so the same metrics and memory categories). A spec without a row runs
//! with [`COMMON`] only.
//!
//! This file holds one `glob!` test only (insta collects glob failures process-wide). Run it with
//! `cargo test --features tch --test spec_runs_tch -- --nocapture` to see each spec's wall and step times.
#![cfg(feature = "tch")]
#![allow(clippy::unwrap_used)]

#[path = "it/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};

use common::spec_run::{TrainedSpec, shape_snapshot, train_spec};
use trainbench::result::RunResult;
use trainbench::spec::wire::BackendChoice;

/// Overrides applied to every spec: tch on the CPU, one small batch, fp32 only (the CPU has no fp16 autocast,
/// so the fp16 halves of mixed-precision sweeps are dropped), one warm-up and two measured iterations, one
/// repeat, and a single device (the PAI specs' multi-GPU topologies and their sweeps cannot run on one CPU).
const COMMON: &[&str] = &[
    "topology.backend=tch",
    "topology.device=cpu",
    "sweep.batch_sizes=[2]",
    "sweep.precisions=[\"fp32\"]",
    "training.precision=fp32",
    "run.warmup=1",
    "run.iterations=2",
    "run.repeats=1",
    "sweep.topologies=[]",
    "topology.nodes=1",
    "topology.devices_per_node=1",
    "topology.strategy=single",
    "topology.interconnect=pcie",
];

/// BERT at a size a CPU trains in well under a second per step (same embeddings, encoder layers, MLM and NSP
/// heads as BERT-base).
const BERT_SMALL: &[&str] = &[
    "model.layers=2",
    "model.hidden=128",
    "model.heads=2",
    "model.ffn=512",
    "model.vocab=2000",
    "model.seq_len=32",
    "model.max_positions=64",
];

/// ResNet-50 (bottleneck blocks, ImageNet stem kept) at a quarter of the width and 64x64 inputs.
const RESNET50_SMALL: &[&str] = &["model.width=16", "model.image_size=64"];

const LLAMA_SMALL: &[&str] = &[
    "model.layers=2",
    "model.d_model=64",
    "model.heads=4",
    "model.kv_heads=2",
    "model.head_dim=16",
    "model.ffn=128",
    "model.vocab=512",
    "model.seq_len=16",
];

/// A mixture-of-experts decoder at [`LLAMA_SMALL`]'s size: four experts of width 32, top-2 (the DeepSeek-V3-style
/// row adds `first_dense=1`: its first three dense layers would leave no MoE layer of two).
const MOE_SMALL: &[&str] = &[
    "model.layers=2",
    "model.d_model=64",
    "model.heads=4",
    "model.kv_heads=2",
    "model.head_dim=16",
    "model.ffn=128",
    "model.vocab=512",
    "model.seq_len=16",
    "model.moe.experts=4",
    "model.moe.top_k=2",
    "model.moe.expert_ffn=32",
];

/// Per-spec overrides on top of [`COMMON`], with the reason. Paths are relative to `specs/`.
const SHRINK: &[(&str, &[&str], &str)] = &[
    ("extra/bert_base.toml", BERT_SMALL, "BERT-base: 110 M parameters, seq 128"),
    (
        "extra/ncf.toml",
        &["model.users=1000", "model.items=1000"],
        "MovieLens-20M embedding tables (165 k rows) dominate the optimizer step",
    ),
    (
        "llm/gpt2_small.toml",
        &[
            "model.layers=2",
            "model.d_model=64",
            "model.heads=4",
            "model.ffn=256",
            "model.vocab=512",
            "model.seq_len=16",
            "model.max_positions=32",
        ],
        "GPT-2 small: 124 M parameters over 1,024 tokens",
    ),
    ("llm/llama3_2_1b.toml", LLAMA_SMALL, "Llama-3.2-1B: 1.2 G parameters over 2,048 tokens"),
    ("llm/llama3_1_8b.toml", LLAMA_SMALL, "Llama-3.1-8B: 8 G parameters (128 GB of state with Adam)"),
    ("llm/mixtral_8x7b.toml", MOE_SMALL, "Mixtral-8x7B: 46.7 G parameters over 4,096 tokens"),
    ("llm/qwen3_30b_a3b.toml", MOE_SMALL, "Qwen3-30B-A3B: 30.5 G parameters, 128 experts"),
    (
        "llm/deepseek_v3_style.toml",
        &[
            "model.layers=2",
            "model.d_model=64",
            "model.heads=4",
            "model.kv_heads=2",
            "model.head_dim=16",
            "model.ffn=128",
            "model.vocab=512",
            "model.seq_len=16",
            "model.moe.experts=4",
            "model.moe.top_k=2",
            "model.moe.expert_ffn=32",
            "model.moe.first_dense=1",
        ],
        "DeepSeek-V3-style: 675 G parameters, 256 experts",
    ),
    ("llm/llama2_70b_lora.toml", LLAMA_SMALL, "Llama 2 70B with LoRA: 69 G frozen parameters over 8,192 tokens"),
    (
        "mlperf/dlrm_dcnv2_smoke_mlperf.toml",
        &["sweep.batch_sizes=[128]"],
        "an AUC target over 2,048 held-out clicks: batches of 2 would evaluate 1,024 times a cadence and learn slowly",
    ),
    ("pai/1w1g.toml", RESNET50_SMALL, "ResNet-50 at 224x224"),
    ("pai/1wng_allreduce_nvlink.toml", RESNET50_SMALL, "ResNet-50 at 224x224"),
    ("pai/ps_vs_allreduce.toml", RESNET50_SMALL, "ResNet-50 at 224x224"),
    ("pai/ps_worker_ethernet.toml", BERT_SMALL, "BERT-base (the family defaults)"),
    (
        "tbd/deep_speech2.toml",
        &["model.frames=50", "model.rnn_hidden=128", "model.rnn_layers=2", "model.label_len=10"],
        "7 x bi-GRU 1760 over 200 frames (the CPU GRU runs step by step); 50 frames leave 25 CTC output frames, so the transcript shrinks to 10",
    ),
    (
        "tbd/faster_rcnn.toml",
        &["sweep.batch_sizes=[1]", "model.backbone_depth=50", "model.image_size=128", "model.proposals=8"],
        "ResNet-101 backbone at 600 px with 300 proposals; ResNet-50 has the same bottleneck blocks; batch 1 as in TBD",
    ),
    // Inception-v3 keeps 299x299: its auxiliary classifier needs the 17x17 Mixed_6e grid (the builder refuses
    // smaller inputs with aux_logits), and dropping aux_logits would change the result's shape. Batch 2, not
    // 1: the auxiliary head's batch norm sees a 1x1 map and needs more than one value per channel.
    (
        "recsys/dlrm_dcnv2.toml",
        &[
            "model.max_table_rows=1000",
            "model.embedding_dim=16",
            "model.bottom_mlp=[32,16]",
            "model.top_mlp=[64,1]",
            "model.cross_rank=16",
        ],
        "DLRM-DCNv2: 26 tables of up to 100 k rows x 128 and a 3,456-wide cross network",
    ),
    ("tbd/resnet50.toml", RESNET50_SMALL, "ResNet-50 at 224x224"),
    (
        "tbd/seq2seq.toml",
        &["model.seq_len=16", "model.hidden=128", "model.src_vocab=2000", "model.tgt_vocab=1000"],
        "2 x LSTM 512 over 50 tokens with 17 k / 7.7 k vocabularies",
    ),
    (
        "tbd/transformer.toml",
        &["model.seq_len=16", "model.d_model=128", "model.ffn=512", "model.vocab=2000"],
        "Transformer-base: 63 M parameters (Adam) over 64 tokens",
    ),
    ("tbd/wgan_gp.toml", &["model.width=16"], "DCGAN generator and critic at width 64, with a double backward"),
    (
        "vision/vit_b_16.toml",
        &[
            "model.image_size=32",
            "model.patch_size=8",
            "model.layers=2",
            "model.hidden=64",
            "model.heads=4",
            "model.mlp_dim=128",
            "model.classes=10",
        ],
        "ViT-B/16: 86.6 M parameters over 197 tokens",
    ),
];

fn specs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("specs")
}

/// The overrides of one spec (path relative to `specs/`, `/`-separated).
fn overrides_for(rel: &str) -> Vec<String> {
    let extra = SHRINK.iter().find(|(p, _, _)| *p == rel).map(|(_, o, _)| *o).unwrap_or(&[]);
    COMMON.iter().chain(extra).map(|s| s.to_string()).collect()
}

/// Train one spec, check its result (the shared checks of [`train_spec`] plus tch's) and return it.
fn run_spec(path: &Path, rel: &str) -> RunResult {
    let TrainedSpec { result: r, wall_s } = train_spec(path, rel, &overrides_for(rel), BackendChoice::Tch, 2);
    let m = r.metrics.as_ref().unwrap();
    let loss = m.loss.as_ref().unwrap();
    assert!(loss.last.is_some_and(f64::is_finite), "{rel}: {loss:?}");
    let a = r.analysis.as_ref().unwrap();
    assert_eq!(m.memory.measured.weights_bytes, a.memory.weights_bytes, "{rel}: weight bytes vs the analysis estimate");

    eprintln!(
        "{rel:<34} wall {wall_s:6.2} s  step median {:8.1} ms  {:8.1} samples/s  params {}",
        m.step_time.median_s * 1e3,
        m.throughput.samples_per_s,
        a.parameters
    );
    r
}

#[test]
fn every_spec_trains_on_tch_cpu_with_a_stable_result_shape() {
    let dir = specs_dir();
    // A row for a spec that no longer exists is a stale table, not a silent no-op.
    for (rel, _, _) in SHRINK {
        assert!(dir.join(rel).is_file(), "SHRINK names {rel}, which is not under specs/");
    }
    let mut settings = common::golden_settings("shapes-tch");
    settings.set_omit_expression(true);
    settings.bind(|| {
        insta::glob!("../specs", "**/*.toml", |path| {
            let rel = path.strip_prefix(&dir).unwrap().to_string_lossy().replace('\\', "/");
            let r = run_spec(path, &rel);
            insta::assert_json_snapshot!(shape_snapshot(&r, &[]));
        });
    });
}
