//! Spatial and dense layers in PyTorch's semantics: convolution, pooling, normalisation (batch, layer, RMS),
//! linear, embedding bags, the class token, activations and dropout, on weights in PyTorch's layouts.

use burn::tensor::activation;
use burn::tensor::module;
use burn::tensor::ops::{AvgPoolOptions, ConvOptions, ConvTransposeOptions, MaxPoolOptions};
use burn::tensor::{Distribution, Tensor};
use trainbench_graph::graph::{Activation, BagMode, PoolKind};

use crate::value::{Act, IntAct, ValueError};

/// Convolution hyper-parameters as the graph states them.
pub struct ConvSpec<'a> {
    /// Kernel size per spatial dimension (1 or 2 entries).
    pub kernel: &'a [usize],
    /// Stride.
    pub stride: &'a [usize],
    /// Zero padding.
    pub padding: &'a [usize],
    /// Dilation.
    pub dilation: &'a [usize],
    /// Output padding (transposed only).
    pub output_padding: &'a [usize],
    /// Groups.
    pub groups: usize,
    /// Transposed convolution.
    pub transposed: bool,
}

fn two(v: &[usize]) -> [usize; 2] {
    [v[0], v[1]]
}

/// Split a logical shape `[B, extra.., C, spatial(nd)..]` into (folded batch, channels, spatial).
fn fold(shape: &[usize], nd: usize) -> (usize, usize, Vec<usize>) {
    let c_axis = shape.len() - nd - 1;
    let n = shape[..c_axis].iter().product();
    (n, shape[c_axis], shape[c_axis + 1..].to_vec())
}

/// N-d convolution (N = 1 or 2, optionally transposed); leading extra dimensions fold into the batch.
pub fn conv(
    x: &Act,
    weight: Tensor<1>,
    wshape: &[usize],
    bias: Option<Tensor<1>>,
    spec: &ConvSpec<'_>,
    out_shape: Vec<usize>,
) -> Result<Act, ValueError> {
    let nd = spec.kernel.len();
    let (n, c, sp) = fold(&x.shape, nd);
    let y = match (nd, spec.transposed) {
        (1, false) => {
            let w = weight.reshape([wshape[0], wshape[1], wshape[2]]);
            let opt = ConvOptions::new([spec.stride[0]], [spec.padding[0]], [spec.dilation[0]], spec.groups);
            Act::lift(module::conv1d(x.view([n, c, sp[0]]), w, bias, opt))
        }
        (1, true) => {
            // Burn's 1-D transposed convolution, through the 2-D kernel with a unit height.
            let w = weight.reshape([wshape[0], wshape[1], 1, wshape[2]]);
            let opt = ConvTransposeOptions::new(
                [1, spec.stride[0]],
                [0, spec.padding[0]],
                [0, spec.output_padding[0]],
                [1, spec.dilation[0]],
                spec.groups,
            );
            Act::lift(module::conv_transpose2d(x.view([n, c, 1, sp[0]]), w, bias, opt))
        }
        (2, false) => {
            let w = weight.reshape([wshape[0], wshape[1], wshape[2], wshape[3]]);
            let opt = ConvOptions::new(two(spec.stride), two(spec.padding), two(spec.dilation), spec.groups);
            Act::lift(module::conv2d(x.view([n, c, sp[0], sp[1]]), w, bias, opt))
        }
        (2, true) => {
            let w = weight.reshape([wshape[0], wshape[1], wshape[2], wshape[3]]);
            let opt = ConvTransposeOptions::new(
                two(spec.stride),
                two(spec.padding),
                two(spec.output_padding),
                two(spec.dilation),
                spec.groups,
            );
            Act::lift(module::conv_transpose2d(x.view([n, c, sp[0], sp[1]]), w, bias, opt))
        }
        _ => return Err(ValueError(format!("{nd}-d convolution"))),
    };
    Ok(Act::with_shape(y.t, out_shape))
}

/// Pooling hyper-parameters as the graph states them.
pub struct PoolSpec<'a> {
    /// Max or average.
    pub kind: PoolKind,
    /// Window per spatial dimension.
    pub kernel: &'a [usize],
    /// Stride.
    pub stride: &'a [usize],
    /// Padding.
    pub padding: &'a [usize],
    /// Round output sizes up.
    pub ceil_mode: bool,
}

/// Max or average pooling over the trailing 1 or 2 dimensions (average counts padding, as PyTorch).
pub fn pool(x: &Act, spec: &PoolSpec<'_>, out_shape: Vec<usize>) -> Result<Act, ValueError> {
    let nd = spec.kernel.len();
    let lead: usize = x.shape[..x.shape.len() - nd].iter().product();
    let sp = &x.shape[x.shape.len() - nd..];
    let y = match (nd, spec.kind) {
        (1, PoolKind::Max) => {
            let o = MaxPoolOptions::new([spec.kernel[0]])
                .with_stride([spec.stride[0]])
                .with_padding([spec.padding[0]])
                .with_ceil_mode(spec.ceil_mode);
            Act::lift(module::max_pool1d(x.view([lead, 1, sp[0]]), o))
        }
        (1, PoolKind::Avg) => {
            let o = AvgPoolOptions::new([spec.kernel[0]])
                .with_stride([spec.stride[0]])
                .with_padding([spec.padding[0]])
                .with_ceil_mode(spec.ceil_mode);
            Act::lift(module::avg_pool1d(x.view([lead, 1, sp[0]]), o))
        }
        (2, PoolKind::Max) => {
            let o = MaxPoolOptions::new(two(spec.kernel))
                .with_stride(two(spec.stride))
                .with_padding(two(spec.padding))
                .with_ceil_mode(spec.ceil_mode);
            Act::lift(module::max_pool2d(x.view([lead, 1, sp[0], sp[1]]), o))
        }
        (2, PoolKind::Avg) => {
            let o = AvgPoolOptions::new(two(spec.kernel))
                .with_stride(two(spec.stride))
                .with_padding(two(spec.padding))
                .with_ceil_mode(spec.ceil_mode);
            Act::lift(module::avg_pool2d(x.view([lead, 1, sp[0], sp[1]]), o))
        }
        _ => return Err(ValueError(format!("{nd}-d pooling"))),
    };
    Ok(Act::with_shape(y.t, out_shape))
}

/// Adaptive pooling to `output` over the trailing dimensions; max pooling only with even windows.
pub fn adaptive_pool(x: &Act, kind: PoolKind, output: &[usize], out_shape: Vec<usize>) -> Result<Act, ValueError> {
    let nd = output.len();
    let lead: usize = x.shape[..x.shape.len() - nd].iter().product();
    let sp = x.shape[x.shape.len() - nd..].to_vec();
    let y = match (nd, kind) {
        (1, PoolKind::Avg) => Act::lift(module::adaptive_avg_pool1d(x.view([lead, 1, sp[0]]), output[0])),
        (2, PoolKind::Avg) => Act::lift(module::adaptive_avg_pool2d(x.view([lead, 1, sp[0], sp[1]]), two(output))),
        (_, PoolKind::Max) => {
            let kernel: Vec<usize> = sp.iter().zip(output).map(|(i, o)| i / o).collect();
            let spec = PoolSpec { kind, kernel: &kernel, stride: &kernel, padding: &[0, 0][..nd], ceil_mode: false };
            return pool(x, &spec, out_shape);
        }
        _ => return Err(ValueError(format!("{nd}-d adaptive pooling"))),
    };
    Ok(Act::with_shape(y.t, out_shape))
}

/// Result of a training-mode batch normalisation: output and the batch statistics for the running averages.
pub struct BatchNormOut {
    /// Normalised output.
    pub y: Act,
    /// Batch mean per channel (detached).
    pub mean: Tensor<1>,
    /// Unbiased batch variance per channel (detached), as PyTorch folds into `running_var`.
    pub var_unbiased: Tensor<1>,
}

fn bn<const D: usize>(t: Tensor<D>, gamma: Tensor<1>, beta: Tensor<1>, eps: f64) -> (Act, Tensor<1>, Tensor<1>) {
    let o = module::batch_norm_train(t, gamma, beta, eps);
    (Act::lift(o.output), o.mean, o.variance)
}

/// Batch normalisation in training mode over the channel axis (`[F]`, `[C, L]` or `[.., C, H, W]` per sample).
pub fn batch_norm(x: &Act, gamma: Tensor<1>, beta: Tensor<1>, eps: f64) -> Result<BatchNormOut, ValueError> {
    let s = &x.shape;
    let ((y, mean, var), n) = match s.len() {
        2 => (bn(x.view([s[0], s[1]]), gamma, beta, eps), s[0]),
        3 => (bn(x.view([s[0], s[1], s[2]]), gamma, beta, eps), s[0] * s[2]),
        r if r >= 4 => {
            let lead: usize = s[..r - 3].iter().product();
            let (c, h, w) = (s[r - 3], s[r - 2], s[r - 1]);
            (bn(x.view([lead, c, h, w]), gamma, beta, eps), lead * h * w)
        }
        _ => return Err(ValueError(format!("batch norm of shape {s:?}"))),
    };
    let corr = if n > 1 { n as f64 / (n as f64 - 1.0) } else { 1.0 };
    Ok(BatchNormOut {
        y: Act::with_shape(y.t, s.clone()),
        mean: mean.without_autodiff(),
        var_unbiased: var.without_autodiff().mul_scalar(corr),
    })
}

/// Layer normalisation over the last axis with affine parameters.
pub fn layer_norm(x: &Act, gamma: Tensor<1>, beta: Tensor<1>, eps: f64) -> Act {
    Act { t: module::layer_norm(x.t.clone(), gamma, Some(beta), eps), shape: x.shape.clone() }
}

/// RMS normalisation over the last axis (`torch.nn.functional.rms_norm`): `y = x / sqrt(mean(x^2) + eps) * w`.
pub fn rms_norm(x: &Act, weight: Tensor<1>, eps: f64) -> Act {
    let last = x.t.dims().len() - 1;
    let features = x.shape.last().copied().unwrap_or(1);
    let inv = x.t.clone().square().mean_dim(last).add_scalar(eps).sqrt().recip();
    let w = weight.reshape(crate::value::pad(&[features]));
    Act { t: x.t.clone() * inv * w, shape: x.shape.clone() }
}

/// Prepend the learned class token (`[1, 1, E]`, torchvision's layout) to `x: [B, T, E]` -> `[B, T + 1, E]`.
pub fn class_token(x: &Act, token: Tensor<1>, out_shape: Vec<usize>) -> Result<Act, ValueError> {
    let [b, _, e] = x.get::<3>()?.dims();
    let token = token.reshape([1, 1, e]).repeat_dim(0, b);
    Ok(Act::with_shape(Tensor::cat(vec![token, x.get::<3>()?], 1), out_shape))
}

/// Embedding bag with fixed-size bags (`nn.EmbeddingBag`): ids `[B, bag]` -> the rows of `weight [vocab, dim]`
/// summed or averaged, `[B, dim]`.
pub fn embedding_bag(ids: &IntAct, weight: Tensor<1>, vocab: usize, dim: usize, mode: BagMode) -> Act {
    let b = ids.shape[0];
    let bag: usize = ids.shape[1..].iter().product();
    let rows = module::embedding(weight.reshape([vocab, dim]), ids.view([b, bag]));
    let pooled = match mode {
        BagMode::Sum => rows.sum_dim(1),
        BagMode::Mean => rows.mean_dim(1),
    };
    Act::with_shape(pooled, vec![b, dim])
}

/// `y = x W^T + b` over the last axis, with `W` in PyTorch's `[out, in]` layout.
pub fn linear(x: &Act, weight: Tensor<1>, out_f: usize, in_f: usize, bias: Option<Tensor<1>>) -> Act {
    let rows = x.numel() / in_f;
    let w = weight.reshape([out_f, in_f]).transpose();
    let y = module::linear(x.view([rows, in_f]), w, bias);
    let mut shape = x.shape.clone();
    if let Some(last) = shape.last_mut() {
        *last = out_f;
    }
    Act::with_shape(y, shape)
}

/// Element-wise activation.
pub fn act(x: &Act, f: Activation) -> Act {
    let t = x.t.clone();
    let t = match f {
        Activation::Relu => activation::relu(t),
        Activation::LeakyRelu(slope) => activation::leaky_relu(t, f64::from(slope)),
        Activation::Gelu => activation::gelu(t),
        Activation::Tanh => activation::tanh(t),
        Activation::Sigmoid => activation::sigmoid(t),
        Activation::HardTanh20 => activation::hardtanh(t, 0.0, 20.0),
        Activation::Silu => activation::silu(t),
    };
    Act { t, shape: x.shape.clone() }
}

/// Inverted dropout: zero each element with probability `p`, scale the rest by `1 / (1 - p)`; identity at 0.
pub fn dropout(x: &Act, p: f32) -> Act {
    if p <= 0.0 {
        return x.clone();
    }
    let keep = 1.0 - f64::from(p);
    let mask = Tensor::<6>::random(x.t.shape(), Distribution::Bernoulli(keep), &x.t.device());
    Act { t: x.t.clone().mul(mask).div_scalar(keep), shape: x.shape.clone() }
}
