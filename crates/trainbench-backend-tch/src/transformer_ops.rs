//! Forward lowering of the layers of today's transformers and recommenders: RMSNorm, rotary embeddings,
//! grouped-query scaled dot-product attention, the class token and embedding bags.

use tch::{Device, Kind, TchError, Tensor};
use trainbench_graph::graph::BagMode;

/// The rotary angles' cosines and sines for positions `0..t`, `[2, t, head_dim / 2]` (fp32).
pub fn rotary_table(t: usize, head_dim: usize, theta: f32, device: Device) -> Result<Tensor, TchError> {
    let half = head_dim / 2;
    let mut table = vec![0f32; 2 * t * half];
    for pos in 0..t {
        for i in 0..half {
            let inv_freq = f64::from(theta).powf(-(2.0 * i as f64) / head_dim as f64);
            let angle = pos as f64 * inv_freq;
            table[pos * half + i] = angle.cos() as f32;
            table[t * half + pos * half + i] = angle.sin() as f32;
        }
    }
    Tensor::f_from_slice(&table)?.f_reshape([2, t as i64, half as i64])?.f_to_device(device)
}

/// `[B, T, heads * head_dim]` with the half-split rotation of each head by the table's angles.
pub fn rotary(x: &Tensor, table: &Tensor, heads: usize, head_dim: usize) -> Result<Tensor, TchError> {
    let size = x.size();
    let (b, t) = (size[0], size[1]);
    let half = (head_dim / 2) as i64;
    let h = x.f_reshape([b, t, heads as i64, head_dim as i64])?;
    let (x1, x2) = (h.f_narrow(-1, 0, half)?, h.f_narrow(-1, half, half)?);
    let cos = table.f_get(0)?.f_unsqueeze(1)?.f_to_kind(x.kind())?;
    let sin = table.f_get(1)?.f_unsqueeze(1)?.f_to_kind(x.kind())?;
    let y1 = x1.f_mul(&cos)?.f_sub(&x2.f_mul(&sin)?)?;
    let y2 = x2.f_mul(&cos)?.f_add(&x1.f_mul(&sin)?)?;
    Tensor::f_cat(&[y1, y2], -1)?.f_reshape([b, t, (heads * head_dim) as i64])
}

/// Fused attention of q `[B, T, heads * d]`, k and v `[B, T, kv_heads * d]` -> `[B, T, heads * d]`.
pub fn sdpa(
    inputs: &[Tensor],
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    causal: bool,
) -> Result<Tensor, TchError> {
    let split = |x: &Tensor, n: usize| -> Result<Tensor, TchError> {
        let size = x.size();
        x.f_reshape([size[0], size[1], n as i64, head_dim as i64])?.f_transpose(1, 2)
    };
    let q = split(&inputs[0], heads)?;
    let k = split(&inputs[1], kv_heads)?;
    let v = split(&inputs[2], kv_heads)?;
    let y = Tensor::f_scaled_dot_product_attention(&q, &k, &v, None::<Tensor>, 0.0, causal, None, kv_heads != heads)?;
    let size = inputs[0].size();
    y.f_transpose(1, 2)?.f_reshape([size[0], size[1], (heads * head_dim) as i64])
}

/// `[B, T, E]` -> `[B, T + 1, E]` with the learned token `[1, 1, E]` first.
pub fn class_token(x: &Tensor, token: &Tensor) -> Result<Tensor, TchError> {
    let size = x.size();
    let token = token.f_expand([size[0], 1, size[2]], false)?.f_to_kind(x.kind())?;
    Tensor::f_cat(&[token, x.shallow_clone()], 1)
}

/// Ids `[B, bag]` -> pooled rows `[B, dim]`.
pub fn embedding_bag(weight: &Tensor, ids: &Tensor, mode: BagMode) -> Result<Tensor, TchError> {
    let size = ids.size();
    let (b, bag) = (size[0], size[1]);
    let flat = ids.f_reshape([b * bag])?;
    let offsets = Tensor::f_arange_start_step(0, b * bag, bag, (Kind::Int64, ids.device()))?;
    let mode = match mode {
        BagMode::Sum => 0,
        BagMode::Mean => 1,
    };
    Ok(Tensor::f_embedding_bag(weight, &flat, &offsets, false, mode, false, None::<Tensor>, false)?.0)
}
