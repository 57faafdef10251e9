//! BERT (Devlin et al.) for pre-training, as Hugging Face's `BertForPreTraining` lays it out: word, position
//! (learned) and token-type (2) embeddings summed, LayerNorm (eps 1e-12) and dropout; post-norm encoder
//! layers with GELU feed-forward; the pooler (Linear + tanh on the first token) with the next-sentence head
//! (Linear to 2); and the masked-LM head: transform (Linear + GELU + LayerNorm), then a decoder Linear to
//! the vocabulary whose weight is TIED to the word embeddings (one parameter) with its own bias.
//!
//! With the defaults this is BERT-base uncased with 110,106,428 parameters (`BertForPreTraining`; the bare
//! `BertModel` is 109,482,240). The MLM logits are computed at every position, as Hugging Face does (the
//! loss ignores unmasked positions, which changes no FLOP).

use crate::builder::{GraphBuilder, ShapeError};
use crate::graph::{Activation, Graph, InputKind, LossKind, NodeId};
use crate::model::BertSpec;

use super::common::{ZooError, at_least};

/// LayerNorm epsilon of BERT.
const EPS: f32 = 1e-12;
/// Hidden and attention dropout of BERT.
const DROPOUT: f64 = 0.1;

fn layer(b: &mut GraphBuilder, x: NodeId, s: &BertSpec) -> Result<NodeId, ShapeError> {
    let a = b.attention("attention.self", x, x, s.heads, false)?;
    let a = b.dropout("attention.output.dropout", a, DROPOUT)?;
    let a = b.add_nodes("attention.output.add", &[a, x])?;
    let x = b.layer_norm("attention.output.LayerNorm", a, EPS)?;
    let f = b.linear("intermediate.dense", x, s.ffn, true)?;
    let f = b.act("intermediate.gelu", f, Activation::Gelu)?;
    let f = b.linear("output.dense", f, s.hidden, true)?;
    let f = b.dropout("output.dropout", f, DROPOUT)?;
    let f = b.add_nodes("output.add", &[f, x])?;
    b.layer_norm("output.LayerNorm", f, EPS)
}

/// Build BERT with the masked-LM and next-sentence losses.
pub(crate) fn build(s: &BertSpec) -> Result<Graph, ZooError> {
    at_least("vocab", s.vocab, 2)?;
    at_least("layers", s.layers, 1)?;
    at_least("hidden", s.hidden, 1)?;
    at_least("heads", s.heads, 1)?;
    at_least("ffn", s.ffn, 1)?;
    at_least("seq_len", s.seq_len, 1)?;
    if s.hidden % s.heads != 0 {
        return Err(ZooError::field("heads", format!("heads = {} must divide hidden = {}", s.heads, s.hidden), None));
    }
    if s.max_positions < s.seq_len {
        return Err(ZooError::field(
            "max_positions",
            format!("max_positions = {} is shorter than seq_len = {}", s.max_positions, s.seq_len),
            Some("raise max_positions to at least seq_len"),
        ));
    }
    let (t, h) = (s.seq_len, s.hidden);
    let mut b = GraphBuilder::new("bert");
    let ids = b.input("input_ids", &[t], InputKind::Tokens { vocab: s.vocab })?;
    let types = b.input("token_type_ids", &[t], InputKind::Tokens { vocab: 2 })?;
    let mlm_labels = b.input("mlm_labels", &[t], InputKind::Labels { classes: s.vocab })?;
    let nsp_label = b.input("next_sentence_label", &[], InputKind::Labels { classes: 2 })?;

    b.push("embeddings");
    let words = b.embedding("word_embeddings", ids, s.vocab, h)?;
    let ty = b.embedding("token_type_embeddings", types, 2, h)?;
    let e = b.add_nodes("add", &[words, ty])?;
    let e = b.learned_positions("position_embeddings", e, s.max_positions)?;
    let e = b.layer_norm("LayerNorm", e, EPS)?;
    let mut x = b.dropout("dropout", e, DROPOUT)?;
    b.pop();

    for i in 0..s.layers {
        b.push(format!("encoder.layer.{i}"));
        x = layer(&mut b, x, s)?;
        b.pop();
    }

    b.push("pooler");
    let first = b.slice("first_token", x, 0, 0, 1)?;
    let first = b.reshape("reshape", first, &[h])?;
    let pooled = b.linear("dense", first, h, true)?;
    let pooled = b.act("tanh", pooled, Activation::Tanh)?;
    b.pop();

    b.push("cls");
    let nsp = b.linear("seq_relationship", pooled, 2, true)?;
    let m = b.linear("predictions.transform.dense", x, h, true)?;
    let m = b.act("predictions.transform.gelu", m, Activation::Gelu)?;
    let m = b.layer_norm("predictions.transform.LayerNorm", m, EPS)?;
    let logits = b.linear("predictions.decoder", m, s.vocab, true)?;
    b.tie(logits, words)?;
    b.loss("mlm_loss", LossKind::CrossEntropy, &[logits, mlm_labels])?;
    b.loss("nsp_loss", LossKind::CrossEntropy, &[nsp, nsp_label])?;
    b.pop();
    Ok(b.finish(t as u64, "tokens")?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::zoo::common::shape;

    fn base() -> BertSpec {
        BertSpec { vocab: 30_522, layers: 12, hidden: 768, heads: 12, ffn: 3072, seq_len: 128, max_positions: 512 }
    }

    #[test]
    fn shapes_and_tying() {
        let g = build(&base()).unwrap();
        assert_eq!(shape(&g, "encoder.layer.11.output.LayerNorm"), [128, 768]);
        assert_eq!(shape(&g, "cls.predictions.decoder"), [128, 30_522]);
        assert_eq!(shape(&g, "cls.seq_relationship"), [2]);
        let owner = g.nodes.iter().position(|n| n.name == "embeddings.word_embeddings");
        assert_eq!(g.node("cls.predictions.decoder").unwrap().tied_to, owner);
        let e = build(&BertSpec { max_positions: 64, ..base() }).unwrap_err();
        assert_eq!(e.path, ["max_positions"]);
    }
}
