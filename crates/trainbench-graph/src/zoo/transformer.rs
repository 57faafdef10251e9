//! Transformer encoder-decoder (Vaswani et al.), laid out as PyTorch's `nn.Transformer` (post-norm layers,
//! ReLU feed-forward, a final LayerNorm after each stack) with token embeddings scaled by sqrt(d_model),
//! fixed sinusoidal positions and an output projection without bias.
//!
//! Shared embeddings (the paper's setting for WMT14 en-de, one BPE vocabulary) are ONE parameter: the
//! decoder embedding and the output projection are tied ([`Node::tied_to`](crate::graph::Node::tied_to))
//! to the encoder embedding `encoder.embedding`.

use crate::builder::{GraphBuilder, ShapeError};
use crate::graph::{Activation, Graph, InputKind, LossKind, NodeId};
use crate::model::TransformerSpec;

use super::common::{ZooError, at_least, probability};

/// LayerNorm epsilon of `nn.Transformer`.
const EPS: f32 = 1e-5;

/// Feed-forward sub-layer: linear1 -> ReLU -> dropout -> linear2.
fn feed_forward(b: &mut GraphBuilder, x: NodeId, ffn: usize, p: f64) -> Result<NodeId, ShapeError> {
    let d = b.shape(x).last();
    let y = b.linear("linear1", x, ffn, true)?;
    let y = b.act("relu", y, Activation::Relu)?;
    let y = b.dropout("dropout", y, p)?;
    b.linear("linear2", y, d, true)
}

/// `x = norm(x + dropout(sublayer))`, post-norm residual.
fn residual(b: &mut GraphBuilder, i: usize, x: NodeId, y: NodeId, p: f64) -> Result<NodeId, ShapeError> {
    let y = b.dropout(&format!("dropout{i}"), y, p)?;
    let s = b.add_nodes(&format!("add{i}"), &[x, y])?;
    b.layer_norm(&format!("norm{i}"), s, EPS)
}

fn encoder_layer(b: &mut GraphBuilder, x: NodeId, s: &TransformerSpec) -> Result<NodeId, ShapeError> {
    let a = b.attention("self_attn", x, x, s.heads, false)?;
    let x = residual(b, 1, x, a, s.dropout)?;
    let f = feed_forward(b, x, s.ffn, s.dropout)?;
    residual(b, 2, x, f, s.dropout)
}

fn decoder_layer(b: &mut GraphBuilder, x: NodeId, memory: NodeId, s: &TransformerSpec) -> Result<NodeId, ShapeError> {
    let a = b.attention("self_attn", x, x, s.heads, true)?;
    let x = residual(b, 1, x, a, s.dropout)?;
    let a = b.attention("multihead_attn", x, memory, s.heads, false)?;
    let x = residual(b, 2, x, a, s.dropout)?;
    let f = feed_forward(b, x, s.ffn, s.dropout)?;
    residual(b, 3, x, f, s.dropout)
}

/// Build the Transformer with its cross-entropy loss over target tokens.
pub(crate) fn build(s: &TransformerSpec) -> Result<Graph, ZooError> {
    at_least("vocab", s.vocab, 2)?;
    at_least("encoder_layers", s.encoder_layers, 1)?;
    at_least("decoder_layers", s.decoder_layers, 1)?;
    at_least("d_model", s.d_model, 2)?;
    at_least("heads", s.heads, 1)?;
    at_least("ffn", s.ffn, 1)?;
    at_least("seq_len", s.seq_len, 1)?;
    probability("dropout", s.dropout)?;
    if s.d_model % s.heads != 0 || s.d_model % 2 != 0 {
        return Err(ZooError::field(
            "heads",
            format!("heads = {} must divide d_model = {} (and d_model must be even)", s.heads, s.d_model),
            None,
        ));
    }
    let (t, d) = (s.seq_len, s.d_model);
    let scale = (d as f32).sqrt();
    let mut b = GraphBuilder::new("transformer");
    let src = b.input("source", &[t], InputKind::Tokens { vocab: s.vocab })?;
    let tgt = b.input("target_in", &[t], InputKind::Tokens { vocab: s.vocab })?;
    let labels = b.input("target_out", &[t], InputKind::Labels { classes: s.vocab })?;

    b.push("encoder");
    let src_emb = b.embedding("embedding", src, s.vocab, d)?;
    let mut x = b.sinusoidal_positions("positions", src_emb, scale)?;
    x = b.dropout("dropout", x, s.dropout)?;
    for i in 0..s.encoder_layers {
        b.push(format!("layers.{i}"));
        x = encoder_layer(&mut b, x, s)?;
        b.pop();
    }
    let memory = b.layer_norm("norm", x, EPS)?;
    b.pop();

    b.push("decoder");
    let tgt_emb = b.embedding("embedding", tgt, s.vocab, d)?;
    if s.shared_embeddings {
        b.tie(tgt_emb, src_emb)?;
    }
    let mut y = b.sinusoidal_positions("positions", tgt_emb, scale)?;
    y = b.dropout("dropout", y, s.dropout)?;
    for i in 0..s.decoder_layers {
        b.push(format!("layers.{i}"));
        y = decoder_layer(&mut b, y, memory, s)?;
        b.pop();
    }
    y = b.layer_norm("norm", y, EPS)?;
    b.pop();

    let logits = b.linear("output_projection", y, s.vocab, false)?;
    if s.shared_embeddings {
        b.tie(logits, src_emb)?;
    }
    b.loss("loss", LossKind::CrossEntropy, &[logits, labels])?;
    Ok(b.finish(t as u64, "tokens")?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::zoo::common::shape;

    fn base() -> TransformerSpec {
        TransformerSpec {
            vocab: 37_000,
            encoder_layers: 6,
            decoder_layers: 6,
            d_model: 512,
            heads: 8,
            ffn: 2048,
            seq_len: 64,
            dropout: 0.1,
            shared_embeddings: true,
        }
    }

    #[test]
    fn shared_embeddings_are_tied_to_the_encoder_embedding() {
        let g = build(&base()).unwrap();
        let owner = g.nodes.iter().position(|n| n.name == "encoder.embedding");
        assert_eq!(g.node("decoder.embedding").unwrap().tied_to, owner);
        assert_eq!(g.node("output_projection").unwrap().tied_to, owner);
        assert_eq!(shape(&g, "decoder.layers.5.norm3"), [64, 512]);
        let g = build(&TransformerSpec { shared_embeddings: false, ..base() }).unwrap();
        assert!(g.nodes.iter().all(|n| n.tied_to.is_none()));
    }

    #[test]
    fn heads_must_divide_width() {
        let e = build(&TransformerSpec { heads: 7, ..base() }).unwrap_err();
        assert_eq!(e.path, ["heads"]);
    }
}
