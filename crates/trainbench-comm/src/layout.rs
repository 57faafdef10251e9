//! The trained tensors of a graph in the order every backend holds them: [`Layout`], the flat buffer the
//! exchanges read and write, and how parameter servers share its tensors.

use trainbench_graph::graph::{Graph, Node, NodeId, Op};
use trainbench_graph::params::{ParamDecl, graph_tensors};

/// The trained tensors of a graph in the order every backend holds them ([`graph_tensors`], buffers and tied
/// weights excluded), and how parameter servers share them.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// Each trained tensor's declaration, in order.
    pub decls: Vec<ParamDecl>,
    /// The node that owns each tensor.
    pub nodes: Vec<NodeId>,
    /// Offset of each tensor in the flat buffer.
    pub offsets: Vec<usize>,
    /// Elements in all.
    pub total: usize,
}

/// Whether `decl` is one of a mixture-of-experts layer's expert tensors (`experts.gate_proj`, `experts.up_proj`,
/// `experts.down_proj`, each `[experts, ..]`): the tensors expert parallelism shards along their first dimension.
pub fn is_expert_tensor(node: &Node, decl: &ParamDecl) -> bool {
    matches!(node.op, Op::Moe { .. }) && decl.local.starts_with("experts.")
}

impl Layout {
    /// The layout of `graph`'s trained tensors.
    pub fn of(graph: &Graph) -> Self {
        Self::selected(graph, |_, _| true)
    }

    /// The layout of `graph`'s trained tensors except the experts' ([`is_expert_tensor`]): what an
    /// expert-parallel run exchanges over the whole world (the experts' gradients go over their replicas).
    pub fn without_experts(graph: &Graph) -> Self {
        Self::selected(graph, |node, decl| !is_expert_tensor(node, decl))
    }

    fn selected(graph: &Graph, keep: impl Fn(&Node, &ParamDecl) -> bool) -> Self {
        let (nodes, decls): (Vec<NodeId>, Vec<ParamDecl>) =
            graph_tensors(graph).into_iter().filter(|(n, d)| d.trainable() && keep(&graph.nodes[*n], d)).unzip();
        let mut offsets = Vec::with_capacity(decls.len());
        let mut total = 0usize;
        for d in &decls {
            offsets.push(total);
            total += d.numel() as usize;
        }
        Layout { decls, nodes, offsets, total }
    }

    /// Elements of tensor `i`.
    pub fn len_of(&self, i: usize) -> usize {
        self.decls[i].numel() as usize
    }

    /// The server (0-based among `servers`) that owns each tensor: largest tensors first, each to the server
    /// holding the fewest elements so far (ties to the lowest index), so shards stay balanced.
    pub fn shard_owners(&self, servers: usize) -> Vec<usize> {
        let servers = servers.max(1);
        let mut order: Vec<usize> = (0..self.decls.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(self.len_of(i)), i));
        let mut load = vec![0usize; servers];
        let mut owner = vec![0usize; self.decls.len()];
        for i in order {
            let s = (0..servers).min_by_key(|&s| (load[s], s)).unwrap_or(0);
            owner[i] = s;
            load[s] += self.len_of(i);
        }
        owner
    }

    /// Tensors owned by server `s`, in layout order.
    pub fn shard(&self, owners: &[usize], s: usize) -> Vec<usize> {
        (0..self.decls.len()).filter(|&i| owners[i] == s).collect()
    }
}
