//! Tests of the mixture-of-experts decoder: exact counts against transformers' reference models (total and
//! active), model FLOPs from the active parameters, and `[model.moe]` refused at the offending field.

use crate::analysis::{MOE_DECODER_CONVENTION, analyze};
use crate::graph::{Graph, MoeRouter};
use crate::model::{GptSpec, ModelSpec, MoeSpec};
use crate::zoo::{self, ZooError};

fn gpt(json: &str) -> GptSpec {
    serde_json::from_str(json).unwrap()
}

fn build(spec: GptSpec) -> Result<Graph, ZooError> {
    zoo::build(&ModelSpec::Gpt(spec))
}

fn moe(experts: usize, top_k: usize, expert_ffn: usize) -> MoeSpec {
    MoeSpec {
        experts,
        top_k,
        expert_ffn,
        shared_experts: 0,
        every: 1,
        first_dense: 0,
        router: MoeRouter::Softmax,
        capacity_factor: None,
        aux_loss: 0.0,
    }
}

const DECODER: &str = r#"{"activation": "swiglu", "norm": "rmsnorm", "positions": "rotary", "rope_theta": 1e6,
    "tied_embeddings": false, "bias": false, "seq_len": 16"#;

/// Mixtral-8x7B (`MixtralForCausalLM` from mistralai/Mixtral-8x7B-v0.1's config).
pub(crate) fn mixtral_8x7b() -> GptSpec {
    let mut s = gpt(&format!(
        r#"{DECODER}, "layers": 32, "d_model": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "vocab": 32000}}"#
    ));
    s.moe = Some(moe(8, 2, 14_336));
    s
}

/// Qwen3-30B-A3B (`Qwen3MoeForCausalLM` from Qwen/Qwen3-30B-A3B's config).
pub(crate) fn qwen3_30b_a3b() -> GptSpec {
    let mut s = gpt(&format!(
        r#"{DECODER}, "layers": 48, "d_model": 2048, "heads": 32, "kv_heads": 4, "head_dim": 128, "ffn": 6144,
        "vocab": 151936, "norm_eps": 1e-6, "qk_norm": true}}"#
    ));
    s.moe = Some(moe(128, 8, 768));
    s
}

#[test]
fn counts_equal_the_reference_models_total_and_active() {
    let a = analyze(&build(mixtral_8x7b()).unwrap());
    assert_eq!(a.parameters, 46_702_792_704);
    // 12.9B active: the 6 experts a token skips in each of 32 layers (3 x 4096 x 14336 each) left out.
    assert_eq!(a.active_parameters, 46_702_792_704 - 32 * 6 * 3 * 4096 * 14_336);
    assert_eq!(a.active_parameters, 12_879_925_248);
    let a = analyze(&build(qwen3_30b_a3b()).unwrap());
    assert_eq!(a.parameters, 30_532_122_624);
    assert_eq!(a.active_parameters, 3_353_032_704);
    assert_eq!(a.model_flops.convention, MOE_DECODER_CONVENTION);
    // 6 x active matmul parameters (the token embedding is a lookup) + PaLM's attention term.
    let embed = 151_936 * 2048;
    let attention = 12 * 48 * 32 * 128 * 16;
    assert_eq!(a.model_flops.per_token, Some(6 * (3_353_032_704 - embed) + attention));
}

#[test]
fn qk_norm_normalises_each_head_and_moe_layers_follow_every_and_first_dense() {
    let g = build(qwen3_30b_a3b()).unwrap();
    let q_norm = g.node("layers.0.attn.q_norm").unwrap();
    assert_eq!(q_norm.shape.0, [16, 32, 128]);
    assert_eq!(crate::params::tensors(q_norm)[0].shape, [128]);
    let mut s = mixtral_8x7b();
    s.layers = 6;
    s.moe = Some(MoeSpec { every: 2, first_dense: 1, shared_experts: 1, ..moe(8, 2, 64) });
    let g = build(s).unwrap();
    let kinds: Vec<&str> =
        (0..6).map(|i| g.node(&format!("layers.{i}.mlp")).map_or("dense", |n| n.op.kind_name())).collect();
    assert_eq!(kinds, ["dense", "moe", "dense", "moe", "dense", "moe"]);
    let shared = crate::params::tensors(g.node("layers.1.mlp").unwrap());
    assert_eq!(shared.last().unwrap().shape, [4096, 64]);
}

#[test]
fn moe_model_flops_count_the_active_experts_only() {
    // Six experts of width 32, top-2, beside a dense twin of width 66: the router's 6 x 64 weights are the
    // 2 x 3 x 64 of the twin's extra width, so both compute with the same parameters per token.
    let base = r#""layers": 2, "d_model": 64, "heads": 4, "vocab": 100, "activation": "swiglu", "seq_len": 16,
        "bias": false"#;
    let mut sparse = gpt(&format!("{{{base}}}"));
    sparse.moe = Some(moe(6, 2, 32));
    let dense = gpt(&format!(r#"{{{base}, "ffn": 66}}"#));
    let (s, d) = (analyze(&build(sparse).unwrap()), analyze(&build(dense).unwrap()));
    assert_eq!(s.active_parameters, d.parameters);
    assert!(s.parameters > s.active_parameters);
    assert_eq!(s.model_flops.per_token, d.model_flops.per_token);
    // The counter's FLOPs too: the router and two of six experts per token, never all six.
    assert_eq!(s.flops.forward_per_sample, d.flops.forward_per_sample);
}

#[test]
fn inconsistent_moe_fields_are_refused_at_the_field() {
    let refused = |m: MoeSpec| {
        let mut s =
            gpt(r#"{"layers": 2, "d_model": 32, "heads": 4, "vocab": 50, "seq_len": 8, "activation": "swiglu"}"#);
        s.moe = Some(m);
        build(s).unwrap_err()
    };
    let e = refused(moe(4, 5, 16));
    assert_eq!(e.path, ["moe", "top_k"]);
    assert!(e.message.contains("top_k = 5") && e.message.contains("experts = 4"), "{}", e.message);
    assert!(e.hint.is_some());
    assert_eq!(refused(moe(0, 1, 16)).path, ["moe", "experts"]);
    assert_eq!(refused(moe(4, 2, 0)).path, ["moe", "expert_ffn"]);
    assert_eq!(refused(MoeSpec { every: 0, ..moe(4, 2, 16) }).path, ["moe", "every"]);
    assert_eq!(refused(MoeSpec { first_dense: 2, ..moe(4, 2, 16) }).path, ["moe", "first_dense"]);
    assert_eq!(refused(MoeSpec { capacity_factor: Some(0.0), ..moe(4, 2, 16) }).path, ["moe", "capacity_factor"]);
    assert_eq!(refused(MoeSpec { aux_loss: -1.0, ..moe(4, 2, 16) }).path, ["moe", "aux_loss"]);
    let mut s = gpt(r#"{"layers": 2, "d_model": 32, "heads": 4, "vocab": 50, "seq_len": 8}"#);
    s.moe = Some(moe(4, 2, 16));
    assert_eq!(build(s).unwrap_err().path, ["activation"]);
}
