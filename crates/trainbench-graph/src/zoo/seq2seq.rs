//! Seq2Seq NMT (TBD's model, after TensorFlow's `nmt`): LSTM encoder and decoder with Luong attention.
//!
//! Attention is Luong's multiplicative ("general") form built from primitive ops, as TensorFlow's
//! `LuongAttention` + `AttentionWrapper` compute it: keys = `memory_layer(encoder outputs)` (a Linear
//! without bias), scores = decoder outputs @ keys^T, weights = softmax(scores), context = weights @ encoder
//! outputs, attentional state = tanh(`attention_layer([decoder output; context])`) (Linear 2H -> H, no
//! bias), logits = `output_projection` (Linear H -> target vocabulary, no bias). We do not use the
//! [`Op::Attention`](crate::graph::Op::Attention) op with one head: its four projections with biases
//! are not Luong attention. Simplification, stated: no input feeding (the decoder LSTM reads only the
//! target embeddings, teacher-forced, so it runs as one sequence op), and the decoder starts from a zero
//! state rather than the encoder's final state; neither changes the parameter count of the layers built.

use crate::builder::GraphBuilder;
use crate::graph::{Activation, Graph, InputKind, LossKind, RnnCell};
use crate::model::Seq2seqSpec;

use super::common::{ZooError, at_least, probability};

/// Build the Seq2Seq graph with its cross-entropy loss over target tokens.
pub(crate) fn build(s: &Seq2seqSpec) -> Result<Graph, ZooError> {
    at_least("src_vocab", s.src_vocab, 2)?;
    at_least("tgt_vocab", s.tgt_vocab, 2)?;
    at_least("hidden", s.hidden, 1)?;
    at_least("layers", s.layers, 1)?;
    at_least("seq_len", s.seq_len, 1)?;
    probability("dropout", s.dropout)?;
    let (t, h) = (s.seq_len, s.hidden);
    let mut b = GraphBuilder::new("seq2seq");
    let src = b.input("source", &[t], InputKind::Tokens { vocab: s.src_vocab })?;
    let tgt = b.input("target_in", &[t], InputKind::Tokens { vocab: s.tgt_vocab })?;
    let labels = b.input("target_out", &[t], InputKind::Labels { classes: s.tgt_vocab })?;

    b.push("encoder");
    let e = b.embedding("embedding", src, s.src_vocab, h)?;
    let e = b.dropout("dropout", e, s.dropout)?;
    let enc = b.rnn("lstm", e, RnnCell::Lstm, h, s.layers, false)?;
    b.pop();

    b.push("decoder");
    let d = b.embedding("embedding", tgt, s.tgt_vocab, h)?;
    let d = b.dropout("dropout", d, s.dropout)?;
    let dec = b.rnn("lstm", d, RnnCell::Lstm, h, s.layers, false)?;
    b.pop();

    b.push("attention");
    let keys = b.linear("memory_layer", enc, h, false)?;
    let scores = b.matmul("scores", dec, keys, true)?;
    let weights = b.softmax("softmax", scores)?;
    let context = b.matmul("context", weights, enc, false)?;
    let cat = b.concat("concat", &[dec, context], 1)?;
    let att = b.linear("attention_layer", cat, h, false)?;
    let att = b.act("tanh", att, Activation::Tanh)?;
    let att = b.dropout("dropout", att, s.dropout)?;
    b.pop();

    let logits = b.linear("output_projection", att, s.tgt_vocab, false)?;
    b.loss("loss", LossKind::CrossEntropy, &[logits, labels])?;
    Ok(b.finish(t as u64, "tokens")?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::zoo::common::shape;

    #[test]
    fn shapes() {
        let s = Seq2seqSpec { src_vocab: 100, tgt_vocab: 50, hidden: 32, layers: 2, seq_len: 7, dropout: 0.2 };
        let g = build(&s).unwrap();
        assert_eq!(shape(&g, "attention.scores"), [7, 7]);
        assert_eq!(shape(&g, "attention.concat"), [7, 64]);
        assert_eq!(shape(&g, "output_projection"), [7, 50]);
        assert_eq!(g.items_per_sample, 7);
    }
}
