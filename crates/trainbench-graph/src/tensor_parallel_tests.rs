//! The split of decoders over a tensor group: each node's role, the local widths, the slices of the initial
//! values, and the graphs refused with the node named.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::ModelSpec;
use crate::params::{graph_tensors, tensors};

fn gpt(extra: &str) -> Graph {
    let mut json: serde_json::Value = serde_json::json!({
        "family": "gpt", "layers": 2, "d_model": 32, "heads": 4, "kv_heads": 2, "ffn": 48, "vocab": 64,
        "seq_len": 8, "activation": "swiglu", "norm": "rmsnorm", "positions": "rotary", "bias": false
    });
    let over: serde_json::Value = serde_json::from_str(&format!("{{{}}}", extra.trim_start_matches(','))).unwrap();
    for (k, v) in over.as_object().unwrap() {
        json[k] = v.clone();
    }
    let spec: ModelSpec = serde_json::from_value(json).unwrap();
    crate::zoo::build(&spec).unwrap()
}

fn role(s: &TensorShard, g: &Graph, name: &str) -> Role {
    s.roles[g.nodes.iter().position(|n| n.name == name).unwrap()]
}

#[test]
fn a_decoder_splits_by_heads_ffn_columns_and_vocabulary() {
    let g = gpt("");
    let s = TensorShard::new(&g, 2, 1, false).unwrap();
    for (name, want) in [
        ("embed_tokens", Role::VocabEmbedding),
        ("layers.0.attn_norm", Role::Replicated),
        ("layers.0.attn.q_proj", Role::Column),
        ("layers.0.attn.k_proj", Role::Column),
        ("layers.0.attn.sdpa", Role::Local),
        ("layers.0.attn.o_proj", Role::Row),
        ("layers.0.mlp.gate_proj", Role::Column),
        ("layers.0.mlp.up_proj", Role::Column),
        ("layers.0.mlp.down_proj", Role::Row),
        ("layers.1.mlp_residual", Role::Replicated),
        ("lm_head", Role::Column),
        ("loss", Role::VocabLoss),
    ] {
        assert_eq!(role(&s, &g, name), want, "{name}");
    }
    let local = |name: &str| s.local.node(name).unwrap().clone();
    assert_eq!(local("layers.0.attn.k_proj").shape.0, [8, 8], "2 key/value heads of 8 over 2 ranks: one each");
    assert!(matches!(local("layers.0.attn.sdpa").op, Op::Sdpa { heads: 2, kv_heads: 1, .. }));
    assert!(matches!(local("layers.0.mlp.down_proj").op, Op::Linear { in_features: 24, out_features: 32, .. }));
    assert_eq!(local("lm_head").shape.0, [8, 32]);
    assert!(s.enters[g.nodes.iter().position(|n| n.name == "layers.0.mlp_norm").unwrap()]);
    // Every matrix is halved; the norms are whole.
    let full: u64 = graph_tensors(&g).iter().map(|(_, d)| d.numel()).sum();
    let half: u64 = graph_tensors(&s.local).iter().map(|(_, d)| d.numel()).sum();
    let norms = 32 * (2 * 2 + 1);
    assert_eq!(half, (full - norms) / 2 + norms);
}

#[test]
fn each_rank_starts_from_its_slice_of_the_full_weights() {
    let g = gpt("");
    let id = g.nodes.iter().position(|n| n.name == "layers.0.attn.o_proj").unwrap();
    let full = tensors(&g.nodes[id]).remove(0);
    let values = crate::init::initial_values(&full, 7);
    let mut joined = vec![Vec::new(); 32];
    for rank in 0..2 {
        let s = TensorShard::new(&g, 2, rank, false).unwrap();
        let local = tensors(&s.local.nodes[id]).remove(0);
        assert_eq!(local.shape, [32, 16]);
        let part = s.initial_values(&g, id, &local, 7);
        for (row, chunk) in part.chunks(16).enumerate() {
            joined[row].extend_from_slice(chunk);
        }
    }
    assert_eq!(joined.concat(), values, "the two column blocks side by side are the full matrix");
}

#[test]
fn sequence_parallelism_splits_the_activations_between_regions_and_marks_their_tensors_partial() {
    let g = gpt("");
    let s = TensorShard::new(&g, 2, 0, true).unwrap();
    assert_eq!(s.local.node("layers.0.attn_residual").unwrap().shape.0, [4, 32]);
    assert_eq!(s.local.node("layers.0.attn.q_proj").unwrap().shape.0, [8, 16], "regions see the whole sequence");
    let id = g.nodes.iter().position(|n| n.name == "norm").unwrap();
    let d = tensors(&g.nodes[id]).remove(0);
    assert_eq!(s.split_of(&g, id, &d), Split::Replicated { partial: true });
    let plain = TensorShard::new(&g, 2, 0, false).unwrap();
    assert_eq!(plain.split_of(&g, id, &d), Split::Replicated { partial: false });
    assert!(TensorShard::new(&gpt(r#", "seq_len": 7"#), 2, 0, true).is_err());
}

#[test]
fn what_does_not_divide_or_split_is_refused_naming_the_node() {
    let e = TensorShard::new(&gpt(""), 4, 0, false).unwrap_err();
    assert!(e.message.contains("`layers.0.attn.k_rotary` has 2 heads"), "{e}");
    let tied = gpt(
        r#", "tied_embeddings": true, "qk_norm": true, "positions": "learned", "norm": "layernorm", "bias": true, "activation": "gelu""#,
    );
    let s = TensorShard::new(&tied, 2, 0, false).unwrap();
    let q_norm = tied.nodes.iter().position(|n| n.name == "layers.0.attn.q_norm").unwrap();
    assert_eq!(s.roles[q_norm], Role::Local);
    let d = tensors(&tied.nodes[q_norm]).remove(0);
    assert_eq!(s.split_of(&tied, q_norm, &d), Split::Replicated { partial: true }, "each rank normalises its heads");
    let e = TensorShard::new(&gpt(r#", "vocab": 63"#), 2, 0, false).unwrap_err();
    assert!(e.message.contains("`embed_tokens` has 63 vocabulary rows"), "{e}");
}

/// A tiny ViT: 16x16 images in 4x4 patches (16 + the class token), 2 layers of width 32, 4 heads, 10 classes.
fn vit() -> Graph {
    let spec: ModelSpec = serde_json::from_value(serde_json::json!({
        "family": "vit", "image_size": 16, "patch_size": 4, "layers": 2, "hidden": 32, "heads": 4,
        "mlp_dim": 64, "classes": 10
    }))
    .unwrap();
    crate::zoo::build(&spec).unwrap()
}

#[test]
fn a_vit_splits_its_fused_attention_by_heads_its_mlp_and_its_classes() {
    let g = vit();
    let s = TensorShard::new(&g, 2, 1, false).unwrap();
    let attn = "encoder.layers.encoder_layer_0.self_attention";
    for (name, want) in [
        ("conv_proj", Role::Replicated),
        ("class_token", Role::Replicated),
        ("encoder.pos_embedding", Role::Replicated),
        ("encoder.layers.encoder_layer_0.ln_1", Role::Replicated),
        (attn, Role::Heads),
        ("encoder.layers.encoder_layer_0.mlp.0", Role::Column),
        ("encoder.layers.encoder_layer_0.mlp.1", Role::Local),
        ("encoder.layers.encoder_layer_0.mlp.3", Role::Row),
        ("heads.head", Role::Column),
        ("loss", Role::VocabLoss),
    ] {
        assert_eq!(role(&s, &g, name), want, "{name}");
    }
    let local = s.local.node(attn).unwrap().clone();
    assert!(matches!(local.op, Op::Attention { embed_dim: 32, heads: 2, tensor_shards: 2, .. }), "{:?}", local.op);
    assert_eq!(local.shape.0, [17, 32], "the attention's output is whole (summed over the group)");
    let shapes: Vec<Vec<usize>> = tensors(&local).into_iter().map(|d| d.shape).collect();
    assert_eq!(shapes, [vec![48, 32], vec![48], vec![32, 16], vec![32]], "in_proj rows, out_proj columns halved");
    assert_eq!(s.local.node("heads.head").unwrap().shape.0, [5], "5 of the 10 classes per rank");
    for name in ["encoder.layers.encoder_layer_0.ln_1", "encoder.layers.encoder_layer_1.ln_2", "class_features"] {
        assert!(s.enters[g.nodes.iter().position(|n| n.name == name).unwrap()], "{name} enters a region");
    }
    // Halved but for the replicated stem (patch convolution 3x4x4x32 + 32, class token 32, 17 x 32 positions),
    // the 5 LayerNorms (2 x 32 each) and per layer the two biases added after the sums (out_proj's, mlp.3's).
    let full: u64 = graph_tensors(&g).iter().map(|(_, d)| d.numel()).sum();
    let half: u64 = graph_tensors(&s.local).iter().map(|(_, d)| d.numel()).sum();
    let replicated = (3 * 16 * 32 + 32) + 32 + 17 * 32 + 5 * 64 + 2 * 2 * 32;
    assert_eq!(half, (full - replicated) / 2 + replicated);
    // Each rank's attention does half the whole layer's work: projections to and from its heads, its heads.
    let work = |g: &Graph| {
        let a = crate::analysis::analyze(g);
        let l = a.layers.iter().find(|l| l.name == attn).unwrap();
        (l.forward_flops, l.backward_flops, l.saved_elements)
    };
    let ((f, b, _), (fl, bl, _)) = (work(&g), work(&s.local));
    assert_eq!((2 * fl, 2 * bl), (f, b));
}

#[test]
fn each_rank_holds_its_heads_rows_of_q_k_and_v() {
    let g = vit();
    let id = g.nodes.iter().position(|n| n.name == "encoder.layers.encoder_layer_1.self_attention").unwrap();
    let full = tensors(&g.nodes[id]).remove(0);
    assert_eq!(full.shape, [96, 32]);
    let values = crate::init::initial_values(&full, 3);
    let parts: Vec<Vec<f32>> = (0..2)
        .map(|rank| {
            let s = TensorShard::new(&g, 2, rank, false).unwrap();
            let local = tensors(&s.local.nodes[id]).remove(0);
            assert_eq!(s.split_of(&g, id, &full), Split::Chunked { axis: 0, chunks: 3, start: rank * 16, len: 16 });
            s.initial_values(&g, id, &local, 3)
        })
        .collect();
    // Per rank [q_r; k_r; v_r] of 16 rows each: q0 q1 k0 k1 v0 v1 is the whole matrix.
    let rows = |p: &Vec<f32>, c: usize| p[c * 16 * 32..(c + 1) * 16 * 32].to_vec();
    let joined: Vec<f32> = (0..3).flat_map(|c| [rows(&parts[0], c), rows(&parts[1], c)].concat()).collect();
    assert_eq!(joined, values);
    assert_eq!(chunked_slice(&[0., 1., 2., 3., 4., 5.], &[1, 6], 1, 3, 1, 1), [1., 3., 5.]);
}

#[test]
fn a_vit_on_sequence_shards_keeps_its_stem_whole_and_gathers_before_the_class_token() {
    // 12x12 images in 4x4 patches: 9 + the class token = 10 positions, 5 per rank.
    let spec: ModelSpec = serde_json::from_value(serde_json::json!({
        "family": "vit", "image_size": 12, "patch_size": 4, "layers": 2, "hidden": 32, "heads": 4,
        "mlp_dim": 64, "classes": 10
    }))
    .unwrap();
    let g = crate::zoo::build(&spec).unwrap();
    let s = TensorShard::new(&g, 2, 1, true).unwrap();
    let at = |name: &str| g.nodes.iter().position(|n| n.name == name).unwrap_or_else(|| panic!("{name}"));
    let block = "encoder.layers.encoder_layer_0";
    for (name, shards, narrows, gathers) in [
        ("conv_proj", false, false, false),
        ("class_token", false, false, false),
        ("encoder.pos_embedding", false, true, false),
        (&format!("{block}.ln_1") as &str, true, false, false),
        (&format!("{block}.self_attention"), true, false, false),
        ("encoder.ln", true, false, true),
        ("class_output", false, false, false),
    ] {
        let i = at(name);
        assert_eq!((s.on_shards[i], s.narrows[i], s.gathers[i]), (shards, narrows, gathers), "{name}");
    }
    assert_eq!(s.local.node(&format!("{block}.ln_1")).unwrap().shape.0, [5, 32]);
    assert_eq!(s.local.node("encoder.pos_embedding").unwrap().shape.0, [10, 32], "the stem stays whole");
    // The stem's tensors see the shard's gradient only: summed over the group, as the norms' are.
    let conv = at("conv_proj");
    let d = tensors(&g.nodes[conv]).remove(0);
    assert_eq!(s.split_of(&g, conv, &d), Split::Replicated { partial: true });
    let attn = at(&format!("{block}.self_attention"));
    let bias = tensors(&g.nodes[attn]).into_iter().find(|d| d.local == "out_proj.bias").unwrap();
    assert_eq!(s.split_of(&g, attn, &bias), Split::Replicated { partial: true }, "added on the shards");
}

#[test]
fn a_vit_is_refused_sequence_parallelism_over_positions_and_heads_that_do_not_divide() {
    let e = TensorShard::new(&vit(), 2, 0, true).unwrap_err();
    assert!(
        e.message.contains("`encoder.pos_embedding` (17 positions) along its sequence, which does not divide"),
        "{e}"
    );
    let e = TensorShard::new(&vit(), 8, 0, false).unwrap_err();
    assert!(e.message.contains("has 4 heads, which do not divide over 8 ranks"), "{e}");
}
