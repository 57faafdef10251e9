//! The lowered model: one libtorch tensor per declared parameter and buffer (values from
//! `trainbench_graph::init`, identical on every backend), and the evaluation of graph nodes in topological
//! order with intermediate outputs freed as soon as their last consumer ran. A graph whose frozen weights are
//! kept in bf16 (LoRA's `base_dtype`) holds them as bf16 tensors, and its frozen layers compute in bf16.

use tch::{Device, Kind, TchError, Tensor};
use trainbench_graph::graph::{FrozenDtype, Graph, Node, NodeId, Op};
use trainbench_graph::init::{HostTensor, initial_values, synthetic_input};
use trainbench_graph::params::{ParamDecl, ParamRole, is_tied, node_tensors};

use crate::checkpoint::{BlockWeights, Checkpoints};
use crate::loss;
use crate::ops::{self, Flags};
use crate::tensor_parallel::TensorParallel;

/// How [`Lowered::eval`] runs the nodes.
pub struct EvalOpts<'f> {
    /// Nodes for which this is true run without gradient tracking (a frozen sub-network).
    pub frozen: &'f dyn Fn(&Node) -> bool,
    /// WGAN-GP critic update: the interpolates of `critic_batch` require gradients and the Wasserstein loss
    /// includes the gradient penalty.
    pub critic_update: bool,
}

impl EvalOpts<'static> {
    /// Every node trains; no critic update.
    pub fn plain() -> Self {
        Self { frozen: &|_| false, critic_update: false }
    }
}

/// A graph lowered to libtorch tensors on one device.
pub struct Lowered {
    /// Device every tensor lives on.
    pub device: Device,
    /// Declared tensors of each node (parameters and buffers), in `params::tensors` order.
    pub decls: Vec<Vec<ParamDecl>>,
    /// The tensors themselves, parallel to `decls`; parameters require gradients, buffers do not. A tied
    /// weight (`Node::tied_to`) is a handle on its owner's tensor.
    pub tensors: Vec<Vec<Tensor>>,
    /// Parallel to `decls`: whether the tensor is a tied alias (not allocated, counted or optimised again).
    tied: Vec<Vec<bool>>,
    /// Per-node constants computed once: the sinusoidal position table, the RoI-align interpolation weights.
    constants: Vec<Option<Tensor>>,
    /// Number of consumers of each node's output in the whole graph.
    consumers: Vec<usize>,
    /// Whether node i's output may be overwritten in place by its single consumer.
    inplace_ok: Vec<bool>,
    /// Whether node i holds bf16 frozen weights: it computes in bf16 (floating inputs cast to bf16, its output
    /// cast back to its first floating input's type, fp32 where it has none).
    bf16_base: Vec<bool>,
    /// This rank's share of a tensor-parallel model (`None`: the whole model).
    tensor: Option<TensorParallel>,
}

fn floating(kind: Kind) -> bool {
    matches!(kind, Kind::Float | Kind::Double | Kind::Half | Kind::BFloat16)
}

/// The floating tensors of `ins` cast to bf16 in place; returns the type the output goes back to (the first
/// floating input's, fp32 where none is floating: an embedding's ids).
fn to_bf16(ins: &mut [Tensor]) -> Result<Kind, TchError> {
    let back = ins.iter().map(Tensor::kind).find(|k| floating(*k)).unwrap_or(Kind::Float);
    for t in ins.iter_mut().filter(|t| floating(t.kind()) && t.kind() != Kind::BFloat16) {
        *t = t.f_to_kind(Kind::BFloat16)?;
    }
    Ok(back)
}

/// Producers whose backward does not read their own output, so a sole consumer may overwrite it in place
/// (as torchvision's `ReLU(inplace=True)` after batch norm and `out += identity` do).
fn output_not_saved(op: &Op) -> bool {
    matches!(
        op,
        Op::Conv { .. } | Op::BatchNorm { .. } | Op::LayerNorm { .. } | Op::Linear { .. } | Op::Lora { .. } | Op::Add
    )
}

impl Lowered {
    /// Allocate and initialise every declared tensor of `graph` on `device` from `seed` (tied weights share
    /// their owner's tensor), and compute the per-node constants.
    pub fn new(graph: &Graph, device: Device, seed: u64) -> Result<Self, TchError> {
        Self::build(graph, device, seed, &|_| true, None)
    }

    /// As [`Lowered::new`] for the nodes `owned` selects only (a pipeline rank's chunks): the others get no
    /// tensors and no constants. Each tensor has the value it has in the whole model (its slice of it on a rank
    /// of a tensor group, whose local graph `graph` then is). A weight tied to one outside the selection is
    /// refused.
    pub fn new_partial(
        graph: &Graph,
        device: Device,
        seed: u64,
        owned: &dyn Fn(usize) -> bool,
        tensor: Option<TensorParallel>,
    ) -> Result<Self, TchError> {
        Self::build(graph, device, seed, owned, tensor)
    }

    /// [`Lowered::new`] for one rank of a tensor group: `graph` is the rank's local graph
    /// ([`TensorParallel::local`]), each tensor initialised with its slice of the full model's values.
    pub fn with_tensor_parallel(
        graph: &Graph,
        device: Device,
        seed: u64,
        tensor: Option<TensorParallel>,
    ) -> Result<Self, TchError> {
        Self::build(graph, device, seed, &|_| true, tensor)
    }

    /// The nodes `owned` selects of `graph` (all but a pipeline rank's others), whole or as this rank's share of
    /// a tensor group.
    fn build(
        graph: &Graph,
        device: Device,
        seed: u64,
        owned: &dyn Fn(usize) -> bool,
        tensor: Option<TensorParallel>,
    ) -> Result<Self, TchError> {
        let n = graph.nodes.len();
        let mut consumers = vec![0usize; n];
        for node in &graph.nodes {
            for &i in &node.inputs {
                consumers[i] += 1;
            }
        }
        let mut decls: Vec<Vec<ParamDecl>> = Vec::with_capacity(n);
        let mut all: Vec<Vec<Tensor>> = Vec::with_capacity(n);
        let mut tied = Vec::with_capacity(n);
        let mut constants = Vec::with_capacity(n);
        let bf16 = graph.frozen_dtype == FrozenDtype::Bf16;
        let mut bf16_base = Vec::with_capacity(n);
        for (index, node) in graph.nodes.iter().enumerate() {
            if !owned(index) {
                decls.push(Vec::new());
                all.push(Vec::new());
                tied.push(Vec::new());
                constants.push(None);
                bf16_base.push(false);
                continue;
            }
            let ds = node_tensors(graph, index);
            bf16_base.push(bf16 && ds.iter().any(|d| d.role == ParamRole::Frozen));
            let mut ts = Vec::with_capacity(ds.len());
            let mut tf = Vec::with_capacity(ds.len());
            for d in &ds {
                if is_tied(node, d) {
                    let owner = node.tied_to.unwrap_or_default();
                    if !owned(owner) {
                        return Err(TchError::Kind(format!(
                            "`{}` is tied to `{}`, which another pipeline stage holds: untie the weights or keep \
                             both in one stage",
                            node.name, graph.nodes[owner].name
                        )));
                    }
                    let k = decls[owner].iter().position(|o| o.local == "weight").ok_or_else(|| {
                        TchError::Kind(format!("`{}` is tied to `{}`, which has no weight", node.name, d.name))
                    })?;
                    ts.push(all[owner][k].shallow_clone());
                    tf.push(true);
                    continue;
                }
                let id = decls.len();
                let values = match &tensor {
                    Some(tp) => tp.initial_values(id, d, seed),
                    None => initial_values(d, seed),
                };
                let shape: Vec<i64> = d.shape.iter().map(|&x| x as i64).collect();
                let t = Tensor::f_from_slice(&values)?.f_reshape(shape)?.f_to_device(device)?;
                let t = if bf16 && d.role == ParamRole::Frozen { t.f_to_kind(Kind::BFloat16)? } else { t };
                ts.push(if d.trainable() { t.set_requires_grad(true) } else { t });
                tf.push(false);
            }
            decls.push(ds);
            all.push(ts);
            tied.push(tf);
            let input_shape = node.inputs.first().map(|&i| graph.nodes[i].shape.0.as_slice()).unwrap_or(&[]);
            constants.push(ops::constant(node, input_shape, device)?);
        }
        let mut inplace_ok: Vec<bool> =
            graph.nodes.iter().enumerate().map(|(i, nd)| consumers[i] == 1 && output_not_saved(&nd.op)).collect();
        for &l in &graph.losses {
            for &i in &graph.nodes[l].inputs {
                inplace_ok[i] = false;
            }
        }
        Ok(Self { device, decls, tensors: all, tied, constants, consumers, inplace_ok, bf16_base, tensor })
    }

    /// Never overwrite the outputs of `nodes` in place (they are leaves a pipeline stage received).
    pub fn keep_out_of_place(&mut self, nodes: &[NodeId]) {
        for &j in nodes {
            if let Some(ok) = self.inplace_ok.get_mut(j) {
                *ok = false;
            }
        }
    }

    /// This rank's share of a tensor-parallel model, if the model is split.
    pub fn tensor_parallel(&self) -> Option<&TensorParallel> {
        self.tensor.as_ref()
    }

    /// Put the weights of every recurrent layer into one cuDNN buffer (as PyTorch's `flatten_parameters()`), so
    /// that cuDNN does not copy them into one on every call (and libtorch does not warn each time). The tensors
    /// stay the same parameters, now views into that buffer. CUDA with cuDNN only; fp32 weights.
    pub fn flatten_rnns(&self, graph: &Graph) -> Result<(), TchError> {
        for (i, node) in graph.nodes.iter().enumerate() {
            let Op::Rnn { cell, input_size, hidden, layers, bidirectional } = node.op else { continue };
            let weights = &self.tensors[i];
            let dirs = if bidirectional { 2 } else { 1 };
            // PyTorch's order: per layer and direction, weight_ih, weight_hh, bias_ih, bias_hh.
            if weights.len() != 4 * layers * dirs {
                continue;
            }
            // cuDNN's modes: LSTM 2, GRU 3.
            let mode = match cell {
                trainbench_graph::graph::RnnCell::Lstm => 2,
                trainbench_graph::graph::RnnCell::Gru => 3,
            };
            // The parameters become views into the returned buffer, which they keep alive.
            let _flat = tch::no_grad(|| {
                Tensor::f_internal_cudnn_rnn_flatten_weight(
                    weights,
                    4,
                    input_size as i64,
                    mode,
                    hidden as i64,
                    0,
                    layers as i64,
                    true,
                    bidirectional,
                )
            })?;
        }
        Ok(())
    }

    /// Every allocated tensor with its declaration and node (tied aliases excluded).
    fn owned(&self) -> impl Iterator<Item = (usize, &ParamDecl, &Tensor)> {
        (0..self.decls.len()).flat_map(move |i| {
            self.decls[i]
                .iter()
                .zip(&self.tensors[i])
                .zip(&self.tied[i])
                .filter(|(_, tied)| !**tied)
                .map(move |((d, t), _)| (i, d, t))
        })
    }

    /// Trained tensors of the nodes selected by `select` (shallow handles sharing storage and gradients);
    /// a tied weight appears once, with its owner.
    pub fn parameters(&self, graph: &Graph, select: impl Fn(&Node) -> bool) -> Vec<Tensor> {
        self.owned()
            .filter(|(i, d, _)| d.trainable() && select(&graph.nodes[*i]))
            .map(|(_, _, t)| t.shallow_clone())
            .collect()
    }

    /// Trained tensors with their node and declaration, in order (shallow handles; tied aliases excluded).
    pub fn trained<'g>(&self, graph: &'g Graph) -> Vec<(&'g Node, &ParamDecl, Tensor)> {
        self.owned()
            .filter(|(_, d, _)| d.trainable())
            .map(|(i, d, t)| (&graph.nodes[i], d, t.shallow_clone()))
            .collect()
    }

    /// Bytes of every allocated tensor (parameters and buffers).
    pub fn weight_bytes(&self) -> u64 {
        self.owned().map(|(_, _, t)| tensor_bytes(t)).sum()
    }

    /// Number of trained elements.
    pub fn parameter_count(&self) -> u64 {
        self.owned().filter(|(_, d, _)| d.trainable()).map(|(_, _, t)| t.numel() as u64).sum()
    }

    /// Evaluate the nodes `targets` need, in topological order, into `env` (entries already present are
    /// inputs and are not recomputed). Intermediate outputs are dropped after their last consumer, except
    /// `targets`. A loss node's value is its batch mean (unweighted).
    pub fn eval(
        &self,
        graph: &Graph,
        env: &mut [Option<Tensor>],
        targets: &[NodeId],
        opts: &EvalOpts<'_>,
    ) -> Result<(), TchError> {
        self.eval_checkpointed(graph, env, targets, opts, None, None)
    }

    /// [`Lowered::eval`], with the blocks `ckpt` recomputes run without gradients and continued from a fresh
    /// leaf of their output (what [`Checkpoints::backward`] needs is recorded in `ckpt`); `hooks` are called
    /// around each of those blocks.
    pub fn eval_checkpointed(
        &self,
        graph: &Graph,
        env: &mut [Option<Tensor>],
        targets: &[NodeId],
        opts: &EvalOpts<'_>,
        mut ckpt: Option<&mut Checkpoints>,
        mut hooks: Option<&mut (dyn BlockWeights + '_)>,
    ) -> Result<(), TchError> {
        let n = graph.nodes.len();
        let mut needed = vec![false; n];
        let mut stack: Vec<NodeId> = targets.to_vec();
        while let Some(i) = stack.pop() {
            if needed[i] {
                continue;
            }
            needed[i] = true;
            if env[i].is_none() {
                stack.extend(graph.nodes[i].inputs.iter().copied());
            }
        }
        let mut remaining = vec![0usize; n];
        for i in (0..n).filter(|&i| needed[i] && env[i].is_none()) {
            for &j in &graph.nodes[i].inputs {
                remaining[j] += 1;
            }
        }
        let keep: Vec<bool> = (0..n).map(|i| targets.contains(&i)).collect();
        for i in 0..n {
            if !needed[i] || env[i].is_some() {
                continue;
            }
            let node = &graph.nodes[i];
            let mut ins = Vec::with_capacity(node.inputs.len());
            for &j in &node.inputs {
                match &env[j] {
                    Some(t) => ins.push(t.shallow_clone()),
                    None => {
                        return Err(TchError::Kind(format!(
                            "internal: input `{}` of `{}` was not computed",
                            graph.nodes[j].name, node.name
                        )));
                    }
                }
            }
            // In place only when this node is the sole consumer and the input is not needed afterwards.
            let inplace = node.inputs.first().is_some_and(|&j| {
                self.inplace_ok[j]
                    && self.consumers[j] == 1
                    && !keep[j]
                    && remaining[j] == 1
                    && ckpt.as_ref().is_none_or(|c| !c.pinned(j))
            });
            if let Some(c) = ckpt.as_deref_mut() {
                c.entering(graph, i, env, hooks.as_deref_mut())?;
            }
            // A layer with bf16 frozen weights computes in bf16, its output back in the activations' type.
            let back = if self.bf16_base[i] { Some(to_bf16(&mut ins)?) } else { None };
            let no_grad = (opts.frozen)(node) || ckpt.as_ref().is_some_and(|c| c.inside());
            let flags = Flags { inplace, critic_update: opts.critic_update };
            let compute = || -> Result<Tensor, TchError> {
                if let Some(out) = self.tensor.as_ref().and_then(|tp| tp.forward(i, node, &ins, &self.tensors[i])) {
                    return out;
                }
                match &node.op {
                    Op::Loss { loss, .. } => loss::forward(graph, i, *loss, &ins, opts.critic_update),
                    Op::Input { .. }
                    | Op::Conv { .. }
                    | Op::BatchNorm { .. }
                    | Op::LayerNorm { .. }
                    | Op::RmsNorm { .. }
                    | Op::Linear { .. }
                    | Op::Embedding { .. }
                    | Op::Rnn { .. }
                    | Op::Attention { .. }
                    | Op::Rotary { .. }
                    | Op::Sdpa { .. }
                    | Op::ClassToken { .. }
                    | Op::EmbeddingBag { .. }
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
                    | Op::LearnedPositions { .. }
                    | Op::CriticBatch
                    | Op::RoiAlign { .. }
                    | Op::Lora { .. }
                    | Op::Moe { .. } => ops::forward(node, &ins, &self.tensors[i], self.constants[i].as_ref(), flags),
                }
            };
            let out = if no_grad { tch::no_grad(compute)? } else { compute()? };
            let out = match back {
                Some(kind) if out.kind() != kind => out.f_to_kind(kind)?,
                _ => out,
            };
            let out = match &self.tensor {
                Some(tp) if no_grad => tch::no_grad(|| tp.enter(i, out))?,
                Some(tp) => tp.enter(i, out)?,
                None => out,
            };
            drop(ins);
            env[i] = Some(match ckpt.as_deref_mut() {
                Some(c) => c.leaving(i, out, hooks.as_deref_mut())?,
                None => out,
            });
            for &j in &node.inputs {
                remaining[j] = remaining[j].saturating_sub(1);
                if remaining[j] == 0 && !keep[j] {
                    env[j] = None;
                }
            }
        }
        Ok(())
    }
}

/// Bytes of the gradients `params` hold now (tensors without one count nothing).
pub fn grad_bytes<'t>(params: impl IntoIterator<Item = &'t Tensor>) -> u64 {
    params.into_iter().map(Tensor::grad).filter(Tensor::defined).map(|g| tensor_bytes(&g)).sum()
}

/// Bytes held by a tensor's elements.
pub fn tensor_bytes(t: &Tensor) -> u64 {
    t.numel() as u64 * t.kind().elt_size_in_bytes() as u64
}

/// A pool of synthetic batches kept in host memory, cycled through during a run.
pub struct DataPool {
    /// `batches[s * micro + j][i]` = input `inputs[i]` of micro-batch j of pool step s.
    batches: Vec<Vec<Tensor>>,
    /// Micro-batches per step (gradient accumulation; 1 without).
    micro: usize,
    /// Graph input node of each tensor.
    pub inputs: Vec<NodeId>,
}

impl DataPool {
    /// Generate `count` batches of every graph input with `trainbench_graph::init::synthetic_input`
    /// (step k of the pool uses data step k, so every backend cycles through the same batches). On CUDA the
    /// host copies are pinned so the per-step transfer is a true asynchronous-capable DMA.
    pub fn new(graph: &Graph, batch: usize, seed: u64, count: usize, device: Device) -> Result<Self, TchError> {
        Self::new_slice(graph, batch, (0, 1), seed, count, device)
    }

    /// As [`DataPool::new`] for worker `slice.0` of `slice.1`: every worker generates the same global batches
    /// of `batch` samples and keeps its contiguous share of `batch / workers` samples, so the workers together
    /// train on exactly what one worker would train on alone.
    pub fn new_slice(
        graph: &Graph,
        batch: usize,
        slice: (usize, usize),
        seed: u64,
        count: usize,
        device: Device,
    ) -> Result<Self, TchError> {
        Self::new_micro(graph, batch, 1, slice, seed, count, device)
    }

    /// As [`DataPool::new_slice`] with `micro` micro-batches of `batch` samples per step (gradient
    /// accumulation): step s generates the global batch of `micro x batch` samples that a run of that batch
    /// size trains on at step s, and micro-batch j is its rows `j*batch .. (j+1)*batch` (of which the worker
    /// keeps its share).
    pub fn new_micro(
        graph: &Graph,
        batch: usize,
        micro: usize,
        slice: (usize, usize),
        seed: u64,
        count: usize,
        device: Device,
    ) -> Result<Self, TchError> {
        let (worker, workers) = (slice.0, slice.1.max(1));
        let micro = micro.max(1);
        let local = batch / workers;
        let inputs: Vec<NodeId> = graph.inputs().map(|(i, _)| i).collect();
        let mut batches = Vec::with_capacity(count * micro);
        for step in 0..count {
            let global: Vec<HostTensor> =
                inputs.iter().map(|&i| synthetic_input(graph, i, batch * micro, seed, step as u64)).collect();
            for j in 0..micro {
                let mut b = Vec::with_capacity(inputs.len());
                for (&i, host) in inputs.iter().zip(&global) {
                    let mut shape = vec![local as i64];
                    shape.extend(graph.nodes[i].shape.0.iter().map(|&d| d as i64));
                    let per = graph.nodes[i].shape.numel() as usize;
                    let first = j * batch + worker * local;
                    let rows = first * per..(first + local) * per;
                    let t = match host {
                        HostTensor::Dense(v) => Tensor::f_from_slice(&v[rows])?,
                        HostTensor::Ids(v) => Tensor::f_from_slice(&v[rows])?,
                    }
                    .f_reshape(shape)?;
                    b.push(if device.is_cuda() { pinned(&t)? } else { t });
                }
                batches.push(b);
            }
        }
        Ok(Self { batches, micro, inputs })
    }

    /// Bytes of one step's batches (every micro-batch).
    pub fn batch_bytes(&self) -> u64 {
        self.batches.iter().take(self.micro).map(|b| b.iter().map(tensor_bytes).sum::<u64>()).sum()
    }

    /// Pool steps for a pool of `micro` micro-batches of `batch` samples cut over `workers` (as
    /// [`DataPool::new_micro`] would hold them): [`pool_size`] of one step's bytes, read from the graph's input
    /// shapes, so that nothing is generated to size the pool (a batch of 2.5 GB takes tens of seconds to draw).
    pub fn steps_for(graph: &Graph, batch: usize, micro: usize, workers: usize) -> usize {
        pool_size(Self::step_bytes(graph, batch, micro, workers))
    }

    /// What [`DataPool::batch_bytes`] of that pool would say, from the graph's input shapes alone.
    pub fn step_bytes(graph: &Graph, batch: usize, micro: usize, workers: usize) -> u64 {
        let local = (batch / workers.max(1)) as u64;
        let sample: u64 = graph.inputs().map(|(_, n)| n.shape.numel() * input_element_bytes(n)).sum();
        sample * local * micro.max(1) as u64
    }

    /// Fill `env` with micro-batch `micro` of pool step `step % count` on `device` (on CUDA a non-blocking
    /// copy from the pinned host batch, queued on the stream like a kernel; a no-copy handle on the CPU).
    pub fn load(&self, step: u64, micro: usize, device: Device, env: &mut [Option<Tensor>]) -> Result<(), TchError> {
        let steps = (self.batches.len() / self.micro).max(1) as u64;
        let index = (step % steps) as usize * self.micro + micro.min(self.micro - 1);
        let b = &self.batches[index];
        for (t, &i) in b.iter().zip(&self.inputs) {
            env[i] =
                Some(if device.is_cuda() { t.f_to_device_(device, t.kind(), true, false)? } else { t.shallow_clone() });
        }
        Ok(())
    }
}

/// A pinned copy of a host tensor (for non-blocking copies to CUDA).
pub fn pinned(t: &Tensor) -> Result<Tensor, TchError> {
    crate::shim::pin_memory(t).map_err(|e| TchError::Torch(format!("pin_memory: {e}")))
}

/// Host bytes a run needs before libtorch allocates anything: the initial values of every declared tensor
/// (generated in host memory, then copied into a tensor) and one batch of every input.
pub fn host_bytes_needed(graph: &Graph, batch: usize) -> u64 {
    let weights: u64 = graph.nodes.iter().flat_map(trainbench_graph::params::tensors).map(|d| d.numel() * 4 * 2).sum();
    let inputs: u64 = graph.inputs().map(|(_, n)| n.shape.numel() * input_element_bytes(n) * 2).sum();
    weights + inputs * batch as u64
}

/// Bytes of one element of graph input `n` on the host: 4 for dense values (f32), 8 for ids (i64).
fn input_element_bytes(n: &Node) -> u64 {
    if matches!(n.op, Op::Input { kind: trainbench_graph::graph::InputKind::Dense }) { 4 } else { 8 }
}

/// Bytes of memory the kernel says are available to new allocations (MemAvailable), if readable.
pub fn host_available_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Number of pool batches for a batch of `bytes`: 4, fewer when a batch is over 256 MiB (at least 1).
pub fn pool_size(bytes: u64) -> usize {
    const BUDGET: u64 = 1 << 30;
    (BUDGET / bytes.max(1)).clamp(1, 4) as usize
}
