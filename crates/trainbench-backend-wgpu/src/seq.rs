//! Sequence layers written out with matrix products: multi-layer (bi)directional LSTM and GRU in PyTorch's gate
//! order and weight layout, multi-head attention in `nn.MultiheadAttention`'s layout, and the parameter-free
//! rotary embedding and grouped-query scaled dot-product attention of today's decoders.

use burn::tensor::activation::{sigmoid, softmax, tanh};
use burn::tensor::module::linear;
use burn::tensor::{Tensor, TensorData};
use trainbench_graph::graph::RnnCell;

/// The weights of one layer and direction, flat, in PyTorch's layout.
pub struct RnnWeights {
    /// `weight_ih`: `[gates * hidden, input]`.
    pub w_ih: Tensor<1>,
    /// `weight_hh`: `[gates * hidden, hidden]`.
    pub w_hh: Tensor<1>,
    /// `bias_ih`: `[gates * hidden]`.
    pub b_ih: Tensor<1>,
    /// `bias_hh`: `[gates * hidden]`.
    pub b_hh: Tensor<1>,
}

/// One direction of one recurrent layer over `x: [B, T, F]`, from zero initial state; returns `[B, T, H]`.
///
/// LSTM gates are `i, f, g, o` (`c' = f c + i g`, `h' = o tanh(c')`); GRU gates are `r, z, n` with
/// `n = tanh(W_in x + b_in + r (W_hn h + b_hn))` and `h' = (1 - z) n + z h`, as in PyTorch.
pub fn rnn_direction(x: Tensor<3>, cell: RnnCell, hidden: usize, w: RnnWeights, reverse: bool) -> Tensor<3> {
    let [b, t_len, f] = x.dims();
    let gates = match cell {
        RnnCell::Lstm => 4,
        RnnCell::Gru => 3,
    };
    let g = gates * hidden;
    let w_ih = w.w_ih.reshape([g, f]).transpose();
    let w_hh = w.w_hh.reshape([g, hidden]).transpose();
    // Input projections of every time step at once.
    let xp = linear(x, w_ih, Some(w.b_ih));
    let device = xp.device();
    let mut h = Tensor::<2>::zeros([b, hidden], &device);
    let mut c = Tensor::<2>::zeros([b, hidden], &device);
    let mut ys = Vec::with_capacity(t_len);
    for step in 0..t_len {
        let t = if reverse { t_len - 1 - step } else { step };
        let xt = xp.clone().narrow(1, t, 1).reshape([b, g]);
        let hp = linear(h.clone(), w_hh.clone(), Some(w.b_hh.clone()));
        match cell {
            RnnCell::Lstm => {
                let z = xt + hp;
                let i = sigmoid(z.clone().narrow(1, 0, hidden));
                let fg = sigmoid(z.clone().narrow(1, hidden, hidden));
                let gg = tanh(z.clone().narrow(1, 2 * hidden, hidden));
                let o = sigmoid(z.narrow(1, 3 * hidden, hidden));
                c = fg * c + i * gg;
                h = o * tanh(c.clone());
            }
            RnnCell::Gru => {
                let r = sigmoid(xt.clone().narrow(1, 0, hidden) + hp.clone().narrow(1, 0, hidden));
                let z = sigmoid(xt.clone().narrow(1, hidden, hidden) + hp.clone().narrow(1, hidden, hidden));
                let n = tanh(xt.narrow(1, 2 * hidden, hidden) + r * hp.narrow(1, 2 * hidden, hidden));
                // (1 - z) n + z h  ==  n + z (h - n)
                h = n.clone() + z * (h - n);
            }
        }
        ys.push(h.clone());
    }
    if reverse {
        ys.reverse();
    }
    Tensor::stack::<3>(ys, 1)
}

/// Weights of a multi-head attention block, flat, in `nn.MultiheadAttention`'s layout.
pub struct AttentionWeights {
    /// `in_proj_weight` `[3E, E]` (self-attention widths) or the separate `q/k/v_proj_weight`.
    pub proj: Projections,
    /// `in_proj_bias` `[3E]`.
    pub in_bias: Tensor<1>,
    /// `out_proj.weight` `[E, E]`.
    pub out_w: Tensor<1>,
    /// `out_proj.bias` `[E]`.
    pub out_b: Tensor<1>,
}

/// Input projections: packed or separate.
pub enum Projections {
    /// `in_proj_weight` `[3E, E]`: rows `0..E` for queries, `E..2E` keys, `2E..3E` values.
    Packed(Box<Tensor<1>>),
    /// `q_proj_weight` `[E, E]`, `k_proj_weight` `[E, kdim]`, `v_proj_weight` `[E, vdim]`.
    Separate(Box<[Tensor<1>; 3]>),
}

fn heads_first(x: Tensor<3>, heads: usize) -> Tensor<4> {
    let [b, t, e] = x.dims();
    x.reshape([b, t, heads, e / heads]).swap_dims(1, 2)
}

/// Multi-head attention: `q: [B, Tq, E]`, `k: [B, Tk, kdim]`, `v: [B, Tk, vdim]` -> `[B, Tq, E]`; a causal mask
/// hides keys after each query position.
pub fn attention(
    q: Tensor<3>,
    k: Tensor<3>,
    v: Tensor<3>,
    heads: usize,
    causal: bool,
    w: AttentionWeights,
) -> Tensor<3> {
    let [b, tq, e] = q.dims();
    let [_, _, kdim] = k.dims();
    let vdim = v.dims()[2];
    let (wq, wk, wv) = match w.proj {
        Projections::Packed(p) => {
            let p = p.reshape([3 * e, e]);
            (p.clone().narrow(0, 0, e), p.clone().narrow(0, e, e), p.narrow(0, 2 * e, e))
        }
        Projections::Separate(w) => {
            let [wq, wk, wv] = *w;
            (wq.reshape([e, e]), wk.reshape([e, kdim]), wv.reshape([e, vdim]))
        }
    };
    let bq = w.in_bias.clone().narrow(0, 0, e);
    let bk = w.in_bias.clone().narrow(0, e, e);
    let bv = w.in_bias.narrow(0, 2 * e, e);
    let qh = heads_first(linear(q, wq.transpose(), Some(bq)), heads);
    let kh = heads_first(linear(k, wk.transpose(), Some(bk)), heads);
    let vh = heads_first(linear(v, wv.transpose(), Some(bv)), heads);
    let o = heads_attention(qh, kh, vh, causal).swap_dims(1, 2).reshape([b, tq, e]);
    linear(o, w.out_w.reshape([e, e]).transpose(), Some(w.out_b))
}

/// `softmax(q k^T / sqrt(d) + mask) v` over heads `[B, H, T, d]`; the causal mask hides keys after each query.
fn heads_attention(qh: Tensor<4>, kh: Tensor<4>, vh: Tensor<4>, causal: bool) -> Tensor<4> {
    let [_, _, tq, d] = qh.dims();
    let tk = kh.dims()[2];
    let scale = 1.0 / (d as f64).sqrt();
    let mut scores = qh.mul_scalar(scale).matmul(kh.swap_dims(2, 3));
    if causal {
        // A large finite negative rather than -inf: shader compilers may assume no infinities.
        let mask: Vec<f32> =
            (0..tq).flat_map(|i| (0..tk).map(move |j| if j > i { -1.0e30_f32 } else { 0.0 })).collect();
        let mask = Tensor::<4>::from_data(TensorData::new(mask, [1, 1, tq, tk]), &scores.device());
        scores = scores + mask;
    }
    softmax(scores, 3).matmul(vh)
}

/// The rotary angles' cosines and sines for positions `0..t`, each `[t, head_dim / 2]` row-major:
/// `a[p, i] = p * theta^(-2i / head_dim)`, computed in f64 and rounded to f32 as the tch backend does.
pub fn rotary_table(t: usize, head_dim: usize, theta: f32) -> (Vec<f32>, Vec<f32>) {
    let half = head_dim / 2;
    let (mut cos, mut sin) = (vec![0f32; t * half], vec![0f32; t * half]);
    for pos in 0..t {
        for i in 0..half {
            let angle = pos as f64 * f64::from(theta).powf(-(2.0 * i as f64) / head_dim as f64);
            cos[pos * half + i] = angle.cos() as f32;
            sin[pos * half + i] = angle.sin() as f32;
        }
    }
    (cos, sin)
}

/// Half-split rotary embedding of `x: [B, T, heads * head_dim]`: per head, with `x = [x1, x2]`,
/// `y = [x1 cos - x2 sin, x2 cos + x1 sin]` at the angles of [`rotary_table`].
pub fn rotary(x: Tensor<3>, heads: usize, head_dim: usize, theta: f32) -> Tensor<3> {
    let [b, t, width] = x.dims();
    let half = head_dim / 2;
    let device = x.device();
    let (cos, sin) = rotary_table(t, head_dim, theta);
    let cos = Tensor::<4>::from_data(TensorData::new(cos, [1, t, 1, half]), &device);
    let sin = Tensor::<4>::from_data(TensorData::new(sin, [1, t, 1, half]), &device);
    let h = x.reshape([b, t, heads, head_dim]);
    let (x1, x2) = (h.clone().narrow(3, 0, half), h.narrow(3, half, half));
    let y1 = x1.clone() * cos.clone() - x2.clone() * sin.clone();
    let y2 = x2 * cos + x1 * sin;
    Tensor::cat(vec![y1, y2], 3).reshape([b, t, width])
}

/// Scaled dot-product attention over projected heads (`F.scaled_dot_product_attention`, scale `1/sqrt(d)`):
/// `q: [B, T, heads * d]`, `k`, `v: [B, Tk, kv_heads * d]` -> `[B, T, heads * d]`; with fewer key/value heads
/// (grouped-query) query head `h` reads key/value head `h / (heads / kv_heads)`.
pub fn sdpa(q: Tensor<3>, k: Tensor<3>, v: Tensor<3>, heads: usize, kv_heads: usize, causal: bool) -> Tensor<3> {
    let [b, t, width] = q.dims();
    let d = width / heads;
    let group = heads / kv_heads;
    let kv = |x: Tensor<3>| -> Tensor<4> {
        let tk = x.dims()[1];
        let x = x.reshape([b, tk, kv_heads, d]).swap_dims(1, 2);
        if group == 1 {
            return x;
        }
        // [B, KV, T, d] -> [B, KV, G, T, d] -> [B, KV * G, T, d]: head h = kv * G + g reads kv head h / G.
        x.reshape([b, kv_heads, 1, tk, d]).repeat_dim(2, group).reshape([b, heads, tk, d])
    };
    let qh = q.reshape([b, t, heads, d]).swap_dims(1, 2);
    heads_attention(qh, kv(k), kv(v), causal).swap_dims(1, 2).reshape([b, t, width])
}
