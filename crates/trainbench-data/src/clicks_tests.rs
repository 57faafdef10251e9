//! Tests of the synthetic clicks: samples fixed by their index however they are batched or sharded, inputs in
//! the graph's order, and a rule a model can learn (its own AUC well above chance), refused for non-click models.

use super::*;
use trainbench_graph::model::{DlrmSpec, MlpSpec, ModelSpec};

fn dlrm() -> Graph {
    let spec = DlrmSpec {
        table_rows: Some(vec![20, 50, 7]),
        max_table_rows: None,
        bag_sizes: Some(vec![1, 3, 2]),
        dense_features: 5,
        bottom_mlp: vec![8],
        embedding_dim: 8,
        top_mlp: vec![4, 1],
        cross_layers: 1,
        cross_rank: 2,
    };
    trainbench_graph::zoo::build(&ModelSpec::Dlrm(spec)).unwrap()
}

fn values(b: &HostBatch) -> Vec<String> {
    b.inputs.iter().map(|(id, t)| format!("{id}:{t:?}")).collect()
}

/// AUC by counting every (positive, negative) pair, ties one half.
fn pairwise_auc(scores: &[f32], clicks: &[f32]) -> f64 {
    let (mut u, mut pairs) = (0.0, 0.0);
    for (s, c) in scores.iter().zip(clicks) {
        for (t, d) in scores.iter().zip(clicks) {
            if *c == 1.0 && *d == 0.0 {
                pairs += 1.0;
                u += if s > t {
                    1.0
                } else if s == t {
                    0.5
                } else {
                    0.0
                };
            }
        }
    }
    u / pairs
}

#[test]
fn a_sample_is_the_same_however_it_is_batched_or_sharded() {
    let g = dlrm();
    let clicks = Clicks::new(&g, 3).unwrap();
    let whole = clicks.batch(0..8);
    let order: Vec<NodeId> = g.inputs().map(|(id, _)| id).collect();
    assert_eq!(whole.inputs.iter().map(|(id, _)| *id).collect::<Vec<_>>(), order);
    assert_eq!(whole.samples(&g), 8);
    let parts = clicks.batches(0..8, 3);
    assert_eq!(parts.iter().map(|b| b.samples(&g)).collect::<Vec<_>>(), [3, 3, 2]);
    assert_eq!(values(&parts[1]), values(&clicks.batch(3..6)));
    // Two ranks of a global batch of 4: rank 1 reads samples 2..4 and 6..8; the partial batch is dropped.
    let shard = clicks.shard(10, 4, 2, 1);
    assert_eq!(shard.len(), 2);
    assert_eq!(values(&shard[1]), values(&clicks.batch(6..8)));
    assert_ne!(values(&clicks.batch(0..8)), values(&Clicks::new(&g, 4).unwrap().batch(0..8)));
    for (id, t) in &whole.inputs {
        if let (Op::Input { kind: InputKind::Tokens { vocab } }, HostTensor::Ids(v)) = (&g.nodes[*id].op, t) {
            assert!(v.iter().all(|&i| i >= 0 && (i as usize) < *vocab));
        }
    }
}

#[test]
fn the_rule_ranks_clicks_well_above_chance() {
    let g = dlrm();
    let clicks = Clicks::new(&g, 1).unwrap();
    let n = 2000u64;
    let batch = clicks.batch(0..n);
    let Some(HostTensor::Dense(y)) = batch.input(clicks.target) else { panic!("no click target") };
    let rate = y.iter().sum::<f32>() / n as f32;
    assert!((0.25..0.6).contains(&rate), "click rate {rate}");
    let auc = pairwise_auc(&clicks.probabilities(0..n), y);
    assert!(auc > 0.78, "the rule's own AUC {auc}");
}

#[test]
fn only_click_models_take_clicks() {
    let mlp =
        trainbench_graph::zoo::build(&ModelSpec::Mlp(MlpSpec { inputs: 3, hidden: vec![2], classes: 2 })).unwrap();
    assert!(matches!(Clicks::new(&mlp, 0), Err(ClicksError::NoClickTarget { .. })));
}
