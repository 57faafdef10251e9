//! Builder methods for the layers of today's transformers and recommenders: RMSNorm, rotary embeddings,
//! grouped-query scaled dot-product attention, the ViT class token, embedding bags, and the recomputable
//! blocks activation checkpointing works on.

use super::{GraphBuilder, ShapeError};
use crate::graph::{BagMode, Block, DecoderDims, InputKind, NodeId, Op};

impl GraphBuilder {
    /// RMS normalisation over the last axis.
    pub fn rms_norm(&mut self, name: &str, x: NodeId, eps: f32) -> Result<NodeId, ShapeError> {
        let s = self.shape(x).0.clone();
        if s.is_empty() {
            return Err(self.err(name, "rms_norm", "expects at least a 1-D input, got a scalar"));
        }
        let features = self.shape(x).last();
        self.add(name, Op::RmsNorm { features, eps }, vec![x], s)
    }

    /// A mixture-of-experts feed-forward over `[.., features]` (see [`Op::Moe`]); the op's `features` is the
    /// input's last dimension, whatever the caller passes there.
    pub fn moe(&mut self, name: &str, x: NodeId, op: Op) -> Result<NodeId, ShapeError> {
        let s = self.shape(x).0.clone();
        let Op::Moe { experts, top_k, expert_ffn, capacity_factor, aux_loss, shared_ffn, router, .. } = op else {
            return Err(self.err(name, "moe", format!("expects a mixture-of-experts op, got {}", op.kind_name())));
        };
        let features = self.shape(x).last();
        if s.is_empty() || experts == 0 || top_k == 0 || top_k > experts || expert_ffn == 0 {
            return Err(self.err(
                name,
                "moe",
                format!(
                    "needs a [.., features] input and 1 <= top_k ({top_k}) <= experts ({experts}), expert_ffn >= 1"
                ),
            ));
        }
        if capacity_factor.is_some_and(|c| !(c.is_finite() && c > 0.0)) || !(aux_loss.is_finite() && aux_loss >= 0.0) {
            return Err(self.err(name, "moe", "capacity_factor must be above 0 and aux_loss at least 0"));
        }
        let op = Op::Moe { features, experts, top_k, expert_ffn, shared_ffn, router, capacity_factor, aux_loss };
        self.add(name, op, vec![x], s)
    }

    /// Rotary position embedding over `[T, heads * head_dim]`.
    pub fn rotary(&mut self, name: &str, x: NodeId, heads: usize, theta: f32) -> Result<NodeId, ShapeError> {
        let s = self.shape(x).0.clone();
        if s.len() != 2 || heads == 0 || s[1] % heads != 0 {
            return Err(self.err(
                name,
                "rotary",
                format!("expects [time, heads * head_dim] with {heads} heads, got {}", self.shape(x)),
            ));
        }
        let head_dim = s[1] / heads;
        if head_dim % 2 != 0 {
            return Err(self.err(name, "rotary", format!("head_dim = {head_dim} must be even")));
        }
        if !(theta.is_finite() && theta > 1.0) {
            return Err(self.err(name, "rotary", format!("theta = {theta} must be a finite number above 1")));
        }
        self.add(name, Op::Rotary { heads, head_dim, theta }, vec![x], s)
    }

    /// Scaled dot-product attention of projected q `[T, heads * d]`, k and v `[T, kv_heads * d]`.
    pub fn sdpa(
        &mut self,
        name: &str,
        qkv: [NodeId; 3],
        heads: usize,
        kv_heads: usize,
        causal: bool,
    ) -> Result<NodeId, ShapeError> {
        let [q, k, v] = qkv;
        let (qs, ks, vs) = (self.shape(q).0.clone(), self.shape(k).0.clone(), self.shape(v).0.clone());
        if qs.len() != 2 || ks.len() != 2 || vs.len() != 2 {
            return Err(self.err(name, "sdpa", "expects q, k and v of shape [time, width]"));
        }
        if heads == 0 || kv_heads == 0 || heads % kv_heads != 0 {
            return Err(self.err(
                name,
                "sdpa",
                format!("kv_heads = {kv_heads} must be at least 1 and divide heads = {heads}"),
            ));
        }
        if qs[1] % heads != 0 {
            return Err(self.err(name, "sdpa", format!("query width {} is not a multiple of {heads} heads", qs[1])));
        }
        let head_dim = qs[1] / heads;
        if ks != vs || ks[1] != kv_heads * head_dim {
            return Err(self.err(
                name,
                "sdpa",
                format!(
                    "k {} and v {} must both be [time, kv_heads * head_dim] = [.., {}]",
                    self.shape(k),
                    self.shape(v),
                    kv_heads * head_dim
                ),
            ));
        }
        if causal && ks[0] != qs[0] {
            return Err(self.err(name, "sdpa", "causal attention needs as many keys as queries"));
        }
        self.add(name, Op::Sdpa { heads, kv_heads, head_dim, causal }, vec![q, k, v], qs)
    }

    /// Prepend a learned class token to `[T, E]`.
    pub fn class_token(&mut self, name: &str, x: NodeId) -> Result<NodeId, ShapeError> {
        let s = self.shape(x).0.clone();
        if s.len() != 2 {
            return Err(self.err(name, "class_token", format!("expects [time, width], got {}", self.shape(x))));
        }
        self.add(name, Op::ClassToken { dim: s[1] }, vec![x], vec![s[0] + 1, s[1]])
    }

    /// Embedding bag over integer ids `[bag]` -> `[dim]`.
    pub fn embedding_bag(
        &mut self,
        name: &str,
        ids: NodeId,
        vocab: usize,
        dim: usize,
        mode: BagMode,
    ) -> Result<NodeId, ShapeError> {
        match self.nodes[ids].op.input_kind() {
            Some(InputKind::Tokens { vocab: v }) if *v <= vocab => {}
            Some(InputKind::Tokens { vocab: v }) => {
                return Err(self.err(
                    name,
                    "embedding_bag",
                    format!("ids go up to {v} but the table has {vocab} rows"),
                ));
            }
            Some(InputKind::Dense | InputKind::Labels { .. }) | None => {
                return Err(self.err(name, "embedding_bag", "expects an input of token ids"));
            }
        }
        if self.shape(ids).rank() != 1 {
            return Err(self.err(name, "embedding_bag", format!("expects ids [bag], got {}", self.shape(ids))));
        }
        self.add(name, Op::EmbeddingBag { vocab, dim, mode }, vec![ids], vec![dim])
    }

    /// Mark the graph as a decoder-only language model of these dimensions (see [`Graph::decoder`]).
    ///
    /// [`Graph::decoder`]: crate::graph::Graph::decoder
    pub fn set_decoder(&mut self, dims: DecoderDims) {
        self.decoder = Some(dims);
    }

    /// Start a recomputable block named by the current scope and `name`; its input is `input`.
    pub fn begin_block(&mut self, name: &str, input: NodeId) {
        let full = self.full_name(name);
        self.open_block = Some((full, input, self.nodes.len()));
    }

    /// End the block begun last; its output is the node added last.
    pub fn end_block(&mut self) -> Result<(), ShapeError> {
        let Some((name, input, first)) = self.open_block.take() else {
            return Err(self.err("", "block", "end_block without begin_block"));
        };
        if self.nodes.len() <= first {
            return Err(self.err(&name, "block", "a block needs at least one node"));
        }
        self.blocks.push(Block { name, input, first, last: self.nodes.len() - 1 });
        Ok(())
    }

    /// Every block reads only its input from before it and is read after it only through its last node.
    pub(super) fn check_blocks(&self) -> Result<(), ShapeError> {
        let fail = |b: &Block, message: String| ShapeError { layer: b.name.clone(), op: "block", message };
        if let Some((name, ..)) = &self.open_block {
            return Err(ShapeError { layer: name.clone(), op: "block", message: "block never ended".into() });
        }
        for (k, b) in self.blocks.iter().enumerate() {
            if k > 0 && b.first <= self.blocks[k - 1].last {
                return Err(fail(b, "blocks overlap".into()));
            }
            for i in b.first..=b.last {
                let node = &self.nodes[i];
                if let Some(&j) = node.inputs.iter().find(|&&j| j < b.first && j != b.input) {
                    return Err(fail(
                        b,
                        format!("`{}` reads `{}` from before the block", node.name, self.nodes[j].name),
                    ));
                }
                if node.tied_to.is_some() || matches!(node.op, Op::Input { .. } | Op::Loss { .. }) {
                    return Err(fail(b, format!("`{}` cannot be inside a recomputed block", node.name)));
                }
            }
            for node in &self.nodes[b.last + 1..] {
                if let Some(&j) = node.inputs.iter().find(|&&j| (b.first..b.last).contains(&j)) {
                    return Err(fail(
                        b,
                        format!("`{}` reads `{}` from inside the block", node.name, self.nodes[j].name),
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn grouped_query_attention_checks_its_heads() {
        let mut b = GraphBuilder::new("t");
        let x = b.input("x", &[8, 64], InputKind::Dense).unwrap();
        let q = b.linear("q", x, 64, false).unwrap();
        let k = b.linear("k", x, 32, false).unwrap();
        let v = b.linear("v", x, 32, false).unwrap();
        let r = b.rotary("rq", q, 4, 10000.0).unwrap();
        assert!(b.sdpa("bad", [r, k, v], 4, 3, true).is_err());
        let a = b.sdpa("attn", [r, k, v], 4, 2, true).unwrap();
        assert_eq!(b.shape(a).0, vec![8, 64]);
        assert!(b.rotary("odd", x, 64, 10000.0).is_err());
        let c = b.class_token("cls", a).unwrap();
        assert_eq!(b.shape(c).0, vec![9, 64]);
    }

    #[test]
    fn a_block_read_from_inside_is_refused() {
        let mut b = GraphBuilder::new("t");
        let x = b.input("x", &[4], InputKind::Dense).unwrap();
        b.begin_block("blk", x);
        let h = b.linear("a", x, 4, true).unwrap();
        let _ = b.linear("b", h, 4, true).unwrap();
        b.end_block().unwrap();
        let leak = b.add_nodes("leak", &[h, x]).unwrap();
        let _ = leak;
        let err = b.check_blocks().unwrap_err();
        assert!(err.message.contains("from inside the block"), "{err}");
    }
}
