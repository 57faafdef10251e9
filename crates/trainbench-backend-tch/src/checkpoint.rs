//! Activation checkpointing of the graph's recomputable blocks ([`Graph::blocks`]). In the forward pass a
//! recomputed block runs without gradients from its input, and the graph continues from a detached leaf of its
//! output that requires gradients; only the block's input is kept. After `loss.backward()` has left the
//! gradient at that leaf, [`Checkpoints::backward`] walks the recomputed blocks in reverse: it replays the
//! block with gradients from a detached copy of its input (the random generator restored, so dropout draws the
//! same masks), backpropagates the leaf's gradient through it (the parameters' gradients accumulate as usual)
//! and passes the input copy's gradient on to whatever produced the input: the previous block's leaf, or the
//! nodes before the block.
//!
//! A sharded strategy hooks in around each recomputed block ([`BlockWeights`]): ZeRO-3 gathers the block's
//! weights before it runs (forward and replay) and frees them after, and reduce-scatters its gradients once
//! its replay's backward is done. Each hook also learns which block runs next, so the gather can start early.

use tch::{Device, TchError, Tensor};
use trainbench_graph::graph::{Graph, NodeId, Op};
use trainbench_graph::training::Checkpointing;

use crate::autograd::{backward_with, rng_state, set_rng_state};

/// What a sharded strategy does around each recomputed block (its index in [`Graph::blocks`]).
pub trait BlockWeights {
    /// The block is about to run (forward, or its replay in the backward pass): its weights must be there.
    fn before(&mut self, block: usize) -> Result<(), TchError>;
    /// The block's forward (without gradients) is done: its weights may go.
    fn after_forward(&mut self, block: usize) -> Result<(), TchError>;
    /// The block's replay has been backpropagated: its gradients are complete.
    fn after_backward(&mut self, block: usize) -> Result<(), TchError>;
    /// Block `block` runs next (after the one running now, or first in the replays): its weights may be
    /// fetched ahead. Nothing by default.
    fn prefetch(&mut self, _block: usize) -> Result<(), TchError> {
        Ok(())
    }
}

/// Evaluates, into the environment given, the nodes a recomputed block's last node (the `NodeId`) needs: the
/// lowered model's `eval` with the step's options, handed to [`Checkpoints::backward`] by the step.
pub type Replay<'r> = dyn FnMut(&mut [Option<Tensor>], NodeId) -> Result<(), TchError> + 'r;

/// What the forward pass kept of one recomputed block.
struct Saved {
    /// Index in [`Graph::blocks`].
    block: usize,
    /// The block's input as the forward pass saw it (with its autograd history).
    input: Tensor,
    /// The leaf the graph continued from (its `.grad` is the gradient at the block's output).
    leaf: Tensor,
    /// The random generator's state when the block started (blocks with dropout only).
    rng: Option<Tensor>,
}

/// The recomputed blocks of one run and, during a step, what the forward pass kept of them.
pub struct Checkpoints {
    device: Device,
    /// Per node: the recomputed block that starts there.
    starts: Vec<Option<usize>>,
    /// Per node: the recomputed block that ends there.
    ends: Vec<Option<usize>>,
    /// Per node: read across a recomputed block's boundary (its input or its last node), never overwritten
    /// in place.
    pinned: Vec<bool>,
    /// Per block: whether it draws random numbers (dropout).
    random: Vec<bool>,
    /// Per block: the recomputed block the forward pass reaches next.
    next: Vec<Option<usize>>,
    /// Whether the loss's backward must keep the graph: some recomputed block's input is also read outside
    /// the block, so the nodes before it are backpropagated twice.
    keep_graph: bool,
    /// The block being run without gradients, if any.
    current: Option<usize>,
    saved: Vec<Saved>,
}

impl Checkpoints {
    /// The blocks of `graph` that `mode` recomputes, on `device`; `None` when it recomputes none.
    pub fn new(graph: &Graph, mode: Checkpointing, device: Device) -> Option<Self> {
        let n = graph.nodes.len();
        let (mut starts, mut ends, mut pinned) = (vec![None; n], vec![None; n], vec![false; n]);
        let mut random = vec![false; graph.blocks.len()];
        let mut keep_graph = false;
        let mut any = false;
        for (b, block) in graph.blocks.iter().enumerate() {
            random[b] = (block.first..=block.last).any(|i| matches!(graph.nodes[i].op, Op::Dropout { .. }));
            if !mode.recomputes(b) {
                continue;
            }
            any = true;
            starts[block.first] = Some(b);
            ends[block.last] = Some(b);
            pinned[block.input] = true;
            pinned[block.last] = true;
            let inside = block.first..=block.last;
            keep_graph |= graph
                .nodes
                .iter()
                .enumerate()
                .any(|(i, node)| !inside.contains(&i) && node.inputs.contains(&block.input));
        }
        let mut order: Vec<usize> = (0..graph.blocks.len()).filter(|&b| mode.recomputes(b)).collect();
        order.sort_by_key(|&b| graph.blocks[b].first);
        let mut next = vec![None; graph.blocks.len()];
        for pair in order.windows(2) {
            next[pair[0]] = Some(pair[1]);
        }
        any.then_some(Self { device, starts, ends, pinned, random, next, keep_graph, current: None, saved: Vec::new() })
    }

    /// Whether node `id`'s output crosses a recomputed block's boundary (never overwritten in place).
    pub fn pinned(&self, id: NodeId) -> bool {
        self.pinned[id]
    }

    /// Whether the loss's backward must keep the graph for [`Checkpoints::backward`].
    pub fn keep_graph(&self) -> bool {
        self.keep_graph
    }

    /// Whether the node about to run is inside a recomputed block (it runs without gradients).
    pub fn inside(&self) -> bool {
        self.current.is_some()
    }

    /// Node `id` is about to run: at a recomputed block's first node, keep its input and the random state, and
    /// let `hooks` bring its weights.
    pub fn entering(
        &mut self,
        graph: &Graph,
        id: NodeId,
        env: &[Option<Tensor>],
        hooks: Option<&mut (dyn BlockWeights + '_)>,
    ) -> Result<(), TchError> {
        let Some(b) = self.starts[id] else { return Ok(()) };
        let block = &graph.blocks[b];
        let input = env[block.input]
            .as_ref()
            .ok_or_else(|| TchError::Kind(format!("internal: the input of block `{}` was not computed", block.name)))?;
        let rng = if self.random[b] { Some(rng_state(self.device)?) } else { None };
        self.saved.push(Saved { block: b, input: input.shallow_clone(), leaf: Tensor::new(), rng });
        self.current = Some(b);
        if let Some(h) = hooks {
            h.before(b)?;
            if let Some(n) = self.next[b] {
                h.prefetch(n)?;
            }
        }
        Ok(())
    }

    /// Before the loss's backward: `hooks` learn the block replayed first.
    pub fn prefetch_replay(&self, hooks: Option<&mut (dyn BlockWeights + '_)>) -> Result<(), TchError> {
        match (hooks, self.saved.last()) {
            (Some(h), Some(s)) => h.prefetch(s.block),
            _ => Ok(()),
        }
    }

    /// Node `id` produced `out`: at a recomputed block's last node, the graph continues from a leaf of it (and
    /// `hooks` may free the block's weights).
    pub fn leaving(
        &mut self,
        id: NodeId,
        out: Tensor,
        hooks: Option<&mut (dyn BlockWeights + '_)>,
    ) -> Result<Tensor, TchError> {
        let Some(b) = self.ends[id] else { return Ok(out) };
        self.current = None;
        if let Some(h) = hooks {
            h.after_forward(b)?;
        }
        let leaf = out.f_detach()?.set_requires_grad(true);
        if let Some(s) = self.saved.last_mut() {
            s.leaf = leaf.shallow_clone();
        }
        Ok(leaf)
    }

    /// After the loss's backward: recompute each block kept by the forward pass, last first, and carry the
    /// gradient at its output back through it to its input's producer. Leaves nothing kept. `replay` evaluates
    /// the nodes a block's last node needs into the environment it is given (the lowered model's `eval`, with
    /// the step's options); `hooks` bring each block's weights before its replay and take its gradients after.
    pub fn backward(
        &mut self,
        graph: &Graph,
        replay: &mut Replay<'_>,
        mut hooks: Option<&mut (dyn BlockWeights + '_)>,
    ) -> Result<(), TchError> {
        let keep = self.keep_graph;
        while let Some(s) = self.saved.pop() {
            let grad = s.leaf.grad();
            if !grad.defined() {
                continue;
            }
            let block = &graph.blocks[s.block];
            let x = s.input.f_detach()?.set_requires_grad(s.input.requires_grad());
            let mut env: Vec<Option<Tensor>> = (0..graph.nodes.len()).map(|_| None).collect();
            env[block.input] = Some(x.shallow_clone());
            if let Some(h) = hooks.as_deref_mut() {
                h.before(s.block)?;
                if let Some(n) = self.saved.last() {
                    h.prefetch(n.block)?;
                }
            }
            let now = match &s.rng {
                Some(state) => {
                    let now = rng_state(self.device)?;
                    set_rng_state(self.device, state)?;
                    Some(now)
                }
                None => None,
            };
            let replayed = replay(env.as_mut_slice(), block.last);
            if let Some(now) = &now {
                set_rng_state(self.device, now)?;
            }
            replayed?;
            let out = env[block.last]
                .take()
                .ok_or_else(|| TchError::Kind(format!("internal: block `{}` was not recomputed", block.name)))?;
            drop(env);
            backward_with(&out, &grad, false)?;
            drop(out);
            if let Some(h) = hooks.as_deref_mut() {
                h.after_backward(s.block)?;
            }
            if s.input.requires_grad() {
                let g = x.grad();
                if g.defined() {
                    backward_with(&s.input, &g, keep)?;
                }
            }
        }
        Ok(())
    }

    /// Drop what a forward pass kept (after a failed step).
    pub fn clear(&mut self) {
        self.saved.clear();
        self.current = None;
    }
}
