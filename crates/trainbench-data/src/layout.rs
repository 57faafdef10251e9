//! What a model's batches hold when they are read from a dataset: its real-valued or token input and its class
//! labels, found among the graph's inputs; models with other inputs are refused with the reason.

use trainbench_graph::graph::{Graph, InputKind, NodeId};

/// The kind of values a model input takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// Real values (images, features).
    Dense,
    /// Token ids in `0..vocab`.
    Ids {
        /// Vocabulary size.
        vocab: usize,
    },
}

impl ValueKind {
    /// In words, for messages.
    pub fn describe(self) -> String {
        match self {
            ValueKind::Dense => "real values".into(),
            ValueKind::Ids { vocab } => format!("token ids in 0..{vocab}"),
        }
    }
}

/// A model's batch as a dataset must fill it: one input and one label tensor per sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The graph input the dataset's inputs feed.
    pub input: NodeId,
    /// Its name.
    pub input_name: String,
    /// Real values or token ids.
    pub input_kind: ValueKind,
    /// Per-sample shape of the input.
    pub input_shape: Vec<usize>,
    /// The graph input holding the class labels.
    pub labels: NodeId,
    /// Its name.
    pub label_name: String,
    /// Per-sample shape of the labels (`[]`: one class per sample; `[seq]`: one per position).
    pub label_shape: Vec<usize>,
    /// Number of classes.
    pub classes: usize,
}

/// Why a model's inputs cannot be read from a local dataset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// The model has no class-label input.
    #[error(
        "model `{model}` has no class-label input (its inputs: {inputs}): local datasets supply one input and class labels, for classifiers and token models trained on class ids; models with dense targets train on synthetic data"
    )]
    NoLabels {
        /// The model's name.
        model: String,
        /// Its real/token inputs, named.
        inputs: String,
    },
    /// The model takes other than one real/token input and one label input.
    #[error(
        "model `{model}` takes {inputs} real/token inputs ({names}) and {labels} label inputs: local datasets supply exactly one input and one label tensor per sample"
    )]
    NotOneInputAndLabel {
        /// The model's name.
        model: String,
        /// Its real/token inputs.
        inputs: usize,
        /// Their names.
        names: String,
        /// Its label inputs.
        labels: usize,
    },
}

impl Layout {
    /// The layout of `graph`'s batches, or why its inputs cannot be read from a dataset: a dataset supplies
    /// exactly one model input (real values or token ids) and one class-label input.
    pub fn of(graph: &Graph) -> Result<Self, LayoutError> {
        let mut data = Vec::new();
        let mut labels = Vec::new();
        let mut other = Vec::new();
        for (id, node) in graph.inputs() {
            match node.op.input_kind() {
                Some(InputKind::Dense) => data.push((id, node, ValueKind::Dense)),
                Some(InputKind::Tokens { vocab }) => data.push((id, node, ValueKind::Ids { vocab: *vocab })),
                Some(InputKind::Labels { classes }) => labels.push((id, node, *classes)),
                None => other.push(node.name.clone()),
            }
        }
        let names = |v: &[(NodeId, &trainbench_graph::graph::Node, ValueKind)]| {
            v.iter().map(|(_, n, _)| format!("`{}`", n.name)).collect::<Vec<_>>().join(", ")
        };
        match (data.as_slice(), labels.as_slice()) {
            ([(input, node, kind)], [(label, lnode, classes)]) if other.is_empty() => Ok(Layout {
                input: *input,
                input_name: node.name.clone(),
                input_kind: *kind,
                input_shape: node.shape.0.clone(),
                labels: *label,
                label_name: lnode.name.clone(),
                label_shape: lnode.shape.0.clone(),
                classes: *classes,
            }),
            (_, []) => Err(LayoutError::NoLabels { model: graph.name.clone(), inputs: names(&data) }),
            _ => Err(LayoutError::NotOneInputAndLabel {
                model: graph.name.clone(),
                inputs: data.len(),
                names: names(&data),
                labels: labels.len(),
            }),
        }
    }

    /// Values per sample of the input.
    pub fn input_numel(&self) -> usize {
        self.input_shape.iter().product()
    }

    /// Values per sample of the labels.
    pub fn label_numel(&self) -> usize {
        self.label_shape.iter().product()
    }
}
