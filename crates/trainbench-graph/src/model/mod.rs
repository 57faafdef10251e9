//! The `[model]` table of a spec: a zoo family with its hyper-parameters, or a custom list of layers.
//!
//! These are wire types: serde + JsonSchema, unknown keys rejected, doc comments become schema descriptions.

mod custom;
mod defaults;
mod gpt_vit_dlrm;
mod moe;

pub use custom::{CustomInput, CustomLayer, CustomLoss, CustomSpec};
pub use gpt_vit_dlrm::{
    DlrmSpec, FfnActivation, GptSpec, MLPERF_BAG_SIZES, MLPERF_TABLE_ROWS, NormKind, PositionKind, VitSpec,
};
pub use moe::{MoeRouter, MoeSpec};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use defaults::{d_classes, d_true};

/// The model to train: a zoo `family` with its hyper-parameters, or `family = "custom"` with a layer list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "family", rename_all = "kebab-case")]
pub enum ModelSpec {
    /// ResNet (He et al.): basic blocks for depth 18/34, bottlenecks for 50/101/152.
    Resnet(ResnetSpec),
    /// Inception-v3 (Szegedy et al.), 299x299 input, optional auxiliary classifier.
    InceptionV3(InceptionSpec),
    /// Seq2Seq NMT: LSTM encoder-decoder with Luong-style attention (TBD: 2 layers, 512 units).
    Seq2seq(Seq2seqSpec),
    /// Transformer encoder-decoder (Vaswani et al.), base or big.
    Transformer(TransformerSpec),
    /// Deep Speech 2: 2-D convolution front end, bidirectional GRU stack, CTC loss.
    DeepSpeech2(DeepSpeech2Spec),
    /// Faster R-CNN with a ResNet backbone, region proposal network and RoI head at a fixed proposal count.
    FasterRcnn(FasterRcnnSpec),
    /// WGAN-GP: DCGAN-style generator and critic with gradient penalty.
    WganGp(WganGpSpec),
    /// A3C's Atari network: convolutional torso, policy and value heads.
    A3c(A3cSpec),
    /// Neural collaborative filtering (NeuMF: GMF + MLP towers).
    Ncf(NcfSpec),
    /// BERT for pre-training: encoder, masked-LM head (decoder tied to the word embeddings), pooler and
    /// next-sentence head (`BertForPreTraining`: 110,106,428 parameters for BERT-base).
    Bert(BertSpec),
    /// Decoder-only transformer language model (GPT-2, Llama): see [`GptSpec`].
    Gpt(GptSpec),
    /// Vision Transformer as torchvision's `vit_b_16` (86,567,656 parameters with the defaults).
    Vit(VitSpec),
    /// DLRM-DCNv2 as MLPerf Training runs it (embedding bags, low-rank cross network).
    Dlrm(DlrmSpec),
    /// Multi-layer perceptron classifier.
    Mlp(MlpSpec),
    /// A model written as a list of layers in TOML.
    Custom(CustomSpec),
}

impl ModelSpec {
    /// The family name as written in the spec.
    pub fn family(&self) -> &'static str {
        match self {
            ModelSpec::Resnet(_) => "resnet",
            ModelSpec::InceptionV3(_) => "inception-v3",
            ModelSpec::Seq2seq(_) => "seq2seq",
            ModelSpec::Transformer(_) => "transformer",
            ModelSpec::DeepSpeech2(_) => "deep-speech2",
            ModelSpec::FasterRcnn(_) => "faster-rcnn",
            ModelSpec::WganGp(_) => "wgan-gp",
            ModelSpec::A3c(_) => "a3c",
            ModelSpec::Ncf(_) => "ncf",
            ModelSpec::Bert(_) => "bert",
            ModelSpec::Gpt(_) => "gpt",
            ModelSpec::Vit(_) => "vit",
            ModelSpec::Dlrm(_) => "dlrm",
            ModelSpec::Mlp(_) => "mlp",
            ModelSpec::Custom(_) => "custom",
        }
    }
}

fn d_resnet_depth() -> u32 {
    50
}
fn d_width() -> usize {
    64
}
fn d_image() -> usize {
    224
}

/// Stem of a ResNet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ResnetStem {
    /// 7x7/2 convolution and 3x3/2 max-pool (ImageNet).
    #[default]
    Imagenet,
    /// 3x3/1 convolution, no pooling (CIFAR-sized inputs).
    Cifar,
}

/// ResNet hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResnetSpec {
    /// Depth: 18, 34, 50, 101 or 152.
    #[serde(default = "d_resnet_depth")]
    pub depth: u32,
    /// Channels of the first stage (64 in the paper); later stages double it.
    #[serde(default = "d_width")]
    pub width: usize,
    /// Output classes.
    #[serde(default = "d_classes")]
    pub classes: usize,
    /// Input resolution (square).
    #[serde(default = "d_image")]
    pub image_size: usize,
    /// Stem variant.
    #[serde(default)]
    pub stem: ResnetStem,
}

fn d_inception_image() -> usize {
    299
}

/// Inception-v3 hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InceptionSpec {
    /// Output classes.
    #[serde(default = "d_classes")]
    pub classes: usize,
    /// Train the auxiliary classifier too (its loss is weighted 0.4).
    #[serde(default = "d_true")]
    pub aux_logits: bool,
    /// Input resolution (square; at least 75).
    #[serde(default = "d_inception_image")]
    pub image_size: usize,
}

fn d_vocab() -> usize {
    17_000
}
fn d_hidden() -> usize {
    512
}
fn d_layers2() -> usize {
    2
}
fn d_seq() -> usize {
    50
}
fn d_dropout() -> f64 {
    0.2
}

/// Seq2Seq (NMT) hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Seq2seqSpec {
    /// Source vocabulary size (IWSLT15 en-vi: 17,191).
    #[serde(default = "d_vocab")]
    pub src_vocab: usize,
    /// Target vocabulary size (IWSLT15 en-vi: 7,709).
    #[serde(default = "d_vocab")]
    pub tgt_vocab: usize,
    /// LSTM units (and embedding width).
    #[serde(default = "d_hidden")]
    pub hidden: usize,
    /// LSTM layers in encoder and decoder.
    #[serde(default = "d_layers2")]
    pub layers: usize,
    /// Source and target sequence length in tokens.
    #[serde(default = "d_seq")]
    pub seq_len: usize,
    /// Dropout between layers.
    #[serde(default = "d_dropout")]
    pub dropout: f64,
}

fn d_t_vocab() -> usize {
    37_000
}
fn d_t_layers() -> usize {
    6
}
fn d_t_model() -> usize {
    512
}
fn d_t_heads() -> usize {
    8
}
fn d_t_ffn() -> usize {
    2048
}
fn d_t_seq() -> usize {
    64
}
fn d_t_dropout() -> f64 {
    0.1
}

/// Transformer hyper-parameters (defaults: base).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransformerSpec {
    /// Shared source/target vocabulary (WMT14 en-de BPE: 37,000).
    #[serde(default = "d_t_vocab")]
    pub vocab: usize,
    /// Encoder layers.
    #[serde(default = "d_t_layers")]
    pub encoder_layers: usize,
    /// Decoder layers.
    #[serde(default = "d_t_layers")]
    pub decoder_layers: usize,
    /// Model width.
    #[serde(default = "d_t_model")]
    pub d_model: usize,
    /// Attention heads (must divide d_model).
    #[serde(default = "d_t_heads")]
    pub heads: usize,
    /// Feed-forward inner width.
    #[serde(default = "d_t_ffn")]
    pub ffn: usize,
    /// Source and target length in tokens.
    #[serde(default = "d_t_seq")]
    pub seq_len: usize,
    /// Dropout.
    #[serde(default = "d_t_dropout")]
    pub dropout: f64,
    /// Share the source embedding, target embedding and output projection (one matrix).
    #[serde(default = "d_true")]
    pub shared_embeddings: bool,
}

fn d_ds_frames() -> usize {
    200
}
fn d_ds_freq() -> usize {
    161
}
fn d_ds_gru() -> usize {
    7
}
fn d_ds_hidden() -> usize {
    1760
}
fn d_ds_chars() -> usize {
    29
}
fn d_ds_label() -> usize {
    40
}

/// Deep Speech 2 hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeepSpeech2Spec {
    /// Spectrogram frames per utterance.
    #[serde(default = "d_ds_frames")]
    pub frames: usize,
    /// Frequency bins per frame.
    #[serde(default = "d_ds_freq")]
    pub freq_bins: usize,
    /// Bidirectional GRU layers.
    #[serde(default = "d_ds_gru")]
    pub rnn_layers: usize,
    /// GRU units per direction.
    #[serde(default = "d_ds_hidden")]
    pub rnn_hidden: usize,
    /// Output characters including the CTC blank.
    #[serde(default = "d_ds_chars")]
    pub characters: usize,
    /// Transcript length in characters.
    #[serde(default = "d_ds_label")]
    pub label_len: usize,
}

fn d_frcnn_depth() -> u32 {
    101
}
fn d_frcnn_classes() -> usize {
    21
}
fn d_frcnn_image() -> usize {
    600
}
fn d_frcnn_props() -> usize {
    300
}
fn d_anchors() -> usize {
    9
}

/// Faster R-CNN hyper-parameters (backbone conv1..conv4, RoI align, conv5 head).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FasterRcnnSpec {
    /// Backbone ResNet depth (50 or 101).
    #[serde(default = "d_frcnn_depth")]
    pub backbone_depth: u32,
    /// Object classes including background (Pascal VOC: 21).
    #[serde(default = "d_frcnn_classes")]
    pub classes: usize,
    /// Input resolution (square, shorter side of VOC images: 600).
    #[serde(default = "d_frcnn_image")]
    pub image_size: usize,
    /// Proposals kept per image (fixed, so the cost is static).
    #[serde(default = "d_frcnn_props")]
    pub proposals: usize,
    /// Anchors per position in the region proposal network.
    #[serde(default = "d_anchors")]
    pub anchors: usize,
}

fn d_gan_image() -> usize {
    64
}
fn d_latent() -> usize {
    128
}
fn d_gan_width() -> usize {
    64
}
fn d_gp() -> f64 {
    10.0
}

/// WGAN-GP hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WganGpSpec {
    /// Image resolution (square, power of two, at least 16).
    #[serde(default = "d_gan_image")]
    pub image_size: usize,
    /// Latent vector width.
    #[serde(default = "d_latent")]
    pub latent: usize,
    /// Base channel width of generator and critic.
    #[serde(default = "d_gan_width")]
    pub width: usize,
    /// Gradient-penalty weight (lambda).
    #[serde(default = "d_gp")]
    pub gp_weight: f64,
}

fn d_actions() -> usize {
    6
}
fn d_frames() -> usize {
    4
}
fn d_atari() -> usize {
    84
}

/// A3C hyper-parameters (Atari).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct A3cSpec {
    /// Discrete actions (Pong: 6).
    #[serde(default = "d_actions")]
    pub actions: usize,
    /// Stacked frames per observation.
    #[serde(default = "d_frames")]
    pub frames: usize,
    /// Observation resolution (square).
    #[serde(default = "d_atari")]
    pub image_size: usize,
}

fn d_users() -> usize {
    138_493
}
fn d_items() -> usize {
    26_744
}
fn d_factors() -> usize {
    64
}
fn d_ncf_layers() -> Vec<usize> {
    vec![256, 256, 128, 64]
}

/// NCF (NeuMF) hyper-parameters (defaults: MovieLens-20M, as in MLPerf).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NcfSpec {
    /// Number of users.
    #[serde(default = "d_users")]
    pub users: usize,
    /// Number of items.
    #[serde(default = "d_items")]
    pub items: usize,
    /// GMF embedding width.
    #[serde(default = "d_factors")]
    pub factors: usize,
    /// MLP tower widths; the first is twice the MLP embedding width.
    #[serde(default = "d_ncf_layers")]
    pub mlp_layers: Vec<usize>,
}

fn d_bert_vocab() -> usize {
    30_522
}
fn d_bert_layers() -> usize {
    12
}
fn d_bert_hidden() -> usize {
    768
}
fn d_bert_heads() -> usize {
    12
}
fn d_bert_ffn() -> usize {
    3072
}
fn d_bert_seq() -> usize {
    128
}
fn d_bert_pos() -> usize {
    512
}

/// BERT hyper-parameters (defaults: BERT-base, uncased).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BertSpec {
    /// WordPiece vocabulary.
    #[serde(default = "d_bert_vocab")]
    pub vocab: usize,
    /// Encoder layers.
    #[serde(default = "d_bert_layers")]
    pub layers: usize,
    /// Hidden width.
    #[serde(default = "d_bert_hidden")]
    pub hidden: usize,
    /// Attention heads.
    #[serde(default = "d_bert_heads")]
    pub heads: usize,
    /// Feed-forward inner width.
    #[serde(default = "d_bert_ffn")]
    pub ffn: usize,
    /// Sequence length in tokens.
    #[serde(default = "d_bert_seq")]
    pub seq_len: usize,
    /// Learned position embeddings (at least seq_len).
    #[serde(default = "d_bert_pos")]
    pub max_positions: usize,
}

fn d_mlp_in() -> usize {
    784
}
fn d_mlp_hidden() -> Vec<usize> {
    vec![512, 512]
}
fn d_mlp_classes() -> usize {
    10
}

/// MLP hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MlpSpec {
    /// Input features.
    #[serde(default = "d_mlp_in")]
    pub inputs: usize,
    /// Hidden layer widths.
    #[serde(default = "d_mlp_hidden")]
    pub hidden: Vec<usize>,
    /// Output classes.
    #[serde(default = "d_mlp_classes")]
    pub classes: usize,
}
