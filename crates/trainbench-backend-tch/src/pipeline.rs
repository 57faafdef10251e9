//! One pipeline rank of the tch backend: the chunks of the model it runs (`trainbench_graph::stages::cut_stages`,
//! dealt round-robin), only their weights allocated (the same values as a one-rank run's), and the steps of
//! its schedule ([`trainbench_comm::schedule`]) run in order: a forward pass of a chunk from the activations
//! the chunk before sent (fresh leaves that collect their gradient), a backward pass from the gradient the
//! chunk after sent. Sends are posted without waiting; the receives and the wait for the step's sends at its
//! end are timed as idle (waiting for a peer).
//!
//! What crosses a cut: every node before it (graph inputs apart, which each rank loads from the same
//! synthetic batches) that a node after it reads, in node order, as `f32` values. On a rank of a tensor group
//! the graph is its local one (same nodes, local widths): a stage sends its peer of the same tensor index what
//! it holds of the crossing, the whole activation or, with sequence parallelism, its sequence shard.

use std::collections::HashMap;
use std::ops::Range;
use std::time::Instant;

use tch::{Device, Kind, TchError, Tensor};
use trainbench_comm::Communicator;
use trainbench_comm::schedule::{Action, Carried, Message, Pass, Step};
use trainbench_graph::graph::{Graph, NodeId, Op};

use crate::autograd::CpuMemory;
use crate::lower::{DataPool, EvalOpts, Lowered};
use crate::tensor_parallel::TensorParallel;

/// Nodes before `at` (graph inputs apart) that a node at or after `at` reads: what crosses a cut at `at`.
pub(crate) fn crossing(graph: &Graph, at: usize) -> Vec<NodeId> {
    let mut out: Vec<NodeId> = graph.nodes[at.min(graph.nodes.len())..]
        .iter()
        .flat_map(|n| n.inputs.iter().copied())
        .filter(|&j| j < at && !matches!(graph.nodes[j].op, Op::Input { .. }))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// One chunk of the model as a rank runs it.
pub(crate) struct Chunk {
    /// Chunk index in model order.
    pub(crate) index: usize,
    /// Its nodes.
    pub(crate) nodes: Range<usize>,
    /// What it receives (the crossing at its start; empty for the first chunk).
    pub(crate) inputs: Vec<NodeId>,
    /// What it sends on (the crossing at its end; empty for the last chunk, which computes the losses).
    pub(crate) outputs: Vec<NodeId>,
}

/// What a forward pass keeps for its backward pass.
struct Held {
    /// The received activations, as leaves collecting their gradients.
    leaves: Vec<Tensor>,
    /// The chunk's outputs (the last chunk: its loss over the micro-batch count).
    outputs: Vec<Tensor>,
    /// A chunk before the last: its mixture-of-experts layers' load-balancing losses over the micro-batch count,
    /// trained from this stage (the last chunk's join its loss).
    aux: Option<Tensor>,
}

/// Seconds and bytes of one step on this rank.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StepFigures {
    /// Forward passes (losses included).
    pub(crate) forward_s: f64,
    /// Backward passes.
    pub(crate) backward_s: f64,
    /// Blocked in a send or receive (waiting for a peer).
    pub(crate) idle_s: f64,
    /// Bytes sent to other stages.
    pub(crate) bytes_sent: u64,
    /// The loss summed over the micro-batches (the last chunk's rank; 0 elsewhere).
    pub(crate) loss_sum: f64,
    /// The most bytes this thread held above the step's start (activations of the micro-batches in flight).
    pub(crate) activations_peak: u64,
}

/// A pipeline rank: its chunks, their weights and the step's messages in flight.
pub(crate) struct StageRank<'g> {
    pub(crate) graph: &'g Graph,
    pub(crate) device: Device,
    pub(crate) model: Lowered,
    pub(crate) chunks: Vec<Chunk>,
    /// Chunks in the whole pipeline.
    pub(crate) total_chunks: usize,
    pub(crate) microbatches: usize,
    /// Samples per micro-batch.
    pub(crate) micro_size: usize,
    pub(crate) pool: DataPool,
    held: HashMap<(usize, usize), Held>,
    /// The routing this rank's mixture-of-experts layers recorded in the step's forward passes so far.
    pub(crate) routing: Vec<crate::moe::Routing>,
    /// Received and to-be-sent values, by (what, micro-batch, chunk it is for).
    inbox: HashMap<(Carried, usize, usize), Vec<f32>>,
    outbox: HashMap<(Carried, usize, usize), Vec<f32>>,
}

fn internal(what: String) -> TchError {
    TchError::Kind(format!("pipeline: {what}"))
}

impl<'g> StageRank<'g> {
    /// The rank that runs `chunks` (node ranges in model order, of `total_chunks`), its weights allocated: on a
    /// rank of a tensor group (`tensor`, over the local graph `graph`), its share of them. A cut whose crossing
    /// enters a tensor-parallel region is refused (cuts between blocks carry the residual stream, which does not).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        graph: &'g Graph,
        device: Device,
        seed: u64,
        ranges: Vec<(usize, Range<usize>)>,
        total_chunks: usize,
        (microbatches, micro_size): (usize, usize),
        pool: DataPool,
        mut tensor: Option<TensorParallel>,
    ) -> Result<Self, TchError> {
        let owned = |i: usize| ranges.iter().any(|(_, r)| r.contains(&i));
        if let Some(tp) = tensor.as_mut() {
            tp.keep_nodes(owned);
        }
        let enters = |nodes: &[NodeId]| -> Result<(), TchError> {
            match nodes.iter().find(|&&j| tensor.as_ref().is_some_and(|tp| tp.enters(j))) {
                Some(&j) => Err(internal(format!(
                    "the pipeline cut carries `{}`, which enters a tensor-parallel region; cut between blocks",
                    graph.nodes[j].name
                ))),
                None => Ok(()),
            }
        };
        let mut cuts = Vec::with_capacity(ranges.len());
        for (index, nodes) in ranges.iter().cloned() {
            let inputs = if index == 0 { Vec::new() } else { crossing(graph, nodes.start) };
            let outputs = if index + 1 == total_chunks { Vec::new() } else { crossing(graph, nodes.end) };
            enters(&inputs)?;
            enters(&outputs)?;
            cuts.push((index, nodes, inputs, outputs));
        }
        let mut model = Lowered::new_partial(graph, device, seed, &owned, tensor)?;
        let mut chunks = Vec::with_capacity(cuts.len());
        for (index, nodes, inputs, outputs) in cuts {
            // A received activation is a leaf: nothing may overwrite it in place.
            model.keep_out_of_place(&inputs);
            chunks.push(Chunk { index, nodes, inputs, outputs });
        }
        Ok(Self {
            graph,
            device,
            model,
            chunks,
            total_chunks,
            microbatches,
            micro_size,
            pool,
            held: HashMap::new(),
            routing: Vec::new(),
            inbox: HashMap::new(),
            outbox: HashMap::new(),
        })
    }

    fn chunk(&self, index: usize) -> Result<&Chunk, TchError> {
        self.chunks.iter().find(|c| c.index == index).ok_or_else(|| internal(format!("chunk {index} is not here")))
    }

    /// Values one micro-batch of the crossing `nodes` holds.
    fn values_of(&self, nodes: &[NodeId]) -> usize {
        nodes.iter().map(|&j| self.graph.nodes[j].shape.numel() as usize * self.micro_size).sum()
    }

    /// Values message `m` carries.
    pub(crate) fn message_len(&self, m: &Message) -> usize {
        // The crossing into chunk `m.chunk` (activations), or out of it (gradients).
        let at = match m.carried {
            Carried::Activation => self.cut_before(m.chunk),
            Carried::Gradient => self.cut_before(m.chunk + 1),
        };
        at.map_or(0, |at| self.values_of(&crossing(self.graph, at)))
    }

    /// The first node of chunk `index` (its start), known for this rank's chunks and their neighbours.
    fn cut_before(&self, index: usize) -> Option<usize> {
        self.chunks.iter().find_map(|c| {
            if c.index == index {
                Some(c.nodes.start)
            } else if c.index + 1 == index {
                Some(c.nodes.end)
            } else {
                None
            }
        })
    }

    /// Run one step's `steps` over `comm` (whose rank `r` is pipeline rank `r`), data step `step`.
    pub(crate) fn run_steps(
        &mut self,
        steps: &[Step],
        comm: &mut dyn Communicator,
        step: u64,
    ) -> Result<StepFigures, TchError> {
        let mut f = StepFigures::default();
        let base = CpuMemory::allocated();
        let comm_error = |e: trainbench_comm::CommError| internal(format!("point-to-point message: {e}"));
        for s in steps {
            match s {
                Step::Compute(a) => {
                    let start = Instant::now();
                    match a.pass {
                        Pass::Forward => {
                            f.loss_sum += self.forward(*a, step)?;
                            f.forward_s += start.elapsed().as_secs_f64();
                            if let (Some(b), Some(now)) = (base, CpuMemory::allocated()) {
                                f.activations_peak = f.activations_peak.max(now.saturating_sub(b));
                            }
                        }
                        Pass::Backward => {
                            self.backward(*a)?;
                            f.backward_s += start.elapsed().as_secs_f64();
                        }
                    }
                }
                Step::Send(m) => {
                    let data = self.take_outgoing(m)?;
                    f.bytes_sent += 4 * data.len() as u64;
                    comm.post_send(m.peer, m.tag(self.microbatches), data).map_err(comm_error)?;
                }
                Step::Recv(m) => {
                    let mut data = vec![0f32; self.message_len(m)];
                    let start = Instant::now();
                    comm.recv(m.peer, m.tag(self.microbatches), &mut data).map_err(comm_error)?;
                    f.idle_s += start.elapsed().as_secs_f64();
                    self.inbox.insert((m.carried, m.micro, m.chunk), data);
                }
            }
        }
        let start = Instant::now();
        comm.wait_sends().map_err(comm_error)?;
        f.idle_s += start.elapsed().as_secs_f64();
        if !self.held.is_empty() || !self.inbox.is_empty() || !self.outbox.is_empty() {
            return Err(internal("a step ended with passes or messages left over".into()));
        }
        Ok(f)
    }

    fn take_outgoing(&mut self, m: &Message) -> Result<Vec<f32>, TchError> {
        self.outbox.remove(&(m.carried, m.micro, m.chunk)).ok_or_else(|| internal(format!("nothing to send for {m:?}")))
    }

    /// The forward pass of `a`; returns its (unscaled) loss on the last chunk, its load-balancing losses
    /// elsewhere (0 without mixture-of-experts layers): what it adds to the step's loss.
    fn forward(&mut self, a: Action, step: u64) -> Result<f64, TchError> {
        let graph = self.graph;
        let chunk = self.chunk(a.chunk)?;
        let (inputs, outputs, last) = (chunk.inputs.clone(), chunk.outputs.clone(), a.chunk + 1 == self.total_chunks);
        let mut env: Vec<Option<Tensor>> = (0..graph.nodes.len()).map(|_| None).collect();
        self.pool.load(step, a.micro, self.device, &mut env)?;
        let mut leaves = Vec::with_capacity(inputs.len());
        if !inputs.is_empty() {
            let values = self
                .inbox
                .remove(&(Carried::Activation, a.micro, a.chunk))
                .ok_or_else(|| internal(format!("the activations of {a:?} did not arrive")))?;
            for (j, t) in self.split(&inputs, &values)? {
                let leaf = t.set_requires_grad(true);
                env[j] = Some(leaf.shallow_clone());
                leaves.push(leaf);
            }
        }
        let targets = if last { graph.losses.clone() } else { outputs.clone() };
        self.model.eval(graph, &mut env, &targets, &EvalOpts::plain())?;
        // The routing of the chunk's mixture-of-experts layers (their load-balancing losses are taken below).
        self.routing.extend(crate::moe::take_routing());
        let outs: Vec<Tensor> = targets
            .iter()
            .map(|&t| env[t].take().ok_or_else(|| internal(format!("`{}` was not computed", graph.nodes[t].name))))
            .collect::<Result<_, _>>()?;
        drop(env);
        if last {
            let mut total: Option<Tensor> = None;
            for (&l, v) in graph.losses.iter().zip(outs) {
                let v = if let Op::Loss { weight, .. } = graph.nodes[l].op
                    && weight != 1.0
                {
                    v.f_mul_scalar(f64::from(weight))?
                } else {
                    v
                };
                total = Some(match total {
                    None => v,
                    Some(t) => t.f_add(&v)?,
                });
            }
            let loss = crate::moe::add_aux_losses(total.ok_or_else(|| internal("the graph has no loss".into()))?)?;
            let value = loss.f_double_value(&[])?;
            let scaled = loss.f_div_scalar(self.microbatches as f64)?;
            self.held.insert((a.micro, a.chunk), Held { leaves, outputs: vec![scaled], aux: None });
            return Ok(value);
        }
        let aux = crate::moe::aux_loss_sum()?;
        let aux_value = aux.as_ref().map(|t| t.f_double_value(&[])).transpose()?.unwrap_or(0.0);
        let aux = aux.map(|t| t.f_div_scalar(self.microbatches as f64)).transpose()?;
        let mut flat = Vec::with_capacity(self.values_of(&outputs));
        for o in &outs {
            flat.extend(host_values(o)?);
        }
        self.outbox.insert((Carried::Activation, a.micro, a.chunk + 1), flat);
        self.held.insert((a.micro, a.chunk), Held { leaves, outputs: outs, aux });
        Ok(aux_value)
    }

    /// The backward pass of `a`: from the loss on the last chunk, else from the gradient of its outputs.
    fn backward(&mut self, a: Action) -> Result<(), TchError> {
        let held = self
            .held
            .remove(&(a.micro, a.chunk))
            .ok_or_else(|| internal(format!("the backward pass of {a:?} has no forward pass")))?;
        if a.chunk + 1 == self.total_chunks {
            for o in &held.outputs {
                o.f_backward()?;
            }
        } else {
            let outputs = self.chunk(a.chunk)?.outputs.clone();
            let values = self
                .inbox
                .remove(&(Carried::Gradient, a.micro, a.chunk))
                .ok_or_else(|| internal(format!("the gradient of {a:?} did not arrive")))?;
            let grads = self.split(&outputs, &values)?;
            let pairs: Vec<(&Tensor, Tensor)> =
                held.outputs.iter().zip(grads).filter(|(o, _)| o.requires_grad()).map(|(o, (_, g))| (o, g)).collect();
            match (pairs.as_slice(), &held.aux) {
                ([], None) => {}
                ([(o, g)], None) => crate::autograd::backward_with(o, g, false)?,
                _ => {
                    // Several outputs, or load-balancing losses beside them: one backward pass from the sum of
                    // each output times its gradient (whose gradient with respect to each output is exactly that
                    // output's gradient) and the losses.
                    let mut total: Option<Tensor> = held.aux.as_ref().map(Tensor::shallow_clone);
                    for (o, g) in &pairs {
                        let term = o.f_mul(g)?.f_sum(Kind::Float)?;
                        total = Some(match total {
                            None => term,
                            Some(t) => t.f_add(&term)?,
                        });
                    }
                    if let Some(t) = total {
                        t.f_backward()?;
                    }
                }
            }
        }
        if a.chunk > 0 {
            let mut flat = Vec::new();
            for leaf in &held.leaves {
                let g = leaf.grad();
                if g.defined() {
                    flat.extend(host_values(&g)?);
                } else {
                    flat.extend(std::iter::repeat_n(0f32, leaf.numel()));
                }
            }
            self.outbox.insert((Carried::Gradient, a.micro, a.chunk - 1), flat);
        }
        Ok(())
    }

    /// `values` cut into one tensor per node of `nodes` (micro-batch first), on the device.
    fn split(&self, nodes: &[NodeId], values: &[f32]) -> Result<Vec<(NodeId, Tensor)>, TchError> {
        if values.len() != self.values_of(nodes) {
            return Err(internal(format!("{} values arrived, {} expected", values.len(), self.values_of(nodes))));
        }
        let mut at = 0;
        let mut out = Vec::with_capacity(nodes.len());
        for &j in nodes {
            let node = &self.graph.nodes[j];
            let n = node.shape.numel() as usize * self.micro_size;
            let mut shape = vec![self.micro_size as i64];
            shape.extend(node.shape.0.iter().map(|&d| d as i64));
            let t = Tensor::f_from_slice(&values[at..at + n])?.f_reshape(shape)?.f_to_device(self.device)?;
            out.push((j, t));
            at += n;
        }
        Ok(out)
    }
}

/// A tensor's values as `f32` in host memory.
fn host_values(t: &Tensor) -> Result<Vec<f32>, TchError> {
    let host = t.f_detach()?.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?.f_contiguous()?;
    let n = host.numel();
    let mut out = vec![0f32; n];
    host.f_copy_data(&mut out, n)?;
    Ok(out)
}
