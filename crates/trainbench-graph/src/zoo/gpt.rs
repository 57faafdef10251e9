//! The decoder-only transformer (`gpt`): token embedding (plus learned positions, or rotary queries and
//! keys), pre-norm decoder layers — norm, causal (grouped-query) attention, residual; norm, GELU or SwiGLU
//! feed-forward, residual — a final norm and the language-model head, tied or not. Each decoder layer is a
//! recomputable [`Block`](crate::graph::Block). Next-token cross-entropy at every position: the labels input
//! holds the shifted ids, so no position is padding.
//!
//! Counts (on the meta device, `transformers` 4.x): GPT-2 small 124,439,808 parameters
//! (`GPT2LMHeadModel`), Llama-3.2-1B 1,235,814,400 and Llama-3.1-8B 8,030,261,248 (`LlamaForCausalLM`);
//! with `[model.moe]` (one [`Op::Moe`](crate::graph::Op::Moe) node per mixture-of-experts layer, named `mlp`)
//! and `qk_norm`, Mixtral-8x7B 46,702,792,704 (`MixtralForCausalLM`) and Qwen3-30B-A3B 30,532,122,624
//! (`Qwen3MoeForCausalLM`).

use crate::builder::{GraphBuilder, ShapeError};
use crate::graph::{Activation, DecoderDims, Graph, InputKind, LossKind, NodeId};
use crate::model::{FfnActivation, GptSpec, NormKind, PositionKind};

use super::common::{ZooError, at_least, dropout, probability};

/// Rotary base when `rope_theta` is left out (RoFormer's).
const DEFAULT_ROPE_THETA: f64 = 10_000.0;

/// The resolved shape of a decoder: every default applied and checked.
struct Dims {
    kv_heads: usize,
    head_dim: usize,
    ffn: usize,
    eps: f32,
    theta: Option<f32>,
    max_positions: Option<usize>,
}

fn dims(s: &GptSpec) -> Result<Dims, ZooError> {
    for (field, value) in
        [("layers", s.layers), ("d_model", s.d_model), ("heads", s.heads), ("vocab", s.vocab), ("seq_len", s.seq_len)]
    {
        at_least(field, value, 1)?;
    }
    probability("dropout", s.dropout)?;
    let kv_heads = s.kv_heads.unwrap_or(s.heads);
    if kv_heads == 0 || s.heads % kv_heads != 0 {
        return Err(ZooError::field(
            "kv_heads",
            format!("kv_heads = {kv_heads} must be at least 1 and divide heads = {}", s.heads),
            Some("use a divisor of heads (heads itself for multi-head attention, 1 for multi-query)"),
        ));
    }
    let head_dim = match s.head_dim {
        Some(d) => {
            at_least("head_dim", d, 1)?;
            d
        }
        None if s.d_model % s.heads == 0 => s.d_model / s.heads,
        None => {
            return Err(ZooError::field(
                "heads",
                format!("heads = {} does not divide d_model = {}", s.heads, s.d_model),
                Some("set head_dim, or pick heads dividing d_model"),
            ));
        }
    };
    let ffn = s.ffn.unwrap_or(4 * s.d_model);
    at_least("ffn", ffn, 1)?;
    if !(s.norm_eps.is_finite() && s.norm_eps > 0.0) {
        return Err(ZooError::field("norm_eps", format!("norm_eps = {} must be above 0", s.norm_eps), None));
    }
    let (theta, max_positions) = match s.positions {
        PositionKind::Rotary => {
            if let Some(m) = s.max_positions {
                return Err(ZooError::field(
                    "max_positions",
                    format!("max_positions = {m} sizes a learned table, but positions = \"rotary\""),
                    Some("remove max_positions, or set positions = \"learned\""),
                ));
            }
            if head_dim % 2 != 0 {
                return Err(ZooError::field(
                    "head_dim",
                    format!("rotary needs an even head_dim, got {head_dim}"),
                    None,
                ));
            }
            let theta = s.rope_theta.unwrap_or(DEFAULT_ROPE_THETA);
            if !(theta.is_finite() && theta > 1.0) {
                return Err(ZooError::field("rope_theta", format!("rope_theta = {theta} must be above 1"), None));
            }
            (Some(theta as f32), None)
        }
        PositionKind::Learned => {
            if let Some(t) = s.rope_theta {
                return Err(ZooError::field(
                    "rope_theta",
                    format!("rope_theta = {t} applies to rotary positions, but positions = \"learned\""),
                    Some("remove rope_theta, or set positions = \"rotary\""),
                ));
            }
            let m = s.max_positions.unwrap_or(s.seq_len);
            if m < s.seq_len {
                return Err(ZooError::field(
                    "max_positions",
                    format!("max_positions = {m} is shorter than seq_len = {}", s.seq_len),
                    Some("raise max_positions to at least seq_len"),
                ));
            }
            (None, Some(m))
        }
    };
    Ok(Dims { kv_heads, head_dim, ffn, eps: s.norm_eps as f32, theta, max_positions })
}

fn norm(b: &mut GraphBuilder, name: &str, x: NodeId, s: &GptSpec, d: &Dims) -> Result<NodeId, ShapeError> {
    match s.norm {
        NormKind::Layernorm => b.layer_norm(name, x, d.eps),
        NormKind::Rmsnorm => b.rms_norm(name, x, d.eps),
    }
}

/// RMSNorm of each head of `[T, heads * head_dim]` over its `head_dim` (Qwen3's query and key norms).
fn head_norm(b: &mut GraphBuilder, name: &str, x: NodeId, heads: usize, d: &Dims) -> Result<NodeId, ShapeError> {
    let t = b.shape(x).0[0];
    let split = b.reshape(&format!("{name}_heads"), x, &[t, heads, d.head_dim])?;
    let n = b.rms_norm(name, split, d.eps)?;
    b.reshape(&format!("{name}_merged"), n, &[t, heads * d.head_dim])
}

/// Causal self-attention: q, k, v projections, rotary on q and k, the fused attention, the output projection.
fn attention(b: &mut GraphBuilder, x: NodeId, s: &GptSpec, d: &Dims) -> Result<NodeId, ShapeError> {
    b.push("attn");
    let mut q = b.linear("q_proj", x, s.heads * d.head_dim, s.bias)?;
    let mut k = b.linear("k_proj", x, d.kv_heads * d.head_dim, s.bias)?;
    let v = b.linear("v_proj", x, d.kv_heads * d.head_dim, s.bias)?;
    if s.qk_norm {
        q = head_norm(b, "q_norm", q, s.heads, d)?;
        k = head_norm(b, "k_norm", k, d.kv_heads, d)?;
    }
    if let Some(theta) = d.theta {
        q = b.rotary("q_rotary", q, s.heads, theta)?;
        k = b.rotary("k_rotary", k, d.kv_heads, theta)?;
    }
    let a = b.sdpa("sdpa", [q, k, v], s.heads, d.kv_heads, true)?;
    let o = b.linear("o_proj", a, s.d_model, s.bias)?;
    b.pop();
    Ok(o)
}

fn feed_forward(b: &mut GraphBuilder, x: NodeId, s: &GptSpec, d: &Dims) -> Result<NodeId, ShapeError> {
    b.push("mlp");
    let h = match s.activation {
        FfnActivation::Gelu => {
            let up = b.linear("up_proj", x, d.ffn, s.bias)?;
            b.act("gelu", up, Activation::Gelu)?
        }
        FfnActivation::Swiglu => {
            let gate = b.linear("gate_proj", x, d.ffn, s.bias)?;
            let gate = b.act("silu", gate, Activation::Silu)?;
            let up = b.linear("up_proj", x, d.ffn, s.bias)?;
            b.mul("gated", &[gate, up])?
        }
    };
    let y = b.linear("down_proj", h, s.d_model, s.bias)?;
    b.pop();
    Ok(y)
}

/// Build the decoder with its next-token loss.
pub(crate) fn build(s: &GptSpec) -> Result<Graph, ZooError> {
    let d = dims(s)?;
    let moe = super::gpt_moe::check(s)?;
    let t = s.seq_len;
    let mut b = GraphBuilder::new("gpt");
    let ids = b.input("input_ids", &[t], InputKind::Tokens { vocab: s.vocab })?;
    let labels = b.input("labels", &[t], InputKind::Labels { classes: s.vocab })?;
    let embed = b.embedding("embed_tokens", ids, s.vocab, s.d_model)?;
    let mut x = match d.max_positions {
        Some(m) => b.learned_positions("embed_positions", embed, m)?,
        None => embed,
    };
    x = dropout(&mut b, "embed_dropout", x, s.dropout)?;
    for i in 0..s.layers {
        b.push(format!("layers.{i}"));
        b.begin_block("", x);
        let h = norm(&mut b, "attn_norm", x, s, &d)?;
        let a = attention(&mut b, h, s, &d)?;
        let a = dropout(&mut b, "attn_dropout", a, s.dropout)?;
        let r = b.add_nodes("attn_residual", &[x, a])?;
        let h = norm(&mut b, "mlp_norm", r, s, &d)?;
        let f = match moe {
            Some(m) if m.is_moe_layer(i) => b.moe("mlp", h, super::gpt_moe::op(m, s.d_model))?,
            Some(_) | None => feed_forward(&mut b, h, s, &d)?,
        };
        let f = dropout(&mut b, "mlp_dropout", f, s.dropout)?;
        x = b.add_nodes("mlp_residual", &[r, f])?;
        b.end_block()?;
        b.pop();
    }
    let x = norm(&mut b, "norm", x, s, &d)?;
    let logits = b.linear("lm_head", x, s.vocab, false)?;
    if s.tied_embeddings {
        b.tie(logits, embed)?;
    }
    b.loss("loss", LossKind::CrossEntropy, &[logits, labels])?;
    b.set_decoder(DecoderDims { layers: s.layers, heads: s.heads, head_dim: d.head_dim, seq_len: t });
    Ok(b.finish(t as u64, "tokens")?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::analysis::analyze;
    use crate::params::{Init, TIED_TABLE_STD, graph_tensors, node_tensors};
    use crate::zoo::common::shape;

    fn gpt2_small() -> GptSpec {
        serde_json::from_str("{}").unwrap()
    }

    fn llama(layers: usize, d_model: usize, kv: usize, ffn: usize, tied: bool) -> GptSpec {
        GptSpec {
            layers,
            d_model,
            heads: 32,
            kv_heads: Some(kv),
            head_dim: None,
            ffn: Some(ffn),
            activation: FfnActivation::Swiglu,
            norm: NormKind::Rmsnorm,
            norm_eps: 1e-5,
            positions: PositionKind::Rotary,
            rope_theta: Some(500_000.0),
            max_positions: None,
            vocab: 128_256,
            seq_len: 16,
            tied_embeddings: tied,
            bias: false,
            dropout: 0.0,
            qk_norm: false,
            moe: None,
        }
    }

    #[test]
    fn parameter_counts_equal_the_reference_models() {
        let g = build(&gpt2_small()).unwrap();
        let a = analyze(&g);
        assert_eq!(a.parameters, 124_439_808);
        // torch.utils.flop_counter on GPT2LMHeadModel at 1024 tokens (scripts/check_zoo.py).
        assert_eq!((a.flops.forward_per_sample, a.flops.train_per_sample), (291_648_307_200, 874_944_921_600));
        assert_eq!(g.blocks.len(), 12);
        assert_eq!(shape(&g, "lm_head"), [1024, 50_257]);
        let llama_1b = build(&GptSpec { seq_len: 2048, ..llama(16, 2048, 8, 8192, true) }).unwrap();
        let a = analyze(&llama_1b);
        assert_eq!(a.parameters, 1_235_814_400);
        // LlamaForCausalLM from Llama-3.2-1B's config at 2048 tokens, the same counter.
        assert_eq!((a.flops.forward_per_sample, a.flops.train_per_sample), (5_611_374_772_224, 16_834_124_316_672));
        assert_eq!(analyze(&build(&llama(32, 4096, 8, 14_336, false)).unwrap()).parameters, 8_030_261_248);
    }

    #[test]
    fn inconsistent_fields_are_refused_at_the_field() {
        let e = build(&GptSpec { kv_heads: Some(5), ..gpt2_small() }).unwrap_err();
        assert_eq!(e.path, ["kv_heads"]);
        let e = build(&GptSpec { rope_theta: Some(1e4), ..gpt2_small() }).unwrap_err();
        assert_eq!(e.path, ["rope_theta"]);
        let e = build(&GptSpec { max_positions: Some(8), ..gpt2_small() }).unwrap_err();
        assert_eq!(e.path, ["max_positions"]);
        let e = build(&GptSpec { max_positions: Some(2048), ..llama(1, 256, 8, 512, true) }).unwrap_err();
        assert_eq!(e.path, ["max_positions"]);
    }

    /// A token table a head is tied to starts N(0, 0.02), as GPT-2 and BERT start theirs; an untied table keeps
    /// PyTorch's N(0, 1); the head allocates nothing of its own.
    #[test]
    fn a_table_a_head_is_tied_to_starts_as_the_references_that_tie() {
        let gpt = |tied: bool| {
            let small =
                GptSpec { layers: 1, d_model: 16, heads: 2, ffn: Some(32), vocab: 50, seq_len: 4, ..gpt2_small() };
            build(&GptSpec { tied_embeddings: tied, ..small }).unwrap()
        };
        for (tied, std) in [(true, TIED_TABLE_STD), (false, 1.0)] {
            let g = gpt(tied);
            let table =
                g.nodes.iter().position(|n| matches!(n.op, crate::graph::Op::Embedding { vocab: 50, .. })).unwrap();
            let weight = node_tensors(&g, table).into_iter().find(|d| d.local == "weight").unwrap();
            assert_eq!(weight.init, Init::Normal { std }, "tied {tied}");
            let from_graph = graph_tensors(&g).into_iter().find(|(id, d)| *id == table && d.local == "weight");
            assert_eq!(from_graph.map(|(_, d)| d.init), Some(weight.init), "tied {tied}");
            let heads = g.nodes.iter().filter(|n| n.tied_to == Some(table)).count();
            assert_eq!(heads, usize::from(tied), "tied {tied}");
        }
        assert!(node_tensors(&gpt(true), usize::MAX).is_empty());
    }
}
