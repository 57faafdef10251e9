//! The custom model of `[model]`: an input, a TOML list of layers and a loss.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::defaults::d_true;

/// A custom model: an input, a sequence of layers applied in order, and a loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CustomSpec {
    /// Per-sample input shape, e.g. `[3, 32, 32]` for images or `[784]` for features.
    pub input: Vec<usize>,
    /// Input kind: dense features, or token ids with a vocabulary.
    #[serde(default)]
    pub input_kind: CustomInput,
    /// Loss on the last layer's output; labels are generated to match.
    #[serde(default)]
    pub loss: CustomLoss,
    /// Layers, applied in order; each may name itself and add a residual from an earlier layer.
    pub layers: Vec<CustomLayer>,
}

/// Input kind of a custom model.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum CustomInput {
    /// Real-valued features.
    #[default]
    Dense,
    /// Integer token ids.
    Tokens {
        /// Vocabulary size.
        vocab: usize,
    },
}

/// Loss of a custom model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CustomLoss {
    /// Softmax cross-entropy over the last dimension against integer labels.
    #[default]
    CrossEntropy,
    /// Mean squared error against a dense target of the output's shape.
    Mse,
}

/// One layer of a custom model (`type = "conv2d"`, `type = "linear"`, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum CustomLayer {
    /// 2-D convolution.
    Conv2d {
        /// Output channels.
        out_channels: usize,
        /// Square kernel size.
        kernel: usize,
        /// Stride.
        #[serde(default = "one")]
        stride: usize,
        /// Zero padding.
        #[serde(default)]
        padding: usize,
        /// Groups.
        #[serde(default = "one")]
        groups: usize,
        /// Bias term.
        #[serde(default = "d_true")]
        bias: bool,
        /// Optional name (used by `residual_from`).
        #[serde(default)]
        name: Option<String>,
    },
    /// 1-D convolution over `[C, L]`.
    Conv1d {
        /// Output channels.
        out_channels: usize,
        /// Kernel size.
        kernel: usize,
        /// Stride.
        #[serde(default = "one")]
        stride: usize,
        /// Zero padding.
        #[serde(default)]
        padding: usize,
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// Fully connected layer over the last dimension.
    Linear {
        /// Declared input width (checked against the previous layer's output).
        in_features: Option<usize>,
        /// Output width.
        out_features: usize,
        /// Bias term.
        #[serde(default = "d_true")]
        bias: bool,
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// Embedding of token ids.
    Embedding {
        /// Embedding width.
        dim: usize,
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// LSTM over `[time, features]`.
    Lstm {
        /// Hidden units per direction.
        hidden: usize,
        /// Stacked layers.
        #[serde(default = "one")]
        layers: usize,
        /// Bidirectional.
        #[serde(default)]
        bidirectional: bool,
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// GRU over `[time, features]`.
    Gru {
        /// Hidden units per direction.
        hidden: usize,
        /// Stacked layers.
        #[serde(default = "one")]
        layers: usize,
        /// Bidirectional.
        #[serde(default)]
        bidirectional: bool,
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// Multi-head self-attention over `[time, features]`. With `kv_heads`, `rotary_theta` or `bias = false`
    /// it is built as separate q, k, v projections (biases as `bias` says), rotary queries and keys when
    /// `rotary_theta` is set, grouped-query scaled dot-product attention and an output projection; otherwise
    /// as PyTorch's `nn.MultiheadAttention` (packed projection, biases).
    SelfAttention {
        /// Heads (must divide the width).
        heads: usize,
        /// Causal mask.
        #[serde(default)]
        causal: bool,
        /// Key/value heads (grouped-query attention; divides `heads`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kv_heads: Option<usize>,
        /// Rotary base for queries and keys (none when left out).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rotary_theta: Option<f64>,
        /// Biases on the projections.
        #[serde(default = "d_true")]
        bias: bool,
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// RMS normalisation over the last dimension (weight only).
    Rmsnorm {
        /// Epsilon.
        #[serde(default = "d_eps")]
        eps: f64,
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// SwiGLU feed-forward block: `down(silu(gate(x)) * up(x))`, back to the input width.
    Swiglu {
        /// Inner width of `gate` and `up`.
        hidden: usize,
        /// Biases on the three projections.
        #[serde(default)]
        bias: bool,
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// Rotary position embedding over `[time, heads * head_dim]`.
    Rotary {
        /// Heads the width splits into (each head's width must be even).
        heads: usize,
        /// Base of the angle frequencies.
        #[serde(default = "d_theta")]
        theta: f64,
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// Batch normalisation.
    BatchNorm {
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// Layer normalisation over the last dimension.
    LayerNorm {
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// ReLU.
    Relu {
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// GELU.
    Gelu {
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// Tanh.
    Tanh {
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// Max pooling.
    MaxPool {
        /// Window.
        kernel: usize,
        /// Stride (defaults to the window).
        stride: Option<usize>,
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// Average pooling.
    AvgPool {
        /// Window.
        kernel: usize,
        /// Stride (defaults to the window).
        stride: Option<usize>,
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// Global average pooling over the spatial dimensions (`[C, H, W]` -> `[C]`).
    GlobalAvgPool {
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// Dropout.
    Dropout {
        /// Drop probability.
        p: f64,
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// Flatten to one dimension.
    Flatten {
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
    /// Add the output of an earlier named layer (residual connection).
    Residual {
        /// Name of the earlier layer whose output is added.
        from: String,
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
    },
}

fn one() -> usize {
    1
}

fn d_eps() -> f64 {
    1e-5
}

fn d_theta() -> f64 {
    10_000.0
}
