//! Custom models written as a TOML list of layers. Every error is located at `["layers", "<i>", "<field>"]`
//! and its message names the layer and, for width mismatches, both widths.

use std::collections::BTreeMap;

use crate::builder::{ConvCfg, GraphBuilder, ShapeError};
use crate::graph::{Activation, Graph, InputKind, LossKind, NodeId, PoolKind, RnnCell};
use crate::model::{CustomInput, CustomLayer, CustomLoss, CustomSpec};

use super::common::ZooError;

/// The `type` tag and optional `name` of a layer.
fn tag(layer: &CustomLayer) -> (&'static str, Option<&str>) {
    use CustomLayer as L;
    match layer {
        L::Conv2d { name, .. } => ("conv2d", name.as_deref()),
        L::Conv1d { name, .. } => ("conv1d", name.as_deref()),
        L::Linear { name, .. } => ("linear", name.as_deref()),
        L::Embedding { name, .. } => ("embedding", name.as_deref()),
        L::Lstm { name, .. } => ("lstm", name.as_deref()),
        L::Gru { name, .. } => ("gru", name.as_deref()),
        L::SelfAttention { name, .. } => ("self_attention", name.as_deref()),
        L::Rmsnorm { name, .. } => ("rmsnorm", name.as_deref()),
        L::Swiglu { name, .. } => ("swiglu", name.as_deref()),
        L::Rotary { name, .. } => ("rotary", name.as_deref()),
        L::BatchNorm { name } => ("batch_norm", name.as_deref()),
        L::LayerNorm { name } => ("layer_norm", name.as_deref()),
        L::Relu { name } => ("relu", name.as_deref()),
        L::Gelu { name } => ("gelu", name.as_deref()),
        L::Tanh { name } => ("tanh", name.as_deref()),
        L::MaxPool { name, .. } => ("max_pool", name.as_deref()),
        L::AvgPool { name, .. } => ("avg_pool", name.as_deref()),
        L::GlobalAvgPool { name } => ("global_avg_pool", name.as_deref()),
        L::Dropout { name, .. } => ("dropout", name.as_deref()),
        L::Flatten { name } => ("flatten", name.as_deref()),
        L::Residual { name, .. } => ("residual", name.as_deref()),
    }
}

/// A located error for layer `i`'s `field`.
fn at(i: usize, field: &str, message: String, hint: Option<String>) -> ZooError {
    ZooError {
        path: vec!["layers".into(), i.to_string(), field.into()],
        message: format!("layers[{i}]: {message}"),
        hint,
    }
}

/// The field a builder error of this layer type most likely concerns.
fn field_of(layer: &CustomLayer) -> &'static str {
    use CustomLayer as L;
    match layer {
        L::Conv2d { .. } | L::Conv1d { .. } | L::MaxPool { .. } | L::AvgPool { .. } => "kernel",
        L::Linear { .. } => "in_features",
        L::SelfAttention { .. } | L::Rotary { .. } => "heads",
        L::Swiglu { .. } => "hidden",
        L::Dropout { .. } => "p",
        L::Residual { .. } => "from",
        _ => "type",
    }
}

/// Add one layer; returns its output node.
fn layer(
    b: &mut GraphBuilder,
    i: usize,
    l: &CustomLayer,
    name: &str,
    x: NodeId,
    vocab: Option<usize>,
    named: &BTreeMap<String, NodeId>,
) -> Result<NodeId, ZooError> {
    use CustomLayer as L;
    let shape_err = |e: ShapeError| at(i, field_of(l), e.to_string(), None);
    let in_shape = b.shape(x).clone();
    let id = match l {
        L::Conv2d { out_channels, kernel, stride, padding, groups, bias, .. } => {
            let c = in_shape.rank().checked_sub(3).map(|a| in_shape.0[a]);
            if let Some(c) = c.filter(|c| c % groups != 0 || out_channels % groups != 0) {
                let m = format!(
                    "layer `{name}` (conv2d): groups = {groups} must divide the {c} input and {out_channels} output channels"
                );
                return Err(at(i, "groups", m, None));
            }
            let cfg = ConvCfg {
                groups: *groups,
                ..ConvCfg::square(*out_channels, *kernel, *stride, *padding).with_bias(*bias)
            };
            b.conv(name, x, cfg)
        }
        L::Conv1d { out_channels, kernel, stride, padding, .. } => {
            let cfg = ConvCfg {
                kernel: vec![*kernel],
                stride: vec![*stride],
                padding: vec![*padding],
                dilation: vec![1],
                output_padding: vec![0],
                ..ConvCfg::square(*out_channels, 1, 1, 0).with_bias(true)
            };
            b.conv(name, x, cfg)
        }
        L::Linear { in_features: Some(inf), out_features, bias, .. } => {
            b.linear_checked(name, x, *inf, *out_features, *bias)
        }
        L::Linear { in_features: None, out_features, bias, .. } => b.linear(name, x, *out_features, *bias),
        L::Embedding { dim, .. } => {
            let Some(vocab) = vocab else {
                let m = format!("layer `{name}` (embedding): the model input is dense, not token ids");
                return Err(at(i, "type", m, Some("set input_kind = { tokens = { vocab = N } }".into())));
            };
            b.embedding(name, x, vocab, *dim).map_err(|e| {
                at(i, "type", e.to_string(), Some("an embedding must be the first layer, reading the token ids".into()))
            })?;
            return Ok(b.len() - 1);
        }
        L::Lstm { hidden, layers, bidirectional, .. } => {
            b.rnn(name, x, RnnCell::Lstm, *hidden, *layers, *bidirectional)
        }
        L::Gru { hidden, layers, bidirectional, .. } => b.rnn(name, x, RnnCell::Gru, *hidden, *layers, *bidirectional),
        L::SelfAttention { heads, causal, kv_heads: None, rotary_theta: None, bias: true, .. } => {
            b.attention(name, x, x, *heads, *causal)
        }
        L::SelfAttention { heads, causal, kv_heads, rotary_theta, bias, .. } => {
            grouped_attention(b, name, x, (*heads, kv_heads.unwrap_or(*heads)), *causal, *rotary_theta, *bias)
        }
        L::Rmsnorm { eps, .. } => b.rms_norm(name, x, *eps as f32),
        L::Swiglu { hidden, bias, .. } => swiglu(b, name, x, *hidden, *bias),
        L::Rotary { heads, theta, .. } => b.rotary(name, x, *heads, *theta as f32),
        L::BatchNorm { .. } => b.batch_norm(name, x),
        L::LayerNorm { .. } => b.layer_norm(name, x, 1e-5),
        L::Relu { .. } => b.act(name, x, Activation::Relu),
        L::Gelu { .. } => b.act(name, x, Activation::Gelu),
        L::Tanh { .. } => b.act(name, x, Activation::Tanh),
        L::MaxPool { kernel, stride, .. } => b.pool(name, x, PoolKind::Max, *kernel, stride.unwrap_or(*kernel), 0),
        L::AvgPool { kernel, stride, .. } => b.pool(name, x, PoolKind::Avg, *kernel, stride.unwrap_or(*kernel), 0),
        L::GlobalAvgPool { .. } => {
            if in_shape.rank() != 3 {
                let m = format!("layer `{name}` (global_avg_pool): expects [C, H, W], got {in_shape}");
                return Err(at(i, "type", m, None));
            }
            let p = b.adaptive_pool(&format!("{name}.pool"), x, PoolKind::Avg, vec![1, 1]).map_err(shape_err)?;
            b.reshape(name, p, &[in_shape.0[0]])
        }
        L::Dropout { p, .. } => b.dropout(name, x, *p),
        L::Flatten { .. } => b.flatten(name, x),
        L::Residual { from, .. } => {
            let Some(&src) = named.get(from) else {
                let known: Vec<&str> = named.keys().map(String::as_str).collect();
                let m = format!("layer `{name}` (residual): no earlier layer is named `{from}`");
                return Err(at(i, "from", m, Some(format!("earlier layers: {}", known.join(", ")))));
            };
            b.add_nodes(name, &[x, src])
        }
    };
    id.map_err(shape_err)
}

/// Separate q, k, v projections, optional rotary, grouped-query attention and the output projection; the
/// output node is named `name` (the projections `name.q_proj`, ...).
fn grouped_attention(
    b: &mut GraphBuilder,
    name: &str,
    x: NodeId,
    (heads, kv_heads): (usize, usize),
    causal: bool,
    theta: Option<f64>,
    bias: bool,
) -> Result<NodeId, ShapeError> {
    let width = b.shape(x).last();
    if heads == 0 || width % heads != 0 {
        let message = format!("heads = {heads} must divide the width {width}");
        return Err(ShapeError { layer: name.into(), op: "self_attention", message });
    }
    let d = width / heads;
    let mut q = b.linear(&format!("{name}.q_proj"), x, width, bias)?;
    let mut k = b.linear(&format!("{name}.k_proj"), x, kv_heads * d, bias)?;
    let v = b.linear(&format!("{name}.v_proj"), x, kv_heads * d, bias)?;
    if let Some(theta) = theta {
        q = b.rotary(&format!("{name}.q_rotary"), q, heads, theta as f32)?;
        k = b.rotary(&format!("{name}.k_rotary"), k, kv_heads, theta as f32)?;
    }
    let a = b.sdpa(&format!("{name}.sdpa"), [q, k, v], heads, kv_heads, causal)?;
    b.linear(name, a, width, bias)
}

/// `down(silu(gate(x)) * up(x))`, named `name` (its parts `name.gate`, ...).
fn swiglu(b: &mut GraphBuilder, name: &str, x: NodeId, hidden: usize, bias: bool) -> Result<NodeId, ShapeError> {
    let width = b.shape(x).last();
    let gate = b.linear(&format!("{name}.gate"), x, hidden, bias)?;
    let gate = b.act(&format!("{name}.silu"), gate, Activation::Silu)?;
    let up = b.linear(&format!("{name}.up"), x, hidden, bias)?;
    let h = b.mul(&format!("{name}.gated"), &[gate, up])?;
    b.linear(name, h, width, bias)
}

/// Build a custom model: input, layers in order, loss on the last output.
pub(crate) fn build(s: &CustomSpec) -> Result<Graph, ZooError> {
    if s.input.is_empty() || s.input.contains(&0) {
        return Err(ZooError::field(
            "input",
            format!("input shape {:?} must be non-empty without zeros", s.input),
            None,
        ));
    }
    if s.layers.is_empty() {
        return Err(ZooError::field("layers", "a custom model needs at least one layer", None));
    }
    let mut b = GraphBuilder::new("custom");
    let (kind, vocab) = match s.input_kind {
        CustomInput::Dense => (InputKind::Dense, None),
        CustomInput::Tokens { vocab } => (InputKind::Tokens { vocab }, Some(vocab)),
    };
    let mut x = b.input("input", &s.input, kind)?;
    let mut named = BTreeMap::new();
    for (i, l) in s.layers.iter().enumerate() {
        let (ty, name) = tag(l);
        let name = name.map_or_else(|| format!("{ty}{i}"), str::to_string);
        if name == "input" || name == "labels" || name == "target" || name == "loss" || named.contains_key(&name) {
            return Err(at(i, "name", format!("layer name `{name}` is already used"), None));
        }
        x = layer(&mut b, i, l, &name, x, vocab, &named)?;
        named.insert(name, x);
    }
    let out = b.shape(x).clone();
    let loss_err = |e: ShapeError| ZooError { path: vec!["loss".into()], message: e.to_string(), hint: None };
    match s.loss {
        CustomLoss::CrossEntropy => {
            if out.rank() == 0 {
                return Err(ZooError::field("loss", "cross-entropy needs logits with a class dimension", None));
            }
            let labels = b
                .input("labels", &out.0[..out.rank() - 1], InputKind::Labels { classes: out.last() })
                .map_err(loss_err)?;
            b.loss("loss", LossKind::CrossEntropy, &[x, labels]).map_err(loss_err)?;
        }
        CustomLoss::Mse => {
            let target = b.input("target", &out.0, InputKind::Dense).map_err(loss_err)?;
            b.loss("loss", LossKind::Mse, &[x, target]).map_err(loss_err)?;
        }
    }
    Ok(b.finish(1, "samples")?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::zoo::common::shape;

    fn parse(toml_layers: serde_json::Value) -> CustomSpec {
        serde_json::from_value(toml_layers).unwrap()
    }

    #[test]
    fn small_cnn_builds() {
        let s = parse(serde_json::json!({
            "input": [3, 32, 32],
            "layers": [
                {"type": "conv2d", "out_channels": 16, "kernel": 3, "padding": 1, "name": "c1"},
                {"type": "relu"},
                {"type": "conv2d", "out_channels": 16, "kernel": 3, "padding": 1},
                {"type": "residual", "from": "c1"},
                {"type": "global_avg_pool"},
                {"type": "linear", "in_features": 16, "out_features": 10}
            ]
        }));
        let g = build(&s).unwrap();
        assert_eq!(shape(&g, "residual3"), [16, 32, 32]);
        assert_eq!(shape(&g, "global_avg_pool4"), [16]);
        assert_eq!(shape(&g, "linear5"), [10]);
    }

    #[test]
    fn linear_width_mismatch_is_located_and_names_both_widths() {
        let s = parse(serde_json::json!({
            "input": [784],
            "layers": [
                {"type": "linear", "out_features": 100, "name": "fc1"},
                {"type": "relu"},
                {"type": "linear", "in_features": 128, "out_features": 10, "name": "fc2"}
            ]
        }));
        let e = build(&s).unwrap_err();
        assert_eq!(e.path, ["layers", "2", "in_features"]);
        assert!(e.message.contains("fc2"), "{}", e.message);
        assert!(e.message.contains("128") && e.message.contains("100"), "{}", e.message);
    }

    #[test]
    fn unknown_residual_source_lists_known_names() {
        let s = parse(serde_json::json!({
            "input": [8],
            "layers": [{"type": "linear", "out_features": 8, "name": "a"}, {"type": "residual", "from": "b"}]
        }));
        let e = build(&s).unwrap_err();
        assert_eq!(e.path, ["layers", "1", "from"]);
        assert_eq!(e.hint.as_deref(), Some("earlier layers: a"));
    }

    #[test]
    fn embedding_needs_token_input() {
        let s = parse(serde_json::json!({"input": [16], "layers": [{"type": "embedding", "dim": 8}]}));
        assert_eq!(build(&s).unwrap_err().path, ["layers", "0", "type"]);
    }
}
