//! Forward lowering of single graph operations to libtorch functional ops (losses live in `loss`).
//!
//! Tensors carry the batch as their leading dimension; per-sample shapes are those of the graph. Extra leading
//! per-sample dimensions (RoI proposals `[P, C, H, W]`) are folded into the batch for convolution, pooling and
//! batch normalisation and unfolded afterwards.

use tch::{Device, Kind, TchError, Tensor};
use trainbench_graph::graph::{Activation, Node, Op, PoolKind, RnnCell};

use crate::transformer_ops;

/// Per-call switches of [`forward`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Flags {
    /// The operation may overwrite its first input instead of allocating (decided by `lower`).
    pub inplace: bool,
    /// WGAN-GP critic update: `critic_batch` makes its interpolates require gradients.
    pub critic_update: bool,
}

fn i64s(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

/// Reshape `x` to `[-1, trailing dims]` keeping its last `keep` dimensions; returns the folded tensor and the
/// leading dimensions to restore (None when nothing was folded).
fn fold(x: &Tensor, keep: usize) -> Result<(Tensor, Option<Vec<i64>>), TchError> {
    let size = x.size();
    if size.len() <= keep + 1 {
        return Ok((x.shallow_clone(), None));
    }
    let split = size.len() - keep;
    let mut target = vec![-1i64];
    target.extend_from_slice(&size[split..]);
    Ok((x.f_reshape(target)?, Some(size[..split].to_vec())))
}

/// Undo [`fold`]: `y` is `[N, ...]`; the result is `[leading..., ...]`.
fn unfold(y: Tensor, leading: Option<Vec<i64>>) -> Result<Tensor, TchError> {
    match leading {
        None => Ok(y),
        Some(mut lead) => {
            lead.extend_from_slice(&y.size()[1..]);
            y.f_reshape(lead)
        }
    }
}

/// The constant a node needs, computed once per run from its input's per-sample shape: the position table of
/// `sinusoidal_positions`, the interpolation weights of `roi_align`.
pub fn constant(node: &Node, input_shape: &[usize], device: Device) -> Result<Option<Tensor>, TchError> {
    match &node.op {
        Op::SinusoidalPositions { .. } if input_shape.len() == 2 => {
            let (t, e) = (input_shape[0], input_shape[1]);
            let mut pe = vec![0f32; t * e];
            for pos in 0..t {
                for i in 0..e / 2 {
                    let angle = pos as f64 / 10000f64.powf(2.0 * i as f64 / e as f64);
                    pe[pos * e + 2 * i] = angle.sin() as f32;
                    pe[pos * e + 2 * i + 1] = angle.cos() as f32;
                }
            }
            Ok(Some(Tensor::f_from_slice(&pe)?.f_reshape([t as i64, e as i64])?.f_to_device(device)?))
        }
        Op::Rotary { head_dim, theta, .. } if input_shape.len() == 2 => {
            Ok(Some(transformer_ops::rotary_table(input_shape[0], *head_dim, *theta, device)?))
        }
        Op::RoiAlign { proposals, output, sampling_ratio, .. } if input_shape.len() == 3 && output.len() == 2 => {
            let wts = roi_weights(*proposals, input_shape[1], input_shape[2], output, (*sampling_ratio).max(1));
            Ok(Some(Tensor::f_from_slice(&wts)?.f_to_device(device)?))
        }
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
        | Op::Moe { .. }
        | Op::Loss { .. } => Ok(None),
    }
}

fn missing_constant(node: &Node) -> TchError {
    TchError::Kind(format!("internal: no constant computed for `{}` ({})", node.name, node.op.kind_name()))
}

/// Compute one non-loss node's output from its inputs, parameters (in `params::tensors` order) and constant.
pub fn forward(
    node: &Node,
    inputs: &[Tensor],
    params: &[Tensor],
    constant: Option<&Tensor>,
    flags: Flags,
) -> Result<Tensor, TchError> {
    let x = &inputs[0];
    let inplace = flags.inplace;
    match &node.op {
        Op::Input { .. } | Op::Loss { .. } => {
            Err(TchError::Kind(format!("internal: node `{}` ({}) is not an operation", node.name, node.op.kind_name())))
        }
        Op::Conv { kernel, stride, padding, dilation, groups, transposed, output_padding, bias, .. } => {
            let (xf, lead) = fold(x, kernel.len() + 1)?;
            let b = if *bias { params.get(1) } else { None };
            let y = xf.f_convolution(
                &params[0],
                b,
                i64s(stride),
                i64s(padding),
                i64s(dilation),
                *transposed,
                i64s(output_padding),
                *groups as i64,
            )?;
            unfold(y, lead)
        }
        Op::BatchNorm { eps, .. } => {
            let (xf, lead) = fold(x, 3)?;
            let y = xf.f_batch_norm(
                Some(&params[0]),
                Some(&params[1]),
                Some(&params[2]),
                Some(&params[3]),
                true,
                0.1,
                f64::from(*eps),
                true,
            )?;
            unfold(y, lead)
        }
        Op::LayerNorm { features, eps } => {
            x.f_layer_norm([*features as i64], Some(&params[0]), Some(&params[1]), f64::from(*eps), true)
        }
        Op::RmsNorm { features, eps } => x.f_rms_norm([*features as i64], Some(&params[0]), f64::from(*eps)),
        Op::Rotary { heads, head_dim, .. } => {
            transformer_ops::rotary(x, constant.ok_or_else(|| missing_constant(node))?, *heads, *head_dim)
        }
        Op::Sdpa { heads, kv_heads, head_dim, causal } => {
            transformer_ops::sdpa(inputs, *heads, *kv_heads, *head_dim, *causal)
        }
        Op::ClassToken { .. } => transformer_ops::class_token(x, &params[0]),
        Op::EmbeddingBag { mode, .. } => transformer_ops::embedding_bag(&params[0], x, *mode),
        Op::Linear { bias, .. } => x.f_linear(&params[0], if *bias { params.get(1) } else { None }),
        Op::Embedding { .. } => Tensor::f_embedding(&params[0], x, -1, false, false),
        Op::Rnn { cell, hidden, layers, bidirectional, .. } => rnn(x, params, *cell, *hidden, *layers, *bidirectional),
        Op::Attention { embed_dim, heads, causal, tensor_shards, .. } => {
            let same = node.inputs[0] == node.inputs[1] && node.inputs[1] == node.inputs[2];
            let o = attention_heads(inputs, params, *embed_dim / (*tensor_shards).max(1), *heads, *causal, same)?;
            let rest = &params[params.len() - 2..];
            o.f_linear(&rest[0], Some(&rest[1]))
        }
        Op::Pool { kind, kernel, stride, padding, ceil_mode } => {
            let (xf, lead) = fold(x, kernel.len() + 1)?;
            let (k, s, p) = (i64s(kernel), i64s(stride), i64s(padding));
            let y = match (kind, kernel.len()) {
                (PoolKind::Max, 1) => xf.f_max_pool1d(k, s, p, [1], *ceil_mode)?,
                (PoolKind::Max, _) => xf.f_max_pool2d(k, s, p, [1, 1], *ceil_mode)?,
                (PoolKind::Avg, 1) => xf.f_avg_pool1d(k, s, p, *ceil_mode, true)?,
                (PoolKind::Avg, _) => xf.f_avg_pool2d(k, s, p, *ceil_mode, true, None)?,
            };
            unfold(y, lead)
        }
        Op::AdaptivePool { kind, output } => {
            let (xf, lead) = fold(x, output.len() + 1)?;
            let o = i64s(output);
            let y = match (kind, output.len()) {
                (PoolKind::Max, 1) => xf.f_adaptive_max_pool1d(o)?.0,
                (PoolKind::Max, _) => xf.f_adaptive_max_pool2d(o)?.0,
                (PoolKind::Avg, 1) => xf.f_adaptive_avg_pool1d(o)?,
                (PoolKind::Avg, _) => xf.f_adaptive_avg_pool2d(o)?,
            };
            unfold(y, lead)
        }
        Op::Act { function } => activation(x, *function, inplace),
        Op::Softmax => x.f_softmax(-1, None::<Kind>),
        Op::Dropout { p } => x.f_dropout(f64::from(*p), true),
        // PEFT's LoRA layer: (alpha / r) B A dropout(x); A and B are the node's two parameters.
        Op::Lora { rank, alpha, dropout, .. } => {
            let h = if *dropout > 0.0 { x.f_dropout(f64::from(*dropout), true)? } else { x.shallow_clone() };
            let scale = f64::from(*alpha) / (*rank).max(1) as f64;
            h.f_linear(&params[0], None::<&Tensor>)?.f_linear(&params[1], None::<&Tensor>)?.f_mul_scalar(scale)
        }
        Op::Moe { .. } => crate::moe::forward(node, x, params),
        Op::Add => {
            let mut acc = if inplace { x.shallow_clone() } else { x.f_add(&inputs[1])? };
            let rest = if inplace { &inputs[1..] } else { &inputs[2..] };
            for t in rest {
                if inplace {
                    acc = acc.f_add_(t)?;
                } else {
                    acc = acc.f_add(t)?;
                }
            }
            Ok(acc)
        }
        Op::Mul => {
            let mut acc = x.f_mul(&inputs[1])?;
            for t in &inputs[2..] {
                acc = acc.f_mul(t)?;
            }
            Ok(acc)
        }
        Op::Concat { axis } => Tensor::f_cat(inputs, *axis as i64 + 1),
        Op::Reshape { shape } => {
            let mut target = vec![x.size()[0]];
            target.extend(i64s(shape));
            x.f_reshape(target)
        }
        Op::Transpose { a, b } => x.f_transpose(*a as i64 + 1, *b as i64 + 1),
        Op::Slice { axis, start, len } => x.f_narrow(*axis as i64 + 1, *start as i64, *len as i64),
        Op::Mean { axis } => x.f_mean_dim(Some([*axis as i64 + 1].as_slice()), false, None::<Kind>),
        Op::MatMul { transpose_b } => {
            if *transpose_b {
                x.f_matmul(&inputs[1].f_transpose(-1, -2)?)
            } else {
                x.f_matmul(&inputs[1])
            }
        }
        Op::SinusoidalPositions { scale } => {
            let pe = constant.ok_or_else(|| missing_constant(node))?;
            x.f_mul_scalar(f64::from(*scale))?.f_add(pe)
        }
        Op::LearnedPositions { .. } => {
            let t = x.size()[1];
            x.f_add(&params[0].f_narrow(0, 0, t)?)
        }
        Op::CriticBatch => critic_batch(x, &inputs[1], flags.critic_update),
        Op::RoiAlign { proposals, output, .. } => {
            let weights = constant.ok_or_else(|| missing_constant(node))?;
            roi_align(x, weights, *proposals, output)
        }
    }
}

/// `[B, ..] x 2 -> [B, 3, ..]`: (real, fake, x_hat) with `x_hat = eps * real + (1 - eps) * fake`,
/// `eps ~ U(0, 1)` per sample from libtorch's generator. In a critic update x_hat is a fresh leaf requiring
/// gradients (the penalty differentiates the critic's score against it); otherwise it is detached.
fn critic_batch(real: &Tensor, fake: &Tensor, critic_update: bool) -> Result<Tensor, TchError> {
    let mut eps_shape = vec![real.size()[0]];
    eps_shape.extend(std::iter::repeat_n(1i64, real.dim() - 1));
    let eps = Tensor::f_rand(eps_shape, (Kind::Float, real.device()))?;
    let fake_d = fake.f_detach()?;
    let x_hat = real.f_mul(&eps)?.f_add(&fake_d.f_mul(&eps.f_neg()?.f_add_scalar(1.0)?)?)?.f_detach()?;
    let x_hat = if critic_update { x_hat.set_requires_grad(true) } else { x_hat };
    Tensor::f_stack(&[real, fake, &x_hat], 1)
}

fn activation(x: &Tensor, f: Activation, inplace: bool) -> Result<Tensor, TchError> {
    match f {
        Activation::Relu if inplace => x.shallow_clone().f_relu_(),
        Activation::Relu => x.f_relu(),
        Activation::LeakyRelu(slope) => {
            crate::shim::leaky_relu(x, f64::from(slope)).map_err(|e| TchError::Torch(format!("leaky_relu: {e}")))
        }
        Activation::Gelu => x.f_gelu("none"),
        Activation::Tanh => x.f_tanh(),
        Activation::Sigmoid => x.f_sigmoid(),
        Activation::HardTanh20 => x.f_clamp(0.0, 20.0),
        Activation::Silu => x.f_silu(),
    }
}

/// Multi-layer (bidirectional) LSTM/GRU over `[B, T, F]` with zero initial state; flat weights in PyTorch order.
fn rnn(
    x: &Tensor,
    params: &[Tensor],
    cell: RnnCell,
    hidden: usize,
    layers: usize,
    bidirectional: bool,
) -> Result<Tensor, TchError> {
    let dirs = if bidirectional { 2 } else { 1 };
    let batch = x.size()[0];
    let h0 = Tensor::f_zeros([(layers * dirs) as i64, batch, hidden as i64], (params[0].kind(), x.device()))?;
    let out = match cell {
        RnnCell::Lstm => {
            let c0 = h0.f_zeros_like()?;
            let ps: Vec<&Tensor> = params.iter().collect();
            x.f_lstm(&[&h0, &c0], &ps, true, layers as i64, 0.0, true, bidirectional, true)?.0
        }
        RnnCell::Gru => x.f_gru(&h0, params, true, layers as i64, 0.0, true, bidirectional, true)?.0,
    };
    Ok(out)
}

/// `nn.MultiheadAttention` (batch first, no dropout) via input projections and scaled dot-product attention,
/// up to its output projection: the `heads` heads' outputs side by side, `[B, T, e]` (`e` the width of those
/// heads: the model's, or a tensor rank's share of it). `params` holds the output projection last.
pub fn attention_heads(
    inputs: &[Tensor],
    params: &[Tensor],
    e: usize,
    heads: usize,
    causal: bool,
    self_attention: bool,
) -> Result<Tensor, TchError> {
    let e = e as i64;
    let (q_in, k_in, v_in) = (&inputs[0], &inputs[1], &inputs[2]);
    let (q, k, v, rest) = if params.len() == 4 {
        // Packed in_proj_weight [3E, E], in_proj_bias [3E], out_proj.weight, out_proj.bias.
        let (w, b) = (&params[0], &params[1]);
        if self_attention {
            let qkv = q_in.f_linear(w, Some(b))?.f_chunk(3, -1)?;
            (qkv[0].shallow_clone(), qkv[1].shallow_clone(), qkv[2].shallow_clone(), &params[2..])
        } else {
            let ws = w.f_chunk(3, 0)?;
            let bs = b.f_chunk(3, 0)?;
            let q = q_in.f_linear(&ws[0], Some(&bs[0]))?;
            let k = k_in.f_linear(&ws[1], Some(&bs[1]))?;
            let v = v_in.f_linear(&ws[2], Some(&bs[2]))?;
            (q, k, v, &params[2..])
        }
    } else {
        // q_proj_weight, k_proj_weight, v_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias.
        let bs = params[3].f_chunk(3, 0)?;
        let q = q_in.f_linear(&params[0], Some(&bs[0]))?;
        let k = k_in.f_linear(&params[1], Some(&bs[1]))?;
        let v = v_in.f_linear(&params[2], Some(&bs[2]))?;
        (q, k, v, &params[4..])
    };
    let heads = heads as i64;
    let split = |t: &Tensor| -> Result<Tensor, TchError> {
        let s = t.size();
        t.f_view([s[0], s[1], heads, e / heads])?.f_transpose(1, 2)
    };
    let o = Tensor::f_scaled_dot_product_attention(
        &split(&q)?,
        &split(&k)?,
        &split(&v)?,
        None::<Tensor>,
        0.0,
        causal,
        None,
        false,
    )?;
    let s = q.size();
    debug_assert_eq!(rest.len(), 2, "out_proj's weight and bias follow the input projections");
    o.f_transpose(1, 2)?.f_reshape([s[0], s[1], e])
}

/// The fixed proposal boxes of RoI align over an `h x w` feature map, in feature-map coordinates
/// `(x1, y1, x2, y2)`: a `g x g` grid (g = ceil(sqrt(proposals))) of cells, box `i` covering cell
/// `(i % g, i / g)`. Deterministic, so every backend samples the same regions.
pub fn roi_boxes(proposals: usize, h: usize, w: usize) -> Vec<[f32; 4]> {
    let g = (proposals as f64).sqrt().ceil().max(1.0) as usize;
    let (cw, ch) = (w as f32 / g as f32, h as f32 / g as f32);
    (0..proposals)
        .map(|i| {
            let (cx, cy) = ((i % g) as f32, (i / g) as f32);
            [cx * cw, cy * ch, (cx + 1.0) * cw, (cy + 1.0) * ch]
        })
        .collect()
}

/// RoIAlign's sampling as separable interpolation weights (torchvision semantics, `aligned = False`) over
/// [`roi_boxes`] on an `h x w` map: each bin of an axis-aligned box averages `s x s` bilinear samples, and a
/// bilinear sample's weight is a row weight times a column weight, so a bin is `Ay[p, i, :] x Ax[p, j, :]^T` with
/// `Ay` (`[P, oh, h]`) and `Ax` (`[P, ow, w]`) each holding `2 s` taps per row (sample coordinates clamped to the
/// map as `grid_sampler_2d`'s border padding does). Returned flat: `Ay` then `Ax`.
fn roi_weights(proposals: usize, h: usize, w: usize, output: &[usize], s: usize) -> Vec<f32> {
    let (oh, ow) = (output[0], output[1]);
    let mut ay = vec![0f64; proposals * oh * h];
    let mut ax = vec![0f64; proposals * ow * w];
    let taps = |row: &mut [f64], c: f32, n: usize| {
        let c = f64::from(c).clamp(0.0, (n - 1) as f64);
        let (i0, l) = (c.floor() as usize, c - c.floor());
        row[i0] += (1.0 - l) / s as f64;
        row[(i0 + 1).min(n - 1)] += l / s as f64;
    };
    for (p, bx) in roi_boxes(proposals, h, w).iter().enumerate() {
        let (rw, rh) = ((bx[2] - bx[0]).max(1.0), (bx[3] - bx[1]).max(1.0));
        let (bin_w, bin_h) = (rw / ow as f32, rh / oh as f32);
        for py in 0..oh * s {
            let y = bx[1] + bin_h * (py / s) as f32 + (py % s) as f32 * bin_h / s as f32 + bin_h / (2 * s) as f32;
            taps(&mut ay[(p * oh + py / s) * h..][..h], y, h);
        }
        for px in 0..ow * s {
            let xx = bx[0] + bin_w * (px / s) as f32 + (px % s) as f32 * bin_w / s as f32 + bin_w / (2 * s) as f32;
            taps(&mut ax[(p * ow + px / s) * w..][..w], xx, w);
        }
    }
    ay.iter().chain(&ax).map(|&v| v as f32).collect()
}

/// RoIAlign as two products with the separable weights of [`roi_weights`]: rows first (`Ay @ x`, one matmul over
/// all boxes), then each box's columns (a batched matmul). `[B, C, H, W] -> [B, P, C, oh, ow]`. Same values as
/// sampling a grid with `grid_sampler_2d` and averaging, without its per-sample gather and scatter.
fn roi_align(x: &Tensor, weights: &Tensor, proposals: usize, output: &[usize]) -> Result<Tensor, TchError> {
    let size = x.size();
    let (b, c, h, w) = (size[0], size[1], size[2], size[3]);
    let (p, oh, ow) = (proposals as i64, output[0] as i64, output[1] as i64);
    let weights = weights.f_to_kind(x.kind())?;
    let ay = weights.f_narrow(0, 0, p * oh * h)?.f_reshape([p * oh, h])?;
    let ax = weights.f_narrow(0, p * oh * h, p * ow * w)?.f_reshape([p, ow, w])?;
    let xt = x.f_permute([2, 0, 1, 3])?.f_reshape([h, b * c * w])?;
    let t = ay.f_matmul(&xt)?.f_reshape([p, oh * b * c, w])?;
    let y = t.f_bmm(&ax.f_transpose(1, 2)?)?;
    y.f_reshape([p, oh, b, c, ow])?.f_permute([2, 0, 3, 1, 4])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// On a ramp f(x, y) = x + 100 y bilinear sampling is exact, so every RoIAlign bin must equal the mean of
    /// the ramp at torchvision's sample points (`x1 + (j + (k + 0.5) / s) * bin_w`, clamped to the last pixel
    /// centre as torchvision does): this pins the sampling grid to torchvision's convention.
    #[test]
    fn roi_align_bins_average_at_their_centres() {
        let (h, w, p) = (8usize, 12usize, 4usize);
        let ramp: Vec<f32> = (0..h * w).map(|i| (i % w) as f32 + 100.0 * (i / w) as f32).collect();
        let x = Tensor::from_slice(&ramp).reshape([1, 1, h as i64, w as i64]);
        let weights = constant(
            &Node {
                name: "roi".into(),
                op: Op::RoiAlign { proposals: p, output: vec![2, 3], spatial_scale: 1.0, sampling_ratio: 2 },
                inputs: vec![0],
                shape: trainbench_graph::Shape(vec![p, 1, 2, 3]),
                part: None,
                tied_to: None,
                frozen: false,
            },
            &[1, h, w],
            Device::Cpu,
        )
        .unwrap()
        .unwrap();
        let y = roi_align(&x, &weights, p, &[2, 3]).unwrap();
        assert_eq!(y.size(), [1, p as i64, 1, 2, 3]);
        for (k, b) in roi_boxes(p, h, w).iter().enumerate() {
            for i in 0..2 {
                for j in 0..3 {
                    let (bw, bh) = ((b[2] - b[0]) / 3.0, (b[3] - b[1]) / 2.0);
                    let mut want = 0.0;
                    for sy in 0..2 {
                        for sx in 0..2 {
                            let px = (b[0] + (j as f32 + (sx as f32 + 0.5) / 2.0) * bw).min((w - 1) as f32);
                            let py = (b[1] + (i as f32 + (sy as f32 + 0.5) / 2.0) * bh).min((h - 1) as f32);
                            want += (px + 100.0 * py) / 4.0;
                        }
                    }
                    let got = y.double_value(&[0, k as i64, 0, i as i64, j as i64]) as f32;
                    assert!((got - want).abs() < 1e-3, "box {k} bin ({i}, {j}): {got} vs {want}");
                }
            }
        }
    }

    /// Leaky ReLU is PyTorch's kernel with the node's slope: the values of `max(x, slope x)`, and a penalty-style
    /// second-order gradient (the input gradient differentiated again) runs through it.
    #[test]
    fn leaky_relu_takes_the_slope_and_differentiates_twice() {
        let x = Tensor::from_slice(&[-2.0f32, -0.5, 0.5, 3.0]).set_requires_grad(true);
        let y = activation(&x, Activation::LeakyRelu(0.2), false).unwrap();
        let want = x.maximum(&(&x * 0.2));
        assert!(y.allclose(&want, 0.0, 0.0, false));
        let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]).set_requires_grad(true);
        let g = Tensor::run_backward(&[(&y * &w).sum(Kind::Float)], &[&x], true, true).remove(0);
        let expect = Tensor::from_slice(&[0.2f32, 0.4, 3.0, 4.0]);
        assert!(g.allclose(&expect, 1e-6, 1e-6, false));
        // d/dw of sum(g^2) = 2 g * slope-or-one.
        let gw = Tensor::run_backward(&[g.square().sum(Kind::Float)], &[&w], false, false).remove(0);
        assert!(gw.allclose(&Tensor::from_slice(&[0.08f32, 0.16, 6.0, 8.0]), 1e-6, 1e-6, false));
    }

    #[test]
    fn sinusoidal_table_follows_vaswani() {
        let node = Node {
            name: "pos".into(),
            op: Op::SinusoidalPositions { scale: 1.0 },
            inputs: vec![0],
            shape: trainbench_graph::Shape(vec![5, 4]),
            part: None,
            tied_to: None,
            frozen: false,
        };
        let pe = constant(&node, &[5, 4], Device::Cpu).unwrap().unwrap();
        let at = |t: i64, i: i64| pe.double_value(&[t, i]);
        assert!((at(3, 0) - 3f64.sin()).abs() < 1e-6);
        assert!((at(3, 1) - 3f64.cos()).abs() < 1e-6);
        assert!((at(2, 2) - (2.0 / 100f64).sin()).abs() < 1e-6);
    }
}
