//! The typed names a calibration records and the model prices by: element-wise classes, optimizer kinds and the
//! classes of per-node points. A hardware profile's entries are these types from the moment it is read: each
//! is a string enum in the profile schema, so an unknown name is refused when the profile is loaded, located at
//! its key (`crate::hardware::load`).

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use trainbench_graph::OptimizerSpec;

/// An element-wise class: operations whose own work (random numbers, exponentials, reductions) the model prices
/// from calibration, by the elements a node works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElementwiseClass {
    /// Dropout with p > 0.
    Dropout,
    /// Layer normalisation.
    LayerNorm,
    /// Batch normalisation.
    BatchNorm,
    /// Softmax.
    Softmax,
    /// One cheap pass: ReLU, leaky ReLU, hard tanh.
    Relu,
    /// A curved activation: GELU, tanh, sigmoid.
    Gelu,
    /// Self-attention's fused core (by score element).
    Attention,
    /// Causal self-attention's core.
    AttentionCausal,
    /// Attention to another sequence (keys and values projected apart from the queries).
    AttentionCross,
    /// Cross-entropy (by logit).
    CrossEntropy,
    /// Max pooling (by output element).
    MaxPool,
}

/// The schema of a name that must be one of `names`: a string enum (an unknown name is a located error).
fn names_schema(description: &str, names: Vec<String>) -> Schema {
    json_schema!({ "type": "string", "description": description, "enum": names })
}

impl JsonSchema for ElementwiseClass {
    fn schema_name() -> Cow<'static, str> {
        "ElementwiseClass".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        names_schema("An element-wise class.", Self::ALL.iter().map(|c| c.name().to_string()).collect())
    }
}

impl JsonSchema for OptimizerKind {
    fn schema_name() -> Cow<'static, str> {
        "OptimizerKind".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        names_schema("An optimizer kind.", Self::ALL.iter().map(|k| k.name().to_string()).collect())
    }
}

impl JsonSchema for NodeClass {
    fn schema_name() -> Cow<'static, str> {
        "NodeClass".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        names_schema("A per-node class.", Self::all().map(Self::name).collect())
    }
}

impl JsonSchema for FirstKind {
    fn schema_name() -> Cow<'static, str> {
        "FirstKind".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        names_schema("A kind whose first node was measured.", Self::all().map(|k| k.name().to_string()).collect())
    }
}

impl Serialize for FirstKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for FirstKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = Cow::<str>::deserialize(deserializer)?;
        Self::all().find(|k| k.name() == name).ok_or_else(|| {
            let known: Vec<&str> = Self::all().map(Self::name).collect();
            serde::de::Error::custom(format!("unknown kind `{name}` (known: {})", known.join(", ")))
        })
    }
}

impl Serialize for NodeClass {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for NodeClass {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = Cow::<str>::deserialize(deserializer)?;
        Self::parse(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown node class `{name}` (known: {})", Self::known())))
    }
}

impl ElementwiseClass {
    /// Every class, in the order calibration measures them.
    pub const ALL: [Self; 11] = [
        Self::Dropout,
        Self::LayerNorm,
        Self::BatchNorm,
        Self::Softmax,
        Self::Relu,
        Self::Gelu,
        Self::Attention,
        Self::AttentionCausal,
        Self::AttentionCross,
        Self::CrossEntropy,
        Self::MaxPool,
    ];

    /// The profile name (serde's).
    pub fn name(self) -> &'static str {
        match self {
            Self::Dropout => "dropout",
            Self::LayerNorm => "layer_norm",
            Self::BatchNorm => "batch_norm",
            Self::Softmax => "softmax",
            Self::Relu => "relu",
            Self::Gelu => "gelu",
            Self::Attention => "attention",
            Self::AttentionCausal => "attention_causal",
            Self::AttentionCross => "attention_cross",
            Self::CrossEntropy => "cross_entropy",
            Self::MaxPool => "max_pool",
        }
    }

    /// Whether it is one of the attention classes.
    pub fn is_attention(self) -> bool {
        matches!(self, Self::Attention | Self::AttentionCausal | Self::AttentionCross)
    }
}

/// An optimizer kind as calibration measures it: the passes its step makes over parameters and state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OptimizerKind {
    /// SGD without momentum or weight decay.
    Sgd,
    /// SGD with momentum.
    SgdMomentum,
    /// SGD with weight decay (with or without momentum: the decay is another pass, allocating).
    SgdMomentumDecay,
    /// Adam and AdamW.
    Adam,
}

impl OptimizerKind {
    /// Every kind, in the order calibration measures them.
    pub const ALL: [Self; 4] = [Self::Sgd, Self::SgdMomentum, Self::SgdMomentumDecay, Self::Adam];

    /// The profile name (serde's).
    pub fn name(self) -> &'static str {
        match self {
            Self::Sgd => "sgd",
            Self::SgdMomentum => "sgd-momentum",
            Self::SgdMomentumDecay => "sgd-momentum-decay",
            Self::Adam => "adam",
        }
    }

    /// The measured kind that stands for `optimizer`.
    pub fn of(optimizer: &OptimizerSpec) -> Self {
        match optimizer {
            OptimizerSpec::Sgd { weight_decay, .. } if *weight_decay > 0.0 => Self::SgdMomentumDecay,
            OptimizerSpec::Sgd { momentum, .. } if *momentum == 0.0 => Self::Sgd,
            OptimizerSpec::Sgd { .. } => Self::SgdMomentum,
            OptimizerSpec::Adam { .. } | OptimizerSpec::Adamw { .. } => Self::Adam,
        }
    }
}

/// A kind whose first node in a step was measured (`first-<kind>` in `calibration.node`): an element-wise class,
/// or one of the two stand-ins for kinds without one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FirstKind {
    /// An element-wise class.
    Class(ElementwiseClass),
    /// A linear layer (stands for linear layers and products).
    Linear,
    /// A plain element-wise kernel (stands for every other operation).
    Add,
}

impl FirstKind {
    /// The kind's name after `first-`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Class(c) => c.name(),
            Self::Linear => "linear",
            Self::Add => "add",
        }
    }

    /// Every measurable kind: the classes, then the stand-ins.
    pub fn all() -> impl Iterator<Item = Self> {
        ElementwiseClass::ALL.into_iter().map(Self::Class).chain([Self::Linear, Self::Add])
    }
}

/// The class of a per-node point (`calibration.node[].class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeClass {
    /// One framework operation's fixed cost (`elementwise`).
    Elementwise,
    /// A linear layer with bias on a few elements (`linear`).
    Linear,
    /// The step's own fixed cost (`step`).
    Step,
    /// A stack of 16-channel convolutions in the step (`conv`).
    Conv,
    /// A stack of 4-channel convolutions at batch 1 (`conv-small`).
    ConvSmall,
    /// A stack of 256-wide linear layers in the step (`linear-wide`).
    LinearWide,
    /// A stack of embedding bags in the step (`embedding-bag`).
    EmbeddingBag,
    /// The first node of a kind (`first-<kind>`).
    First(FirstKind),
}

/// The prefix of first-node classes.
pub const FIRST_PREFIX: &str = "first-";

impl NodeClass {
    /// The classes without a kind of their own.
    const PLAIN: [(Self, &'static str); 7] = [
        (Self::Elementwise, "elementwise"),
        (Self::Linear, "linear"),
        (Self::Step, "step"),
        (Self::Conv, "conv"),
        (Self::ConvSmall, "conv-small"),
        (Self::LinearWide, "linear-wide"),
        (Self::EmbeddingBag, "embedding-bag"),
    ];

    /// The profile name.
    pub fn name(self) -> String {
        match self {
            Self::First(k) => format!("{FIRST_PREFIX}{}", k.name()),
            plain => Self::PLAIN.iter().find(|(c, _)| *c == plain).map_or_else(String::new, |(_, n)| (*n).to_string()),
        }
    }

    /// The class named `name`; `None` for a name the model does not know.
    pub fn parse(name: &str) -> Option<Self> {
        if let Some(kind) = name.strip_prefix(FIRST_PREFIX) {
            return FirstKind::all().find(|k| k.name() == kind).map(Self::First);
        }
        Self::PLAIN.iter().find(|(_, n)| *n == name).map(|(c, _)| *c)
    }

    /// Every class: the plain ones, then `first-<kind>` for every kind.
    pub fn all() -> impl Iterator<Item = Self> {
        Self::PLAIN.into_iter().map(|(c, _)| c).chain(FirstKind::all().map(Self::First))
    }

    /// Every name [`NodeClass::parse`] knows, comma-separated (`first-<kind>` spelled out).
    pub fn known() -> String {
        Self::all().map(Self::name).collect::<Vec<_>>().join(", ")
    }
}

/// The value of a serde enum named `name` (its profile name), or `None`.
pub fn parse<T: serde::de::DeserializeOwned>(name: &str) -> Option<T> {
    serde_json::from_value(serde_json::Value::String(name.to_string())).ok()
}

/// What a node's first-node cost goes by: its element-wise class, else its operation's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// The node's element-wise class.
    Class(ElementwiseClass),
    /// The operation's kind name (`Op::kind_name`).
    Op(&'static str),
}

impl NodeKind {
    /// The name kinds are told apart by (a class and an operation of the same name are one kind).
    pub fn name(self) -> &'static str {
        match self {
            Self::Class(c) => c.name(),
            Self::Op(op) => op,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_are_serdes_and_parse_back() {
        for c in ElementwiseClass::ALL {
            assert_eq!(serde_json::to_value(c).unwrap(), c.name());
            assert_eq!(parse::<ElementwiseClass>(c.name()), Some(c));
        }
        for k in OptimizerKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), k.name());
            assert_eq!(parse::<OptimizerKind>(k.name()), Some(k));
        }
        assert_eq!(parse::<ElementwiseClass>("swish"), None);
        for name in NodeClass::known().split(", ") {
            assert_eq!(NodeClass::parse(name).map(NodeClass::name).as_deref(), Some(name));
        }
        assert_eq!(NodeClass::parse("first-conv2d"), None);
        assert_eq!(NodeClass::parse("first-add"), Some(NodeClass::First(FirstKind::Add)));
    }
}
