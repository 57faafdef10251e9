//! Tests of LoRA's graph transform: exact counts against PEFT, the refusals at their field, frozen analysis.

use super::*;
use crate::analysis::{analyze, memory_estimate};
use crate::model::{FfnActivation, GptSpec, ModelSpec, NormKind, PositionKind};
use crate::training::{OptimizerSpec, Precision};
use crate::zoo;

fn llama2_70b(seq_len: usize) -> Graph {
    let spec = GptSpec {
        layers: 80,
        d_model: 8192,
        heads: 64,
        kv_heads: Some(8),
        head_dim: None,
        ffn: Some(28_672),
        activation: FfnActivation::Swiglu,
        norm: NormKind::Rmsnorm,
        norm_eps: 1e-5,
        positions: PositionKind::Rotary,
        rope_theta: Some(10_000.0),
        max_positions: None,
        vocab: 32_000,
        seq_len,
        tied_embeddings: false,
        bias: false,
        dropout: 0.0,
        qk_norm: false,
        moe: None,
    };
    zoo::build(&ModelSpec::Gpt(spec)).unwrap()
}

fn small(activation: FfnActivation) -> Graph {
    let mut spec: GptSpec =
        serde_json::from_str(r#"{"layers": 2, "d_model": 32, "heads": 4, "vocab": 50, "seq_len": 8}"#).unwrap();
    spec.activation = activation;
    zoo::build(&ModelSpec::Gpt(spec)).unwrap()
}

fn lora(rank: usize, targets: &[LoraTarget]) -> LoraSpec {
    LoraSpec {
        rank,
        alpha: Some(2.0 * rank as f64),
        dropout: 0.0,
        targets: targets.to_vec(),
        base_dtype: Default::default(),
    }
}

const QKVO: [LoraTarget; 4] = [LoraTarget::Q, LoraTarget::K, LoraTarget::V, LoraTarget::O];

#[test]
fn llama2_70b_with_rank_16_on_the_attention_trains_what_peft_trains() {
    let base = llama2_70b(16);
    let adapted = adapt(&base, &lora(16, &QKVO)).unwrap();
    let a = analyze(&adapted);
    // PEFT's get_peft_model on LlamaForCausalLM from Llama-2-70b's config: print_trainable_parameters.
    assert_eq!((a.trainable_parameters, a.parameters), (65_536_000, 68_976_648_192 + 65_536_000));
    assert_eq!(analyze(&base).parameters, 68_976_648_192);
    assert_eq!(adapted.blocks.len(), 80);
    assert_eq!(adapted.nodes.len(), base.nodes.len() + 80 * 4 * 2);
}

#[test]
fn frozen_weights_hold_no_gradient_and_no_optimizer_state() {
    let adapted = adapt(&small(FfnActivation::Swiglu), &lora(4, &[LoraTarget::Q, LoraTarget::V])).unwrap();
    let a = analyze(&adapted);
    // q and v: 32 -> 32, rank 4: 4 x (32 + 32) each, in two layers.
    assert_eq!(a.trainable_parameters, 2 * 2 * 4 * 64);
    let adam = OptimizerSpec::Adam { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 };
    let m = memory_estimate(&a, 2, Precision::Fp32, &adam);
    assert_eq!(m.gradients, 4 * a.trainable_parameters);
    assert_eq!(m.optimizer_state, 2 * 4 * a.trainable_parameters);
    assert_eq!(m.weights, 4 * (a.parameters + a.buffers));
    let full = analyze(&small(FfnActivation::Swiglu));
    assert_eq!(full.parameters + a.trainable_parameters, a.parameters);
    assert!(a.layers.iter().filter(|l| l.op == "lora").all(|l| !l.frozen && l.parameters > 0));
    assert!(a.layers.iter().filter(|l| l.parameters > 0 && l.op != "lora").all(|l| l.frozen));
}

#[test]
fn a_bf16_base_takes_two_bytes_per_frozen_weight_and_no_16_bit_copy() {
    let mut spec = lora(4, &[LoraTarget::Q, LoraTarget::V]);
    let fp32 = analyze(&adapt(&small(FfnActivation::Swiglu), &spec).unwrap());
    spec.base_dtype = FrozenDtype::Bf16;
    let bf16 = analyze(&adapt(&small(FfnActivation::Swiglu), &spec).unwrap());
    assert_eq!(bf16.frozen_dtype, FrozenDtype::Bf16);
    let frozen = bf16.parameters - bf16.trainable_parameters;
    let adam = OptimizerSpec::Adam { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 };
    let (m32, m16) =
        (memory_estimate(&fp32, 2, Precision::Fp32, &adam), memory_estimate(&bf16, 2, Precision::Fp32, &adam));
    assert_eq!(m32.weights - m16.weights, 2 * frozen, "the frozen weights at 2 bytes instead of 4");
    assert_eq!((m16.gradients, m16.optimizer_state), (m32.gradients, m32.optimizer_state));
    // Under autocast only the fp32 weights (the adapters) get a 16-bit copy.
    let amp = memory_estimate(&bf16, 2, Precision::Bf16, &adam);
    assert_eq!(
        amp.weights,
        4 * (bf16.trainable_parameters + bf16.buffers) + 2 * frozen + 2 * bf16.trainable_parameters
    );
    // The JSON names the base's type only when it is not the default.
    assert!(serde_json::to_string(&bf16).unwrap().contains("\"frozen_dtype\":\"bf16\""));
    assert!(!serde_json::to_string(&fp32).unwrap().contains("frozen_dtype"));
}

#[test]
fn the_backward_of_a_frozen_layer_is_its_input_gradient_only() {
    let base = small(FfnActivation::Gelu);
    let adapted = adapt(&base, &lora(4, &[LoraTarget::Q])).unwrap();
    let (a, full) = (analyze(&adapted), analyze(&base));
    let layer = |a: &crate::analysis::Analysis, name: &str| a.layers.iter().find(|l| l.name == name).cloned().unwrap();
    // Layer 1's up projection reads a gradient-carrying input: the input gradient only (1 x, not 2 x).
    let (up, up_full) = (layer(&a, "layers.1.mlp.up_proj"), layer(&full, "layers.1.mlp.up_proj"));
    assert_eq!((up.forward_flops, up.backward_flops), (up_full.forward_flops, up_full.forward_flops));
    assert_eq!(up_full.backward_flops, 2 * up_full.forward_flops);
    // Layer 0's key projection reads the frozen embedding's norm: no backward at all.
    assert_eq!(layer(&a, "layers.0.attn.k_proj").backward_flops, 0);
    // The adapter: 8 tokens x 2 x 4 x (32 + 32) forward; B's two products, A's weight gradient, no input grad.
    let q = layer(&a, "layers.0.attn.q_proj.lora");
    assert_eq!((q.forward_flops, q.backward_flops), (8 * 2 * 4 * 64, 8 * 2 * 4 * (2 * 32 + 32)));
    assert_eq!(a.model_flops.convention, crate::analysis::LORA_DECODER_CONVENTION);
    let matmul_frozen = full.model_flops.per_token.unwrap() - 12 * 2 * 4 * 8 * 8;
    assert_eq!(a.model_flops.per_token.unwrap(), matmul_frozen / 6 * 4 + 6 * 2 * 4 * 64 + 12 * 2 * 4 * 8 * 8);
}

#[test]
fn readers_of_a_targeted_projection_read_the_adapted_sum() {
    let adapted = adapt(&small(FfnActivation::Swiglu), &lora(2, &[LoraTarget::O, LoraTarget::Down])).unwrap();
    let id = |name: &str| adapted.nodes.iter().position(|n| n.name == name).unwrap();
    assert_eq!(adapted.nodes[id("layers.0.attn_residual")].inputs[1], id("layers.0.attn.o_proj.adapted"));
    assert_eq!(adapted.nodes[id("layers.0.attn.o_proj.lora")].inputs, [id("layers.0.attn.sdpa")]);
    let last = &adapted.blocks[1];
    assert_eq!((last.input, last.last), (adapted.blocks[0].last, id("layers.1.mlp_residual")));
    assert_eq!(adapted.losses, [id("loss")]);
}

#[test]
fn refusals_name_the_field_the_value_and_the_fix() {
    let gelu = small(FfnActivation::Gelu);
    let e = adapt(&gelu, &lora(4, &[LoraTarget::Gate])).unwrap_err();
    assert_eq!(e.field, "targets");
    assert!(e.message.contains("\"gate\"") && e.message.contains("gate_proj"), "{e}");
    assert!(e.hint.contains("\"q\", \"k\", \"v\", \"o\", \"up\", \"down\""), "{}", e.hint);
    assert_eq!(adapt(&gelu, &lora(0, &QKVO)).unwrap_err().field, "rank");
    let e = adapt(&gelu, &lora(33, &QKVO)).unwrap_err();
    assert_eq!(e.field, "rank");
    assert!(e.message.contains("rank = 33") && e.hint.contains("at most 32"), "{e}");
    assert_eq!(adapt(&gelu, &lora(4, &[])).unwrap_err().field, "targets");
    assert_eq!(adapt(&gelu, &lora(4, &[LoraTarget::Q, LoraTarget::Q])).unwrap_err().field, "targets");
    let bad = |f: fn(&mut LoraSpec)| {
        let mut s = lora(4, &QKVO);
        f(&mut s);
        adapt(&gelu, &s).unwrap_err().field
    };
    assert_eq!(bad(|s| s.alpha = Some(0.0)), "alpha");
    assert_eq!(bad(|s| s.dropout = 1.0), "dropout");
    let mlp = zoo::build(&ModelSpec::Mlp(crate::model::MlpSpec { inputs: 6, hidden: vec![5], classes: 4 })).unwrap();
    let e = adapt(&mlp, &lora(1, &[LoraTarget::Q])).unwrap_err();
    assert!(e.hint.contains("remove [training.lora]"), "{}", e.hint);
}
