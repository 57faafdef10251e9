//! The custom model of `[model]`: an input, a TOML list of layers and a loss.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::d_true;

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
    /// Multi-head self-attention over `[time, features]`.
    SelfAttention {
        /// Heads (must divide the width).
        heads: usize,
        /// Causal mask.
        #[serde(default)]
        causal: bool,
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
