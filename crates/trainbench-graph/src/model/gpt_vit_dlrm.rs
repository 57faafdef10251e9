//! The `[model]` tables of today's workloads: the decoder-only `gpt` family, the Vision Transformer `vit` and
//! the recommender `dlrm` (DLRM-DCNv2).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::defaults::{d_classes, d_true};
use super::moe::MoeSpec;

/// Feed-forward activation of a decoder layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FfnActivation {
    /// `down(gelu(up(x)))` (GPT-2; erf GELU, where GPT-2 uses its tanh approximation: same counts).
    #[default]
    Gelu,
    /// `down(silu(gate(x)) * up(x))` (Llama).
    Swiglu,
}

/// Normalisation of a decoder layer (pre-norm, before attention and before the feed-forward block).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NormKind {
    /// LayerNorm with weight and bias.
    #[default]
    Layernorm,
    /// RMSNorm with a weight only.
    Rmsnorm,
}

/// How a decoder knows positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PositionKind {
    /// A learned table of `max_positions` rows added to the token embeddings (GPT-2).
    #[default]
    Learned,
    /// Rotary embeddings applied to queries and keys (Llama), base `rope_theta`.
    Rotary,
}

fn d_gpt_layers() -> usize {
    12
}
fn d_gpt_d_model() -> usize {
    768
}
fn d_gpt_heads() -> usize {
    12
}
fn d_gpt_vocab() -> usize {
    50_257
}
fn d_gpt_seq() -> usize {
    1024
}
fn d_norm_eps() -> f64 {
    1e-5
}

/// A decoder-only transformer language model (GPT-2, Llama): token embedding, pre-norm decoder layers of
/// causal self-attention (grouped-query when `kv_heads < heads`) and a feed-forward block, a final norm and
/// the language-model head, trained with next-token cross-entropy at every position. The defaults are GPT-2
/// small (124,439,808 parameters).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GptSpec {
    /// Decoder layers.
    #[serde(default = "d_gpt_layers")]
    pub layers: usize,
    /// Model width.
    #[serde(default = "d_gpt_d_model")]
    pub d_model: usize,
    /// Query heads.
    #[serde(default = "d_gpt_heads")]
    pub heads: usize,
    /// Key/value heads (grouped-query attention); defaults to `heads` (multi-head attention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_heads: Option<usize>,
    /// Width of each head; defaults to `d_model / heads`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<usize>,
    /// Feed-forward inner width; defaults to `4 * d_model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ffn: Option<usize>,
    /// Feed-forward activation.
    #[serde(default)]
    pub activation: FfnActivation,
    /// Normalisation layers.
    #[serde(default)]
    pub norm: NormKind,
    /// Epsilon of every normalisation layer.
    #[serde(default = "d_norm_eps")]
    pub norm_eps: f64,
    /// Learned or rotary positions.
    #[serde(default)]
    pub positions: PositionKind,
    /// Rotary base (needs `positions = "rotary"`; 10000 when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_theta: Option<f64>,
    /// Rows of the learned position table (needs `positions = "learned"`; `seq_len` when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_positions: Option<usize>,
    /// Vocabulary size.
    #[serde(default = "d_gpt_vocab")]
    pub vocab: usize,
    /// Tokens per sequence (every one is a trained position; no padding).
    #[serde(default = "d_gpt_seq")]
    pub seq_len: usize,
    /// The language-model head shares the token embedding's weight.
    #[serde(default = "d_true")]
    pub tied_embeddings: bool,
    /// Biases on the attention and feed-forward projections (GPT-2: on; Llama: off).
    #[serde(default = "d_true")]
    pub bias: bool,
    /// Dropout after the embeddings, attention and feed-forward blocks (0 = none).
    #[serde(default)]
    pub dropout: f64,
    /// RMSNorm of each query and key head over `head_dim` before the rotary embedding (Qwen3).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub qk_norm: bool,
    /// Mixture-of-experts feed-forward layers (needs `activation = "swiglu"`); left out: every layer dense.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe: Option<MoeSpec>,
}

fn d_vit_image() -> usize {
    224
}
fn d_vit_patch() -> usize {
    16
}
fn d_vit_mlp() -> usize {
    3072
}

/// The Vision Transformer as torchvision's `vit_b_16` lays it out: a strided convolution cutting the image
/// into patches, a class token, learned positions, pre-norm encoder layers (LayerNorm eps 1e-6) and a
/// linear head on the class token. The defaults are ViT-B/16 (86,567,656 parameters).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VitSpec {
    /// Input resolution (square).
    #[serde(default = "d_vit_image")]
    pub image_size: usize,
    /// Patch size (square; divides `image_size`).
    #[serde(default = "d_vit_patch")]
    pub patch_size: usize,
    /// Encoder layers.
    #[serde(default = "d_gpt_layers")]
    pub layers: usize,
    /// Hidden width.
    #[serde(default = "d_gpt_d_model")]
    pub hidden: usize,
    /// Attention heads.
    #[serde(default = "d_gpt_heads")]
    pub heads: usize,
    /// Feed-forward inner width.
    #[serde(default = "d_vit_mlp")]
    pub mlp_dim: usize,
    /// Output classes.
    #[serde(default = "d_classes")]
    pub classes: usize,
    /// Dropout in the encoder (0 in `vit_b_16`).
    #[serde(default)]
    pub dropout: f64,
}

/// Row counts of the 26 categorical features of the Criteo 1TB click logs as MLPerf's DLRM-DCNv2 caps them
/// (40 million rows at most).
pub const MLPERF_TABLE_ROWS: [usize; 26] = [
    40_000_000, 39_060, 17_295, 7_424, 20_265, 3, 7_122, 1_543, 63, 40_000_000, 3_067_956, 405_282, 10, 2_209, 11_938,
    155, 4, 976, 14, 40_000_000, 40_000_000, 40_000_000, 590_152, 12_973, 108, 36,
];
/// Ids per sample of each categorical feature in MLPerf's multi-hot Criteo data set.
pub const MLPERF_BAG_SIZES: [usize; 26] =
    [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1];

/// Cap on MLPerf's row counts when a DLRM spec gives neither `table_rows` nor `max_table_rows`.
const DEFAULT_MAX_TABLE_ROWS: usize = 100_000;

fn d_dlrm_dim() -> usize {
    128
}
fn d_dlrm_bottom() -> Vec<usize> {
    vec![512, 256, 128]
}
fn d_dlrm_top() -> Vec<usize> {
    vec![1024, 1024, 512, 256, 1]
}
fn d_dlrm_cross_layers() -> usize {
    3
}
fn d_dlrm_rank() -> usize {
    512
}
fn d_dlrm_dense() -> usize {
    13
}

/// DLRM-DCNv2 as MLPerf Training runs it: 13 dense features through a bottom MLP, 26 categorical features
/// through sum-pooled embedding bags (multi-hot), their concatenation through a low-rank cross network
/// (`x_{l+1} = x_0 * (W_l V_l x_l + b_l) + x_l`) and a top MLP to one click logit (binary cross-entropy).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DlrmSpec {
    /// Rows of each of the 26 embedding tables; when left out, MLPerf's row counts capped at
    /// `max_table_rows` (the full tables hold 204 million rows, 104 GB in fp32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_rows: Option<Vec<usize>>,
    /// Cap on MLPerf's row counts when `table_rows` is left out (100,000 when this is left out too); refused
    /// beside `table_rows`, which gives every table's rows itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_table_rows: Option<usize>,
    /// Ids per sample of each categorical feature (MLPerf's multi-hot sizes when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bag_sizes: Option<Vec<usize>>,
    /// Embedding width (the bottom MLP's last width must equal it).
    #[serde(default = "d_dlrm_dim")]
    pub embedding_dim: usize,
    /// Dense features.
    #[serde(default = "d_dlrm_dense")]
    pub dense_features: usize,
    /// Widths of the bottom MLP.
    #[serde(default = "d_dlrm_bottom")]
    pub bottom_mlp: Vec<usize>,
    /// Widths of the top MLP (the last is 1: the click logit).
    #[serde(default = "d_dlrm_top")]
    pub top_mlp: Vec<usize>,
    /// Cross layers.
    #[serde(default = "d_dlrm_cross_layers")]
    pub cross_layers: usize,
    /// Rank of each cross layer's low-rank product.
    #[serde(default = "d_dlrm_rank")]
    pub cross_rank: usize,
}

impl DlrmSpec {
    /// Rows of each table, after the default and the cap.
    pub fn rows(&self) -> Vec<usize> {
        self.table_rows.clone().unwrap_or_else(|| {
            let cap = self.max_table_rows.unwrap_or(DEFAULT_MAX_TABLE_ROWS);
            MLPERF_TABLE_ROWS.iter().map(|&r| r.min(cap)).collect()
        })
    }
    /// Ids per sample of each table.
    pub fn bags(&self) -> Vec<usize> {
        self.bag_sizes.clone().unwrap_or_else(|| MLPERF_BAG_SIZES.to_vec())
    }
}
