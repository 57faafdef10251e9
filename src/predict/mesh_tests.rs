//! The mesh prediction on hand-worked cases: bytes per dimension and collective, the bubbles, micro-batches
//! held per stage, memory shrinking with tensor and sequence parallelism, the maximum over ranks as headline,
//! and MFU counting each token's model FLOPs once for the whole mesh.
#![allow(clippy::unwrap_used)]

use trainbench_comm::{DataParallel, Mesh, MeshDim, PipelineSchedule, Topology};
use trainbench_graph::{Graph, ModelSpec, OptimizerSpec, Precision};

use super::*;
use crate::hardware::ProfileValidator;
use crate::predict::{AnalyzedGraph, Setting, Terms};

fn mesh(tp: usize, pp: usize, m: usize) -> Mesh {
    Mesh { tensor_parallel: tp, pipeline_parallel: pp, microbatches: m, ..Mesh::flat() }
}

fn sent(bytes: &[DimensionBytes], dim: MeshDim, collective: &str) -> f64 {
    bytes.iter().filter(|b| b.dimension == dim && b.collective == collective).map(|b| b.bytes_per_rank).sum()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn bytes_per_dimension_follow_the_hand_worked_formulas() {
    // TP 2 x PP 2 x DP 2 on 8 ranks, 4 micro-batches; A = 1 MB, 3 layers on the busiest rank, one boundary.
    let i = ByteInputs {
        boundary_bytes: 1e6,
        layers_on_rank: 3,
        regions_on_rank: 6,
        sends_per_microbatch: 1,
        gradient_bytes: 8e6,
        frozen_bytes: 0.0,
        gathered_once_share: 0.0,
        vocab: None,
    };
    let b = mesh_bytes(&mesh(2, 2, 4), 8, DataParallel::AllReduce, i);
    // m x 4 all-reduces x 3 layers x 2 (t-1)/t x A = 4 x 12 x 1 MB.
    assert!(close(sent(&b, MeshDim::Tensor, "all-reduce"), 48e6), "{b:?}");
    // m x 1 boundary x A.
    assert!(close(sent(&b, MeshDim::Pipeline, "send-recv"), 4e6), "{b:?}");
    // 2 (d-1)/d x 8 MB.
    assert!(close(sent(&b, MeshDim::Data, "all-reduce"), 8e6), "{b:?}");
    // Sequence parallelism: the same volume as all-gather + reduce-scatter; the stage hop carries A / t.
    let sp = Mesh { sequence_parallel: true, ..mesh(2, 2, 4) };
    let b = mesh_bytes(&sp, 8, DataParallel::Zero3, i);
    assert!(
        close(sent(&b, MeshDim::Tensor, "all-gather"), 24e6)
            && close(sent(&b, MeshDim::Tensor, "reduce-scatter"), 24e6)
    );
    assert_eq!(sent(&b, MeshDim::Tensor, "all-reduce"), 0.0);
    assert!(close(sent(&b, MeshDim::Pipeline, "send-recv"), 2e6), "{b:?}");
    // ZeRO-3 over 2: 3 x (1/2) x 8 MB, one reduce-scatter and two all-gathers.
    assert!(close(sent(&b, MeshDim::Data, "reduce-scatter"), 4e6) && close(sent(&b, MeshDim::Data, "all-gather"), 8e6));
    // No data dimension, no data bytes.
    let b = mesh_bytes(&mesh(2, 2, 4), 4, DataParallel::Single, i);
    assert!(b.iter().all(|x| x.dimension != MeshDim::Data), "{b:?}");
}

#[test]
fn bubbles_and_micro_batches_held() {
    let one = bubble(&mesh(4, 4, 8)).unwrap();
    assert!(close(one.fraction, 3.0 / 11.0), "{one:?}");
    let interleaved = Mesh { pipeline_schedule: PipelineSchedule::Interleaved1F1B, virtual_stages: 2, ..mesh(1, 4, 8) };
    assert!(close(bubble(&interleaved).unwrap().fraction, 3.0 / 19.0));
    assert!(bubble(&mesh(2, 1, 1)).is_none());
    let f1b = mesh(1, 4, 8);
    assert_eq!((0..4).map(|r| microbatches_held(&f1b, r)).collect::<Vec<_>>(), [4, 3, 2, 1]);
    let gpipe = Mesh { pipeline_schedule: PipelineSchedule::Gpipe, ..f1b };
    assert_eq!(microbatches_held(&gpipe, 3), 8);
    // Megatron's warm-up: (p - 1 - r) x 2 + (v - 1) x p, plus one.
    assert_eq!((microbatches_held(&interleaved, 0), microbatches_held(&interleaved, 3)), (11, 5));
}

/// The smoke decoder: 4 layers, d 256, 8 heads over 4 kv heads, SwiGLU 688, vocabulary 4096, 128 tokens.
fn smoke() -> Graph {
    let spec = serde_json::json!({
        "layers": 4, "d_model": 256, "heads": 8, "kv_heads": 4, "ffn": 688, "activation": "swiglu",
        "norm": "rmsnorm", "positions": "rotary", "vocab": 4096, "seq_len": 128, "tied_embeddings": false,
        "bias": false
    });
    trainbench_graph::zoo::build(&ModelSpec::Gpt(serde_json::from_value(spec).unwrap())).unwrap()
}

fn predict_on(graph: &Graph, batch: usize, strategy: DataParallel, devices: usize, m: Mesh) -> MeshPrediction {
    predict_scheduled(graph, batch, strategy, devices, m, Default::default())
}

fn predict_scheduled(
    graph: &Graph,
    batch: usize,
    strategy: DataParallel,
    devices: usize,
    m: Mesh,
    schedule: trainbench_graph::training::StepSchedule,
) -> MeshPrediction {
    let profile = ProfileValidator::new().unwrap().resolve("h100").unwrap().file;
    let topology = Topology { mesh: m, ..Topology::on_one_node(strategy, devices) };
    let setting = Setting {
        batch,
        precision: Precision::Fp32,
        optimizer: serde_json::from_value::<OptimizerSpec>(serde_json::json!({"kind": "adamw"})).unwrap(),
        topology,
        schedule,
        numerics: Default::default(),
        pipeline_layers: Vec::new(),
        steps_run: None,
    };
    predict_mesh(&AnalyzedGraph::new(graph), &setting, &profile, &Terms::all()).unwrap()
}

#[test]
fn a_smoke_mesh_prices_its_tensor_bytes_by_hand_and_halves_its_states() {
    let g = smoke();
    let tp1 = predict_on(&g, 4, DataParallel::Single, 1, Mesh::flat());
    let tp2 = predict_on(&g, 4, DataParallel::Single, 2, mesh(2, 1, 1));
    // A = 4 samples x 128 tokens x 256 x 4 bytes; 4 layers x 4 all-reduces x 2 (1/2) x A, two more for the
    // vocabulary-parallel embedding and head, and the cross-entropy's all-reduce of two fp32 values per token
    // (2 (1/2) x 8 x 512) beside its all-gather of one maximum per token ((2 - 1) x 4 x 512).
    let a = 4.0 * 128.0 * 256.0 * 4.0;
    assert!(close(sent(&tp2.bytes, MeshDim::Tensor, "all-reduce"), 18.0 * a + 4096.0), "{:?}", tp2.bytes);
    assert!(close(sent(&tp2.bytes, MeshDim::Tensor, "all-gather"), 2048.0), "{:?}", tp2.bytes);
    // States per rank: about half (the norms are the only parameters not split), activations below TP 1's, and
    // sequence parallelism lower still.
    // The step's 80% interval holds it, and the collectives (the exchange group) widen it beyond one rank's.
    let i = &tp2.interval;
    assert!(i.holds(tp2.step_time_s) && i.log_half_width > 0.0, "{i:?}");
    assert!(i.low_s < tp2.step_time_s && tp2.step_time_s < i.high_s, "{i:?}");
    let (s1, s2) = (&tp1.stages[0], &tp2.stages[0]);
    // Half of everything but the nine norms' 256 weights each, which every rank holds whole (fp32; Adam's two
    // moments).
    let norms = 9.0 * 256.0 * 4.0;
    assert!(close(s2.weights_bytes * 2.0 - norms, s1.weights_bytes), "{s2:?} {s1:?}");
    assert!(close(s2.optimizer_bytes * 2.0 - 2.0 * norms, s1.optimizer_bytes), "{s2:?} {s1:?}");
    assert!(s2.activations_bytes < s1.activations_bytes);
    let sp = predict_on(&g, 4, DataParallel::Single, 2, Mesh { sequence_parallel: true, ..mesh(2, 1, 1) });
    assert!(sp.stages[0].activations_bytes < s2.activations_bytes);
    assert!(close(sp.stages[0].activations_bytes * 2.0, s1.activations_bytes));
    // Full activation checkpointing keeps less.
    let full = trainbench_graph::training::StepSchedule {
        checkpointing: trainbench_graph::training::Checkpointing::Full,
        ..Default::default()
    };
    let ckpt = predict_scheduled(&g, 4, DataParallel::Single, 2, mesh(2, 1, 1), full);
    assert!(ckpt.stages[0].activations_bytes < s2.activations_bytes / 2.0, "{:?}", ckpt.stages[0]);
}

#[test]
fn a_pipeline_reports_the_maximum_over_ranks_and_mfu_counts_each_token_once() {
    let g = smoke();
    let p = predict_on(&g, 8, DataParallel::Single, 2, mesh(1, 2, 4));
    assert_eq!(p.stages.len(), 2);
    let max = p.stages.iter().map(|s| s.peak_bytes).fold(0.0, f64::max);
    assert_eq!(p.max_memory_per_rank_bytes, max);
    assert_eq!(p.max_memory_stage, p.stages.iter().position(|s| s.peak_bytes == max).unwrap());
    // 1F1B: stage 0 holds 2 micro-batches, the last 1.
    assert_eq!((p.stages[0].microbatches_held, p.stages[1].microbatches_held), (2, 1));
    // MFU: model FLOPs of every sample once, over both ranks' peak (an fp32 run with PyTorch's default TF32
    // switches: the TF32 peak, as a measured run's).
    let a = trainbench_graph::analysis::analyze(&g);
    let peak = ProfileValidator::new().unwrap().resolve("h100").unwrap().file.device.peak_tflops.tf32.unwrap() * 1e12;
    let samples_per_s = p.items_per_s / a.items_per_sample as f64;
    assert!(close(p.mfu.unwrap(), a.model_flops.per_sample as f64 * samples_per_s / (2.0 * peak)));
    // A TP 2 run of a global batch reports, per unit of throughput, the MFU of two data-parallel replicas of
    // the same batch: the tensor group's work is not counted twice.
    let tp = predict_on(&g, 4, DataParallel::Single, 2, mesh(2, 1, 1));
    let dp = predict_on(&g, 4, DataParallel::AllReduce, 2, Mesh::flat());
    assert!(close(tp.mfu.unwrap() / tp.items_per_s, dp.mfu.unwrap() / dp.items_per_s));
    assert!(close(mesh_mfu(1e9, 100.0, 2, 1e12), 0.05));
}

#[test]
fn expert_parallelism_prices_its_all_to_alls_and_shards_the_experts() {
    // The smoke MoE decoder: 4 MoE layers of 8 experts, top-2, d 256, expert width 256.
    let spec = serde_json::json!({
        "layers": 4, "d_model": 256, "heads": 8, "kv_heads": 4, "ffn": 688, "activation": "swiglu",
        "norm": "rmsnorm", "positions": "rotary", "vocab": 4096, "seq_len": 128, "tied_embeddings": false,
        "bias": false, "moe": {"experts": 8, "top_k": 2, "expert_ffn": 256}
    });
    let g = trainbench_graph::zoo::build(&ModelSpec::Gpt(serde_json::from_value(spec).unwrap())).unwrap();
    let flat = predict_on(&g, 8, DataParallel::AllReduce, 4, Mesh::flat());
    let ep = predict_on(&g, 8, DataParallel::AllReduce, 4, Mesh { expert_parallel: 2, ..Mesh::flat() });
    // Per rank: 2 samples x 128 tokens x top-2 x 256 x 4 bytes, four passes, and 8 fp32 counts, per MoE layer.
    let per_layer = 4.0 * 2.0 * 128.0 * 2.0 * 256.0 * 4.0 + 8.0 * 4.0;
    assert!(close(sent(&ep.bytes, MeshDim::Data, "all-to-all"), 4.0 * per_layer), "{:?}", ep.bytes);
    assert_eq!(sent(&flat.bytes, MeshDim::Data, "all-to-all"), 0.0);
    // Half the experts' weights away from each rank: 4 layers x 3 x 4 experts x 256 x 256 parameters.
    let away = 4.0 * 3.0 * 4.0 * 256.0 * 256.0;
    assert!(close(flat.stages[0].parameters - ep.stages[0].parameters, away));
    // The experts' gradients go over the 2 ranks holding them: 2 (2 - 1) / 2 x their fp32 bytes; the rest over 4.
    let experts = 4.0 * 3.0 * 4.0 * 256.0 * 256.0 * 4.0;
    assert!(close(sent(&ep.bytes, MeshDim::Data, "expert all-reduce"), experts), "{:?}", ep.bytes);
    let dense_ring = sent(&flat.bytes, MeshDim::Data, "all-reduce") - 1.5 * 2.0 * experts;
    assert!(close(sent(&ep.bytes, MeshDim::Data, "all-reduce"), dense_ring), "{:?}", ep.bytes);
    assert!(ep.max_memory_per_rank_bytes < flat.max_memory_per_rank_bytes);
}

#[test]
fn a_vit_prices_its_classifier_input_outside_the_blocks() {
    let spec = serde_json::json!({
        "image_size": 16, "patch_size": 4, "layers": 2, "hidden": 32, "heads": 4, "mlp_dim": 64, "classes": 10
    });
    let g = trainbench_graph::zoo::build(&ModelSpec::Vit(serde_json::from_value(spec).unwrap())).unwrap();
    let tp2 = predict_on(&g, 4, DataParallel::Single, 2, mesh(2, 1, 1));
    // A = 4 samples x 17 tokens x 32 x 4 bytes; 2 layers x 4 all-reduces x 2 (1/2) x A; outside the blocks only
    // the classifier's input [4, 32] (no embedding), and the loss's two values and one maximum per sample.
    let a = 4.0 * 17.0 * 32.0 * 4.0;
    let all_reduce = 8.0 * a + 4.0 * 32.0 * 4.0 + 8.0 * 4.0;
    assert!(close(sent(&tp2.bytes, MeshDim::Tensor, "all-reduce"), all_reduce), "{:?}", tp2.bytes);
    assert!(close(all_reduce, 70_176.0), "what the runtime measures (tests/it/tensor_parallel_vit.rs)");
    assert!(close(sent(&tp2.bytes, MeshDim::Tensor, "all-gather"), 4.0 * 4.0), "{:?}", tp2.bytes);
}

/// What every rank of a ViT's tensor group computes whole (the stem: patch convolution, class token, positions;
/// the norms and residual adds) keeps whole activations; the rest is halved at TP 2.
#[test]
fn a_vit_keeps_its_replicated_stem_activations_whole_under_tensor_parallelism() {
    let spec = serde_json::json!({
        "image_size": 16, "patch_size": 4, "layers": 2, "hidden": 32, "heads": 4, "mlp_dim": 64, "classes": 10
    });
    let g = trainbench_graph::zoo::build(&ModelSpec::Vit(serde_json::from_value(spec).unwrap())).unwrap();
    let (tp1, tp2) = (
        predict_on(&g, 4, DataParallel::Single, 1, Mesh::flat()),
        predict_on(&g, 4, DataParallel::Single, 2, mesh(2, 1, 1)),
    );
    let roles = TensorShard::new(&g, 2, 0, false).unwrap().roles;
    let conv = g.nodes.iter().position(|n| matches!(n.op, trainbench_graph::Op::Conv { .. })).unwrap();
    assert_eq!(roles[conv], Role::Replicated, "the patch convolution runs whole on every rank");
    let a = trainbench_graph::analysis::analyze(&g);
    let whole: f64 = a
        .layers
        .iter()
        .enumerate()
        .filter(|(i, _)| roles[*i] == Role::Replicated)
        .map(|(_, l)| (l.saved_elements * 4 + l.saved_other_bytes) as f64)
        .sum::<f64>()
        * 4.0;
    assert!(whole > 4.0 * 3.0 * 16.0 * 16.0 * 4.0, "the convolution's input image at least: {whole}");
    let (one, two) = (tp1.stages[0].activations_bytes, tp2.stages[0].activations_bytes);
    assert!(close(two, one / 2.0 + whole / 2.0), "TP 2 {two}: half of TP 1's {one} plus half of the whole {whole}");
}

/// With sequence parallelism a ViT keeps only its stem whole (it builds the sequence): the blocks' norms and
/// residual adds are on sequence shards, the final norm is gathered whole once before the class token.
#[test]
fn a_sequence_parallel_vit_keeps_only_its_stem_whole_and_gathers_before_the_class_token() {
    let spec = serde_json::json!({
        "image_size": 12, "patch_size": 4, "layers": 2, "hidden": 32, "heads": 4, "mlp_dim": 64, "classes": 10
    });
    let g = trainbench_graph::zoo::build(&ModelSpec::Vit(serde_json::from_value(spec).unwrap())).unwrap();
    let tp2 = predict_on(&g, 4, DataParallel::Single, 2, mesh(2, 1, 1));
    let sp = predict_on(&g, 4, DataParallel::Single, 2, Mesh { sequence_parallel: true, ..mesh(2, 1, 1) });
    assert!(sp.stages[0].activations_bytes < tp2.stages[0].activations_bytes);
    // A = 4 samples x 10 tokens x 32 x 4 bytes: per layer 4 gathers and 4 reduce-scatters of half of A; the
    // final norm gathered whole (half of A) and the loss's maximum per sample; the classifier's input copied in
    // (its gradient all-reduced) and the loss's two values per sample.
    let a = 4.0 * 10.0 * 32.0 * 4.0;
    assert!(close(sent(&sp.bytes, MeshDim::Tensor, "reduce-scatter"), 2.0 * 4.0 * a / 2.0), "{:?}", sp.bytes);
    assert!(close(sent(&sp.bytes, MeshDim::Tensor, "all-gather"), 2.0 * 4.0 * a / 2.0 + a / 2.0 + 16.0));
    assert!(close(sent(&sp.bytes, MeshDim::Tensor, "all-gather"), 23_056.0), "tests/it/tensor_parallel_vit.rs");
}

/// A pipeline's step is its schedule replayed over the chunks' priced passes: the smoke GPT's last chunk carries
/// the head, so interleaving its 4 one-block chunks over 2 stages idles far more than the formula's equal chunks.
#[test]
fn a_pipeline_with_a_heavy_last_chunk_idles_more_than_the_formula() {
    let g = smoke();
    let m = Mesh { pipeline_schedule: PipelineSchedule::Interleaved1F1B, virtual_stages: 2, ..mesh(1, 2, 4) };
    let p = predict_on(&g, 8, DataParallel::Single, 2, m);
    let b = p.bubble.unwrap();
    assert!(close(b.formula_fraction, 1.0 / 9.0));
    assert!(b.fraction > b.formula_fraction + 0.1, "{b:?}");
    // The busiest stage computes every micro-batch of its chunks within the step.
    let busiest = p.stages.iter().map(|s| s.compute_s).fold(0.0, f64::max);
    assert!(p.step_time_s >= 4.0 * busiest * 0.99, "{} vs 4 x {busiest}", p.step_time_s);
}

#[test]
fn a_tensor_pipeline_mesh_prices_each_stages_tensor_traffic_and_takes_the_busiest() {
    // TP 2 x PP 2 on the smoke decoder, a global batch of 8 in 4 micro-batches of 2: A = 2 x 128 x 256 x 4
    // bytes. The cut by FLOPs puts 3 blocks and the embedding on stage 0, 1 block and the head on stage 1.
    let g = smoke();
    let p = predict_on(&g, 8, DataParallel::Single, 4, mesh(2, 2, 4));
    assert_eq!(p.stages.iter().map(|s| s.blocks.clone()).collect::<Vec<_>>(), [vec![[0, 3]], vec![[3, 4]]]);
    let a = 2.0 * 128.0 * 256.0 * 4.0;
    // Per micro-batch a block sends 4 all-reduces of 2 (1/2) A = A, an end 1 (the embedding's sum forward, the
    // head input's gradient backward). Stage 0: 4 x (3 x 4 + 1) A = 52 A. Stage 1: 4 x (4 + 1) A plus the
    // cross-entropy's 4 x 2 (1/2) x 8 x 256 tokens = 20 A + 8192: stage 0 is the busiest.
    assert!(close(sent(&p.bytes, MeshDim::Tensor, "all-reduce"), 52.0 * a), "{:?}", p.bytes);
    // The cross-entropy's maximum per token, on the head's stage only: 4 x (2 - 1) x 4 x 256.
    assert!(close(sent(&p.bytes, MeshDim::Tensor, "all-gather"), 4096.0), "{:?}", p.bytes);
    // One boundary: A per micro-batch each way, the busiest rank sending one of them: 4 A.
    assert!(close(sent(&p.bytes, MeshDim::Pipeline, "send-recv"), 4.0 * a), "{:?}", p.bytes);
    // Sequence parallelism: each all-reduce becomes an all-gather and a reduce-scatter of half its bytes each
    // (stage 0: 26 A each; stage 1: 10 A each, plus 4096 gathered); the all-reduces left are the
    // cross-entropy's (stage 1) and the sequence-split norms' partial gradients, summed once per step:
    // stage 0 2 x 3 norms of 256, stage 1 2 + 1 (the final norm): 2 (1/2) x 4 x 256 x norms.
    let sp = predict_on(&g, 8, DataParallel::Single, 4, Mesh { sequence_parallel: true, ..mesh(2, 2, 4) });
    assert!(close(sent(&sp.bytes, MeshDim::Tensor, "all-gather"), 26.0 * a), "{:?}", sp.bytes);
    assert!(close(sent(&sp.bytes, MeshDim::Tensor, "reduce-scatter"), 26.0 * a), "{:?}", sp.bytes);
    let norms = |n: f64| 4.0 * 256.0 * n;
    assert!(close(sent(&sp.bytes, MeshDim::Tensor, "all-reduce"), (8192.0 + norms(3.0)).max(norms(6.0))));
    assert!(close(sent(&sp.bytes, MeshDim::Pipeline, "send-recv"), 2.0 * a), "{:?}", sp.bytes);
}

#[test]
fn zero3_in_a_tensor_pipeline_exchanges_the_busiest_stages_weights_not_the_whole_models() {
    // ZeRO-3 over 2 replicas of TP 2 x PP 2 (8 ranks): the data dimension carries the busiest stage's share of
    // the tensor shard, so it sends less than ZeRO-3 over 2 replicas of TP 2 alone (the whole shard), and no
    // more than that stage's fraction of it allows.
    let g = smoke();
    let whole = predict_on(&g, 8, DataParallel::Zero3, 4, mesh(2, 1, 1));
    let staged = predict_on(&g, 8, DataParallel::Zero3, 8, mesh(2, 2, 4));
    let data = |p: &MeshPrediction| {
        p.bytes.iter().filter(|b| b.dimension == MeshDim::Data).map(|b| b.bytes_per_rank).sum::<f64>()
    };
    let busiest = staged.stages.iter().map(|s| s.parameters).fold(0.0, f64::max);
    let all = whole.stages[0].parameters;
    assert!(busiest < all, "{busiest} of {all}");
    let (a, b) = (data(&whole), data(&staged));
    // The busiest stage's fp32 gradients reduce-scattered once and its weights gathered twice (forward and
    // backward), each ring sending half over 2 replicas: 3 x 1/2 x 4 bytes per parameter it holds (its
    // replicated norms' few elements aside).
    assert!((b / (6.0 * busiest) - 1.0).abs() < 1e-3, "data bytes {b} for a stage of {busiest} parameters");
    assert!(b < a, "data bytes {b} in the pipeline against {a} without");
}

/// One rank's kept activations are the whole-model estimate's, in bf16 too: the tensors autocast keeps in fp32
/// (the residual stream, the norms' statistics, the loss's log-probabilities) at 4 bytes, the rest at 2.
#[test]
fn one_ranks_bf16_activations_are_the_whole_models_estimate_with_its_fp32_share() {
    let g = smoke();
    let profile = ProfileValidator::new().unwrap().resolve("h100").unwrap().file;
    let adamw = serde_json::from_value::<OptimizerSpec>(serde_json::json!({"kind": "adamw"})).unwrap();
    let setting = Setting {
        batch: 4,
        precision: Precision::Bf16,
        optimizer: adamw.clone(),
        topology: Topology { mesh: Mesh::flat(), ..Topology::on_one_node(DataParallel::Single, 1) },
        schedule: Default::default(),
        numerics: Default::default(),
        pipeline_layers: Vec::new(),
        steps_run: None,
    };
    let one = predict_mesh(&AnalyzedGraph::new(&g), &setting, &profile, &Terms::all()).unwrap();
    let a = trainbench_graph::analysis::analyze(&g);
    assert!(a.activations.saved_wide_elements_per_sample > 0);
    let whole = trainbench_graph::analysis::memory_estimate(&a, 4, Precision::Bf16, &adamw);
    assert!(close(one.stages[0].activations_bytes, whole.activations as f64), "{:?} {whole:?}", one.stages[0]);
}
