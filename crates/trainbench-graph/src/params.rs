//! Parameter and buffer declarations of each node, in PyTorch's layouts and names, with their initialisers.
//!
//! Every backend allocates exactly these tensors, so parameter counts agree across backends and with the
//! analysis. Names are `<node name>.<local name>` (`layer1.0.conv1.weight`, `rnn.weight_ih_l0_reverse`).

use serde::{Deserialize, Serialize};

use crate::graph::{Graph, Node, NodeId, Op, RnnCell};

/// How a parameter is initialised (PyTorch's defaults for the corresponding module).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Init {
    /// Uniform in `[-bound, bound]`.
    Uniform {
        /// Half-width of the interval.
        bound: f32,
    },
    /// Normal with mean 0.
    Normal {
        /// Standard deviation.
        std: f32,
    },
    /// All zeros.
    Zeros,
    /// All ones.
    Ones,
}

/// What a tensor is for; decides whether it is trained and where it counts in the memory breakdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamRole {
    /// A trained weight (has a gradient and optimizer state).
    Weight,
    /// A trained bias.
    Bias,
    /// A non-trained buffer (batch-norm running statistics): counted as weights memory, not as parameters.
    Buffer,
    /// A frozen weight or bias ([`Node::frozen`], LoRA's base model): a parameter, without gradient or
    /// optimizer state.
    Frozen,
}

/// One tensor a node owns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParamDecl {
    /// Full name, `<node>.<local>`.
    pub name: String,
    /// Local name inside the node (`weight`, `bias`, `in_proj_weight`, `weight_ih_l0`, `running_mean`).
    pub local: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// Initialiser.
    pub init: Init,
    /// Role.
    pub role: ParamRole,
}

impl ParamDecl {
    /// Number of elements.
    pub fn numel(&self) -> u64 {
        self.shape.iter().map(|&d| d as u64).product()
    }
    /// Whether the tensor is trained (has a gradient and optimizer state).
    pub fn trainable(&self) -> bool {
        matches!(self.role, ParamRole::Weight | ParamRole::Bias)
    }
    /// Whether the tensor counts as a parameter of the model: trained or frozen, not a buffer.
    pub fn is_parameter(&self) -> bool {
        self.role != ParamRole::Buffer
    }
}

/// Standard deviation of the initial values of a token table a head is tied to ([`Node::tied_to`]): the
/// reference trainings that tie (GPT-2, BERT: N(0, 0.02)).
pub const TIED_TABLE_STD: f32 = 0.02;

fn decl(node: &Node, local: impl Into<String>, shape: Vec<usize>, init: Init, role: ParamRole) -> ParamDecl {
    let local = local.into();
    ParamDecl { name: format!("{}.{}", node.name, local), local, shape, init, role }
}

fn kaiming(fan_in: usize) -> Init {
    Init::Uniform { bound: 1.0 / (fan_in.max(1) as f32).sqrt() }
}

fn xavier(fan_in: usize, fan_out: usize) -> Init {
    Init::Uniform { bound: (6.0 / (fan_in + fan_out).max(1) as f32).sqrt() }
}

/// Parameters and buffers of a node, in the order PyTorch's module registers them; a frozen node's weights
/// and biases have the role [`ParamRole::Frozen`].
pub fn tensors(node: &Node) -> Vec<ParamDecl> {
    let mut v = declared(node);
    if node.frozen {
        for d in v.iter_mut().filter(|d| d.trainable()) {
            d.role = ParamRole::Frozen;
        }
    }
    v
}

fn declared(node: &Node) -> Vec<ParamDecl> {
    use ParamRole::{Bias, Buffer, Weight};
    match &node.op {
        Op::Conv { in_channels, out_channels, kernel, groups, bias, transposed, .. } => {
            let k: usize = kernel.iter().product();
            let (shape, fan_in) = if *transposed {
                let mut s = vec![*in_channels, out_channels / groups];
                s.extend(kernel);
                (s, out_channels / groups * k)
            } else {
                let mut s = vec![*out_channels, in_channels / groups];
                s.extend(kernel);
                (s, in_channels / groups * k)
            };
            let mut v = vec![decl(node, "weight", shape, kaiming(fan_in), Weight)];
            if *bias {
                v.push(decl(node, "bias", vec![*out_channels], kaiming(fan_in), Bias));
            }
            v
        }
        Op::BatchNorm { features, .. } => vec![
            decl(node, "weight", vec![*features], Init::Ones, Weight),
            decl(node, "bias", vec![*features], Init::Zeros, Bias),
            decl(node, "running_mean", vec![*features], Init::Zeros, Buffer),
            decl(node, "running_var", vec![*features], Init::Ones, Buffer),
        ],
        Op::LayerNorm { features, .. } => vec![
            decl(node, "weight", vec![*features], Init::Ones, Weight),
            decl(node, "bias", vec![*features], Init::Zeros, Bias),
        ],
        Op::RmsNorm { features, .. } => vec![decl(node, "weight", vec![*features], Init::Ones, Weight)],
        Op::ClassToken { dim } => vec![decl(node, "class_token", vec![1, 1, *dim], Init::Zeros, Weight)],
        Op::EmbeddingBag { vocab, dim, .. } => {
            vec![decl(node, "weight", vec![*vocab, *dim], Init::Normal { std: 1.0 }, Weight)]
        }
        Op::Linear { in_features, out_features, bias } => {
            let mut v = vec![decl(node, "weight", vec![*out_features, *in_features], kaiming(*in_features), Weight)];
            if *bias {
                v.push(decl(node, "bias", vec![*out_features], kaiming(*in_features), Bias));
            }
            v
        }
        // PyTorch's `nn.Embedding` default; a table a head is tied to: see [`node_tensors`].
        Op::Embedding { vocab, dim } => {
            vec![decl(node, "weight", vec![*vocab, *dim], Init::Normal { std: 1.0 }, Weight)]
        }
        Op::LearnedPositions { max_positions, dim } => {
            vec![decl(node, "weight", vec![*max_positions, *dim], Init::Normal { std: 1.0 }, Weight)]
        }
        Op::Rnn { cell, input_size, hidden, layers, bidirectional } => {
            let gates = match cell {
                RnnCell::Lstm => 4,
                RnnCell::Gru => 3,
            };
            let dirs = if *bidirectional { 2 } else { 1 };
            let init = kaiming(*hidden);
            let mut v = Vec::new();
            for l in 0..*layers {
                let in_l = if l == 0 { *input_size } else { hidden * dirs };
                for d in 0..dirs {
                    let sfx = if d == 1 { "_reverse" } else { "" };
                    v.push(decl(node, format!("weight_ih_l{l}{sfx}"), vec![gates * hidden, in_l], init, Weight));
                    v.push(decl(node, format!("weight_hh_l{l}{sfx}"), vec![gates * hidden, *hidden], init, Weight));
                    v.push(decl(node, format!("bias_ih_l{l}{sfx}"), vec![gates * hidden], init, Bias));
                    v.push(decl(node, format!("bias_hh_l{l}{sfx}"), vec![gates * hidden], init, Bias));
                }
            }
            v
        }
        Op::Attention { embed_dim: e, kdim, vdim, tensor_shards, .. } => {
            // A node split over a tensor group holds its share of the heads: `in_proj`'s rows of its heads in
            // each of q, k and v, `out_proj`'s columns of them (the initial values follow the whole layer).
            let l = e / (*tensor_shards).max(1);
            let mut v = if kdim == e && vdim == e {
                vec![decl(node, "in_proj_weight", vec![3 * l, *e], xavier(*e, 3 * e), Weight)]
            } else {
                vec![
                    decl(node, "q_proj_weight", vec![l, *e], xavier(*e, *e), Weight),
                    decl(node, "k_proj_weight", vec![l, *kdim], xavier(*kdim, *e), Weight),
                    decl(node, "v_proj_weight", vec![l, *vdim], xavier(*vdim, *e), Weight),
                ]
            };
            v.push(decl(node, "in_proj_bias", vec![3 * l], Init::Zeros, Bias));
            v.push(decl(node, "out_proj.weight", vec![*e, l], kaiming(*e), Weight));
            v.push(decl(node, "out_proj.bias", vec![*e], Init::Zeros, Bias));
            v
        }
        Op::Lora { in_features, out_features, rank, .. } => vec![
            decl(node, "lora_A", vec![*rank, *in_features], kaiming(*in_features), Weight),
            decl(node, "lora_B", vec![*out_features, *rank], Init::Zeros, Weight),
        ],
        Op::Moe { features, experts, expert_ffn, shared_ffn, .. } => {
            let (d, e, f) = (*features, *experts, *expert_ffn);
            let mut v = vec![
                decl(node, "router.weight", vec![e, d], kaiming(d), Weight),
                decl(node, "experts.gate_proj", vec![e, f, d], kaiming(d), Weight),
                decl(node, "experts.up_proj", vec![e, f, d], kaiming(d), Weight),
                decl(node, "experts.down_proj", vec![e, d, f], kaiming(f), Weight),
            ];
            if *shared_ffn > 0 {
                let s = *shared_ffn;
                v.push(decl(node, "shared.gate_proj.weight", vec![s, d], kaiming(d), Weight));
                v.push(decl(node, "shared.up_proj.weight", vec![s, d], kaiming(d), Weight));
                v.push(decl(node, "shared.down_proj.weight", vec![d, s], kaiming(s), Weight));
            }
            v
        }
        Op::Input { .. }
        | Op::Rotary { .. }
        | Op::Sdpa { .. }
        | Op::Pool { .. }
        | Op::AdaptivePool { .. }
        | Op::Act { .. }
        | Op::Softmax
        | Op::Dropout { .. }
        | Op::Add
        | Op::Mul
        | Op::Concat { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Slice { .. }
        | Op::Mean { .. }
        | Op::MatMul { .. }
        | Op::SinusoidalPositions { .. }
        | Op::CriticBatch
        | Op::RoiAlign { .. }
        | Op::Loss { .. } => Vec::new(),
    }
}

/// Trained parameters of a node (buffers excluded).
pub fn parameters(node: &Node) -> Vec<ParamDecl> {
    tensors(node).into_iter().filter(ParamDecl::trainable).collect()
}

/// Whether `decl` of `node` is a tied weight ([`Node::tied_to`]): the same tensor as the owner's `weight`,
/// so it must not be allocated (or counted) again.
pub fn is_tied(node: &Node, decl: &ParamDecl) -> bool {
    node.tied_to.is_some() && decl.local == "weight"
}

/// Whether a head is tied to node `id` of `graph` ([`Node::tied_to`]): its weight is then also the head's, and
/// gets a gradient in every row from the head.
pub fn has_tied_heads(graph: &Graph, id: NodeId) -> bool {
    graph.nodes.iter().any(|n| n.tied_to == Some(id))
}

/// The tensors of node `id` of `graph` as a backend initialises them: [`tensors`], but a token table a head is
/// tied to ([`Node::tied_to`]) has its weight drawn N(0, [`TIED_TABLE_STD`]), as the reference trainings that tie
/// draw it, not N(0, 1): the head reuses the table after a normalisation, so an N(0, 1) table gives logits spread
/// by sqrt(dim) (27.7 at 768), a softmax whose gradient is a sixth denormal, and a CPU without fast denormals runs
/// the head's backward at a tenth of its speed (docs/performance-model.md, the 2026-12-05 Xeon validation).
pub fn node_tensors(graph: &Graph, id: NodeId) -> Vec<ParamDecl> {
    let Some(node) = graph.nodes.get(id) else {
        return Vec::new();
    };
    let mut v = tensors(node);
    if has_tied_heads(graph, id) && matches!(node.op, Op::Embedding { .. }) {
        for d in v.iter_mut().filter(|d| d.local == "weight") {
            d.init = Init::Normal { std: TIED_TABLE_STD };
        }
    }
    v
}

/// Every tensor a backend allocates for `graph`, with the node that owns it: [`node_tensors`] of each node in
/// order, without tied weights (those use the owner's tensor, see [`Node::tied_to`]).
pub fn graph_tensors(graph: &Graph) -> Vec<(NodeId, ParamDecl)> {
    let mut v = Vec::new();
    for (id, node) in graph.nodes.iter().enumerate() {
        v.extend(node_tensors(graph, id).into_iter().filter(|d| !is_tied(node, d)).map(|d| (id, d)));
    }
    v
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::builder::{ConvCfg, GraphBuilder};
    use crate::graph::InputKind;

    #[test]
    fn layouts_match_pytorch() {
        let mut b = GraphBuilder::new("t");
        let x = b.input("x", &[5, 10], InputKind::Dense).unwrap();
        let r = b.rnn("rnn", x, RnnCell::Lstm, 20, 2, true).unwrap();
        let a = b.attention("attn", r, r, 4, false).unwrap();
        let img = b.input("img", &[8, 9, 9], InputKind::Dense).unwrap();
        let c = b.conv("up", img, ConvCfg { groups: 2, ..ConvCfg::square(4, 3, 1, 0).transposed() }).unwrap();
        let g = b.nodes_for_test();
        let rnn = tensors(&g[r]);
        assert_eq!(rnn[0].shape, vec![80, 10]);
        assert_eq!(rnn[4].name, "rnn.weight_ih_l0_reverse");
        assert_eq!(rnn[8].shape, vec![80, 40]);
        let n: u64 = tensors(&g[a]).iter().map(ParamDecl::numel).sum();
        assert_eq!(n, 3 * 40 * 40 + 3 * 40 + 40 * 40 + 40);
        assert_eq!(tensors(&g[c])[0].shape, vec![8, 2, 3, 3]);
    }
}
