//! Lowering of the workload graph to burn tensor operations: one forward pass over the nodes in order, from a
//! synthetic batch to the sum of the loss nodes' batch means, each times its weight.

use burn::tensor::{Device, Int, Tensor, TensorData};
use trainbench_graph::Graph;
use trainbench_graph::graph::{LossKind, Node, NodeId, Op};
use trainbench_graph::init::{HostTensor, synthetic_input};
use trainbench_graph::params::ParamRole;

use crate::layers::{self, ConvSpec, PoolSpec};
use crate::loss;
use crate::params::Store;
use crate::seq::{self, AttentionWeights, Projections, RnnWeights};
use crate::value::{Act, IntAct, RANK, Value, ValueError, pad};

/// One batch in host memory (synthetic or read from a dataset): every graph input with its values.
pub type HostBatch = Vec<(NodeId, HostTensor)>;

/// Bytes of a host batch as libtorch holds it (fp32 values, int64 ids).
fn host_bytes(batch: &HostBatch) -> u64 {
    batch
        .iter()
        .map(|(_, t)| match t {
            HostTensor::Dense(v) => v.len() as u64 * 4,
            HostTensor::Ids(v) => v.len() as u64 * 8,
        })
        .sum()
}

/// The pool of synthetic batches a run cycles through, as every backend does: data steps `0..k`, with `k = 4`,
/// fewer when a batch exceeds 256 MiB (at least 1); iteration `i` uses batch `i % k`.
pub fn data_pool(graph: &Graph, batch: usize, seed: u64) -> Vec<HostBatch> {
    const BUDGET: u64 = 1 << 30;
    let make = |step: u64| -> HostBatch {
        graph.inputs().map(|(id, _)| (id, synthetic_input(graph, id, batch, seed, step))).collect()
    };
    let first = make(0);
    let count = (BUDGET / host_bytes(&first).max(1)).clamp(1, 4);
    let mut pool = vec![first];
    pool.extend((1..count).map(make));
    pool
}

/// Upload one host batch to `device`.
pub fn upload(graph: &Graph, batch: usize, host: &HostBatch, device: &Device) -> Vec<(NodeId, Value)> {
    host.iter()
        .map(|(id, data)| {
            let mut shape = vec![batch];
            shape.extend(&graph.nodes[*id].shape.0);
            let value = match data {
                HostTensor::Dense(v) => Value::F(Act {
                    t: Tensor::<RANK>::from_data(TensorData::new(v.clone(), pad(&shape)), device),
                    shape,
                }),
                HostTensor::Ids(v) => Value::I(IntAct {
                    t: Tensor::<RANK, Int>::from_data(TensorData::new(v.clone(), pad(&shape)), device),
                    shape,
                }),
            };
            (*id, value)
        })
        .collect()
}

/// One forward pass: the graph, its tensors, this step's autodiff leaves, and the buffer updates it produces.
pub struct Forward<'a> {
    graph: &'a Graph,
    store: &'a Store,
    leaves: &'a [Tensor<1>],
    batch: usize,
    /// New values of buffers (batch-norm running statistics), by slot.
    pub buffer_updates: Vec<(usize, Tensor<1>)>,
    /// A node whose value [`Forward::run`] keeps in [`Forward::kept`] (an evaluation's logits).
    pub keep: Option<NodeId>,
    /// The value of [`Forward::keep`] after a run.
    pub kept: Option<Value>,
}

/// PyTorch's batch-norm momentum for the running statistics.
const BN_MOMENTUM: f64 = 0.1;

impl<'a> Forward<'a> {
    /// Prepare a forward pass of `graph` with `leaves` (from [`Store::leaves`]) at `batch` samples.
    pub fn new(graph: &'a Graph, store: &'a Store, leaves: &'a [Tensor<1>], batch: usize) -> Self {
        Self { graph, store, leaves, batch, buffer_updates: Vec::new(), keep: None, kept: None }
    }

    fn param(&self, id: NodeId, local: &str) -> Result<Tensor<1>, ValueError> {
        let slot = self
            .store
            .find(id, local)
            .ok_or_else(|| ValueError(format!("`{}` has no tensor `{local}`", self.graph.nodes[id].name)))?;
        Ok(self.leaves[slot].clone())
    }

    fn out_shape(&self, node: &Node) -> Vec<usize> {
        let mut s = vec![self.batch];
        s.extend(&node.shape.0);
        s
    }

    /// Run every node in order and return the sum of the loss nodes' batch means.
    pub fn run(&mut self, inputs: Vec<(NodeId, Value)>) -> Result<Tensor<1>, ValueError> {
        let mut values: Vec<Option<Value>> = vec![None; self.graph.nodes.len()];
        for (id, v) in inputs {
            values[id] = Some(v);
        }
        // Free each value after its last use.
        let mut last_use = vec![0usize; self.graph.nodes.len()];
        for (i, n) in self.graph.nodes.iter().enumerate() {
            for &j in &n.inputs {
                last_use[j] = i;
            }
        }
        let mut total: Option<Tensor<1>> = None;
        for (id, node) in self.graph.nodes.iter().enumerate() {
            if matches!(node.op, Op::Input { .. }) {
                continue;
            }
            let args: Vec<&Value> = node
                .inputs
                .iter()
                .map(|&j| values[j].as_ref().ok_or_else(|| ValueError(format!("input {j} of `{}` missing", node.name))))
                .collect::<Result<_, _>>()?;
            if let Op::Loss { loss, weight } = &node.op {
                let l = self.loss(node, *loss, &args)?;
                let l = if *weight == 1.0 { l } else { l.mul_scalar(f64::from(*weight)) };
                total = Some(match total {
                    Some(t) => t + l,
                    None => l,
                });
            } else {
                let v = self.node(id, node, &args)?;
                if self.keep == Some(id) {
                    self.kept = Some(v.clone());
                }
                values[id] = Some(v);
            }
            for &j in &node.inputs {
                if last_use[j] == id {
                    values[j] = None;
                }
            }
        }
        total.ok_or_else(|| ValueError("the graph has no loss".into()))
    }

    fn loss(&self, node: &Node, kind: LossKind, args: &[&Value]) -> Result<Tensor<1>, ValueError> {
        let what = node.name.as_str();
        match kind {
            LossKind::CrossEntropy => Ok(loss::cross_entropy(args[0].float(what)?, args[1].int(what)?)),
            LossKind::Mse => Ok(loss::mse(args[0].float(what)?, args[1].float(what)?)),
            LossKind::SmoothL1 { beta } => {
                Ok(loss::smooth_l1(args[0].float(what)?, args[1].float(what)?, f64::from(beta)))
            }
            LossKind::BceWithLogits => Ok(loss::bce_with_logits(args[0].float(what)?, args[1])),
            LossKind::Ctc => loss::ctc(args[0].float(what)?, args[1].int(what)?),
            LossKind::ActorCritic { entropy, value } => Ok(loss::actor_critic(
                args[0].float(what)?,
                args[1].float(what)?,
                args[2].int(what)?,
                args[3].float(what)?,
                &loss::ActorCriticWeights { entropy: f64::from(entropy), value: f64::from(value) },
            )),
            LossKind::Wasserstein { .. } => Err(ValueError("WGAN-GP loss is refused by check()".into())),
        }
    }

    fn node(&mut self, id: NodeId, node: &Node, args: &[&Value]) -> Result<Value, ValueError> {
        let what = node.name.as_str();
        let out = self.out_shape(node);
        let y = match &node.op {
            Op::Input { .. } => return Err(ValueError("inputs are fed, not computed".into())),
            Op::Conv { kernel, stride, padding, dilation, groups, bias, transposed, output_padding, .. } => {
                let spec = ConvSpec {
                    kernel,
                    stride,
                    padding,
                    dilation,
                    output_padding,
                    groups: *groups,
                    transposed: *transposed,
                };
                let wshape = self.decl_shape(id, "weight")?;
                let b = if *bias { Some(self.param(id, "bias")?) } else { None };
                layers::conv(args[0].float(what)?, self.param(id, "weight")?, &wshape, b, &spec, out)?
            }
            Op::BatchNorm { eps, .. } => {
                let r = layers::batch_norm(
                    args[0].float(what)?,
                    self.param(id, "weight")?,
                    self.param(id, "bias")?,
                    f64::from(*eps),
                )?;
                self.update_running(id, "running_mean", r.mean)?;
                self.update_running(id, "running_var", r.var_unbiased)?;
                r.y
            }
            Op::LayerNorm { eps, .. } => layers::layer_norm(
                args[0].float(what)?,
                self.param(id, "weight")?,
                self.param(id, "bias")?,
                f64::from(*eps),
            ),
            Op::RmsNorm { eps, .. } => {
                layers::rms_norm(args[0].float(what)?, self.param(id, "weight")?, f64::from(*eps))
            }
            Op::Rotary { heads, head_dim, theta } => {
                Act::with_shape(seq::rotary(args[0].float(what)?.get()?, *heads, *head_dim, *theta), out)
            }
            Op::Sdpa { heads, kv_heads, causal, .. } => {
                let (q, k, v) = (args[0].float(what)?, args[1].float(what)?, args[2].float(what)?);
                Act::with_shape(seq::sdpa(q.get()?, k.get()?, v.get()?, *heads, *kv_heads, *causal), out)
            }
            Op::ClassToken { .. } => layers::class_token(args[0].float(what)?, self.param(id, "class_token")?, out)?,
            Op::EmbeddingBag { vocab, dim, mode } => {
                layers::embedding_bag(args[0].int(what)?, self.param(id, "weight")?, *vocab, *dim, *mode)
            }
            Op::Linear { in_features, out_features, bias } => {
                let b = if *bias { Some(self.param(id, "bias")?) } else { None };
                layers::linear(args[0].float(what)?, self.param(id, "weight")?, *out_features, *in_features, b)
            }
            Op::Embedding { vocab, dim } => {
                let ids = args[0].int(what)?;
                let rows: usize = ids.shape[1..].iter().product();
                let w = self.param(id, "weight")?.reshape([*vocab, *dim]);
                let e = burn::tensor::module::embedding(w, ids.view([self.batch, rows]));
                Act::with_shape(e, out)
            }
            Op::Rnn { cell, hidden, layers, bidirectional, .. } => {
                let x = args[0].float(what)?;
                let mut h: Tensor<3> = x.get::<3>()?;
                for l in 0..*layers {
                    let mut dirs = Vec::new();
                    for (d, sfx) in ["", "_reverse"].iter().enumerate().take(if *bidirectional { 2 } else { 1 }) {
                        let w = RnnWeights {
                            w_ih: self.param(id, &format!("weight_ih_l{l}{sfx}"))?,
                            w_hh: self.param(id, &format!("weight_hh_l{l}{sfx}"))?,
                            b_ih: self.param(id, &format!("bias_ih_l{l}{sfx}"))?,
                            b_hh: self.param(id, &format!("bias_hh_l{l}{sfx}"))?,
                        };
                        dirs.push(seq::rnn_direction(h.clone(), *cell, *hidden, w, d == 1));
                    }
                    h = if dirs.len() == 1 { dirs.remove(0) } else { Tensor::cat(dirs, 2) };
                }
                Act::with_shape(h, out)
            }
            Op::Attention { heads, causal, .. } => {
                let proj = if self.store.find(id, "in_proj_weight").is_some() {
                    Projections::Packed(Box::new(self.param(id, "in_proj_weight")?))
                } else {
                    Projections::Separate(Box::new([
                        self.param(id, "q_proj_weight")?,
                        self.param(id, "k_proj_weight")?,
                        self.param(id, "v_proj_weight")?,
                    ]))
                };
                let w = AttentionWeights {
                    proj,
                    in_bias: self.param(id, "in_proj_bias")?,
                    out_w: self.param(id, "out_proj.weight")?,
                    out_b: self.param(id, "out_proj.bias")?,
                };
                let (q, k, v) = (args[0].float(what)?, args[1].float(what)?, args[2].float(what)?);
                Act::with_shape(seq::attention(q.get()?, k.get()?, v.get()?, *heads, *causal, w), out)
            }
            Op::Pool { kind, kernel, stride, padding, ceil_mode } => {
                let spec = PoolSpec { kind: *kind, kernel, stride, padding, ceil_mode: *ceil_mode };
                layers::pool(args[0].float(what)?, &spec, out)?
            }
            Op::AdaptivePool { kind, output } => layers::adaptive_pool(args[0].float(what)?, *kind, output, out)?,
            Op::Act { function } => layers::act(args[0].float(what)?, *function),
            Op::Softmax => {
                let x = args[0].float(what)?;
                Act { t: burn::tensor::activation::softmax(x.t.clone(), RANK - 1), shape: out }
            }
            Op::Dropout { p } => layers::dropout(args[0].float(what)?, *p),
            Op::Add | Op::Mul => {
                let mut acc = args[0].float(what)?.t.clone();
                for a in &args[1..] {
                    let t = a.float(what)?.t.clone();
                    acc = if matches!(node.op, Op::Add) { acc + t } else { acc * t };
                }
                Act { t: acc, shape: out }
            }
            Op::Concat { axis } => {
                let first = args[0].float(what)?;
                let dim = first.axis(*axis);
                let parts = args.iter().map(|a| a.float(what).map(|x| x.t.clone())).collect::<Result<Vec<_>, _>>()?;
                Act { t: Tensor::cat(parts, dim), shape: out }
            }
            Op::Reshape { .. } => {
                let x = args[0].float(what)?;
                Act { t: x.t.clone().reshape(pad(&out)), shape: out }
            }
            Op::Transpose { a, b } => {
                let x = args[0].float(what)?;
                let t = x.t.clone().swap_dims(x.axis(*a), x.axis(*b));
                Act { t, shape: out }
            }
            Op::Slice { axis, start, len } => {
                let x = args[0].float(what)?;
                Act { t: x.t.clone().narrow(x.axis(*axis), *start, *len), shape: out }
            }
            Op::Mean { axis } => {
                let x = args[0].float(what)?;
                Act { t: x.t.clone().mean_dim(x.axis(*axis)).reshape(pad(&out)), shape: out }
            }
            Op::MatMul { transpose_b } => {
                let (a, b) = (args[0].float(what)?, args[1].float(what)?);
                let b = if *transpose_b { b.t.clone().swap_dims(RANK - 2, RANK - 1) } else { b.t.clone() };
                Act { t: a.t.clone().matmul(b), shape: out }
            }
            Op::SinusoidalPositions { scale } => {
                let x = args[0].float(what)?;
                let [t, e] = [out[out.len() - 2], out[out.len() - 1]];
                let pe = Tensor::<1>::from_data(TensorData::new(sinusoidal_table(t, e), [t * e]), &x.t.device());
                Act { t: x.t.clone().mul_scalar(f64::from(*scale)) + pe.reshape(pad(&[t, e])), shape: out }
            }
            Op::LearnedPositions { max_positions, dim } => {
                let x = args[0].float(what)?;
                let t = out[out.len() - 2];
                let table = self.param(id, "weight")?.reshape([*max_positions, *dim]).narrow(0, 0, t);
                Act { t: x.t.clone() + table.reshape(pad(&[t, *dim])), shape: out }
            }
            Op::CriticBatch => return Err(ValueError("WGAN-GP's critic batch is refused by check()".into())),
            Op::RoiAlign { .. } => return Err(ValueError("RoIAlign is refused by check()".into())),
            Op::Lora { .. } => return Err(ValueError("LoRA adapters are refused by check()".into())),
            Op::Moe { .. } => return Err(ValueError("mixture-of-experts layers are refused by check()".into())),
            Op::Loss { .. } => return Err(ValueError("losses are reduced separately".into())),
        };
        Ok(Value::F(y))
    }

    fn decl_shape(&self, id: NodeId, local: &str) -> Result<Vec<usize>, ValueError> {
        let slot = self.store.find(id, local).ok_or_else(|| ValueError(format!("no tensor `{local}`")))?;
        Ok(self.store.slots[slot].decl.shape.clone())
    }

    fn update_running(&mut self, id: NodeId, local: &str, batch_stat: Tensor<1>) -> Result<(), ValueError> {
        let slot = self.store.find(id, local).ok_or_else(|| ValueError(format!("no buffer `{local}`")))?;
        debug_assert_eq!(self.store.slots[slot].decl.role, ParamRole::Buffer);
        let old = self.store.slots[slot].value.clone();
        let new = old.mul_scalar(1.0 - BN_MOMENTUM) + batch_stat.mul_scalar(BN_MOMENTUM);
        self.buffer_updates.push((slot, new));
        Ok(())
    }
}

/// The fixed sinusoidal position table `[t, e]` (Vaswani et al.), row-major: `PE[p, 2i] = sin(p / 10000^(2i/e))`,
/// `PE[p, 2i+1] = cos(..)`, computed in f64 and rounded to f32 as the tch backend does.
fn sinusoidal_table(t: usize, e: usize) -> Vec<f32> {
    let mut pe = vec![0f32; t * e];
    for pos in 0..t {
        for i in 0..e / 2 {
            let angle = pos as f64 / 10000f64.powf(2.0 * i as f64 / e as f64);
            pe[pos * e + 2 * i] = angle.sin() as f32;
            pe[pos * e + 2 * i + 1] = angle.cos() as f32;
        }
    }
    pe
}
