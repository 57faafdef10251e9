//! ROC AUC of a binary click model over an evaluation split: the nodes that hold its scores and labels (the
//! inputs of the graph's binary cross-entropy loss, [`binary_nodes`]), and the exact area under the ROC curve
//! of the scores collected over every batch ([`roc_auc`]), computed as the Mann-Whitney statistic: the share of
//! (positive, negative) pairs whose positive scores higher, a tied pair counting one half.

use trainbench_graph::graph::{Graph, LossKind, NodeId, Op};

/// The node holding a binary model's logits and the node holding its targets (one value in {0, 1} per score):
/// the inputs of the graph's first binary cross-entropy loss. `None` when the graph has none (AUC is then
/// undefined).
pub fn binary_nodes(graph: &Graph) -> Option<(NodeId, NodeId)> {
    graph.losses.iter().find_map(|&l| {
        let node = &graph.nodes[l];
        if let Op::Loss { loss: LossKind::BceWithLogits, .. } = node.op {
            Some((*node.inputs.first()?, *node.inputs.get(1)?))
        } else {
            None
        }
    })
}

/// A target at or above this value is a click (targets are 0 or 1; anything between is rounded).
const POSITIVE_FROM: f32 = 0.5;

/// Pair each score with whether its target is a click, for [`roc_auc`]: `scores` and `targets` of the same
/// length (extra values of the longer one are ignored).
pub fn scored_pairs(scores: &[f32], targets: &[f32]) -> impl Iterator<Item = (f32, bool)> {
    scores.iter().zip(targets).map(|(&s, &t)| (s, t >= POSITIVE_FROM))
}

/// The exact ROC AUC of `(score, is positive)` pairs: over every (positive, negative) pair, the share where the
/// positive scores higher, ties counting one half (the Mann-Whitney U statistic over `positives x
/// negatives`). `None` when either class is absent or a score is NaN (the area is then undefined). Any monotone
/// transform of the scores (logits or probabilities) gives the same value.
pub fn roc_auc(pairs: &[(f32, bool)]) -> Option<f64> {
    if pairs.iter().any(|(s, _)| s.is_nan()) {
        return None;
    }
    let mut sorted = pairs.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Twice the U statistic, in integers: each positive counts 2 per negative strictly below it and 1 per
    // negative tied with it. `-0.0` and `0.0` tie, as they compare equal.
    let (mut twice_u, mut negatives_below, mut positives) = (0u128, 0u128, 0u128);
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j < sorted.len() && sorted[j].0 == sorted[i].0 {
            j += 1;
        }
        let group_pos = sorted[i..j].iter().filter(|(_, p)| *p).count() as u128;
        let group_neg = (j - i) as u128 - group_pos;
        twice_u += group_pos * (2 * negatives_below + group_neg);
        negatives_below += group_neg;
        positives += group_pos;
        i = j;
    }
    let negatives = negatives_below;
    if positives == 0 || negatives == 0 {
        return None;
    }
    Some(twice_u as f64 / (2 * positives * negatives) as f64)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use trainbench_graph::model::{DlrmSpec, MlpSpec, ModelSpec};

    fn auc(pairs: &[(f32, bool)]) -> Option<f64> {
        roc_auc(pairs)
    }

    #[test]
    fn a_perfect_ranking_is_one_and_a_reversed_one_is_zero() {
        assert_eq!(auc(&[(0.1, false), (0.4, false), (0.35, true), (0.8, true)]), Some(0.75));
        assert_eq!(auc(&[(0.1, false), (0.2, false), (0.3, true), (0.9, true)]), Some(1.0));
        assert_eq!(auc(&[(0.9, false), (0.8, false), (0.3, true), (0.1, true)]), Some(0.0));
    }

    #[test]
    fn ties_count_one_half_as_the_mann_whitney_statistic_does() {
        // Every score equal: every pair tied, 0.5.
        assert_eq!(auc(&[(1.0, true), (1.0, false), (1.0, true), (1.0, false), (1.0, false)]), Some(0.5));
        // Positives {2, 3, 3}, negatives {1, 3}: pairs (2>1), (3>1), (3>1) win, (2<3) loses, (3=3) x2 tie:
        // U = 3 + 2 * 0.5 = 4 of 6.
        let pairs = [(2.0, true), (3.0, true), (3.0, true), (1.0, false), (3.0, false)];
        assert_eq!(auc(&pairs), Some(4.0 / 6.0));
        // By ranks: scores 1,2,3,3,3 rank 1,2,4,4,4; positive ranks 2+4+4 = 10; U = 10 - 3*4/2 = 4.
        // Order of the input does not matter.
        let mut reversed = pairs;
        reversed.reverse();
        assert_eq!(auc(&reversed), Some(4.0 / 6.0));
        // -0 and +0 tie.
        assert_eq!(auc(&[(-0.0, true), (0.0, false)]), Some(0.5));
    }

    #[test]
    fn one_class_or_a_nan_score_has_no_area() {
        assert_eq!(auc(&[]), None);
        assert_eq!(auc(&[(0.3, true), (0.5, true)]), None);
        assert_eq!(auc(&[(0.3, false)]), None);
        assert_eq!(auc(&[(f32::NAN, true), (0.5, false)]), None);
    }

    #[test]
    fn pairs_read_targets_as_clicks_and_the_bce_loss_names_the_nodes() {
        let pairs: Vec<_> = scored_pairs(&[0.2, -1.0, 3.0], &[1.0, 0.0, 0.0]).collect();
        assert_eq!(pairs, [(0.2, true), (-1.0, false), (3.0, false)]);
        assert_eq!(auc(&pairs), Some(0.5));
        let dlrm = DlrmSpec {
            table_rows: Some(vec![4]),
            bag_sizes: Some(vec![1]),
            bottom_mlp: vec![8],
            embedding_dim: 8,
            top_mlp: vec![4, 1],
            ..serde_json::from_str("{}").unwrap()
        };
        let g = trainbench_graph::zoo::build(&ModelSpec::Dlrm(dlrm)).unwrap();
        let (logits, targets) = binary_nodes(&g).unwrap();
        assert_eq!((g.nodes[logits].name.as_str(), g.nodes[targets].name.as_str()), ("top_mlp.1", "target"));
        let mlp =
            trainbench_graph::zoo::build(&ModelSpec::Mlp(MlpSpec { inputs: 3, hidden: vec![2], classes: 2 })).unwrap();
        assert_eq!(binary_nodes(&mlp), None);
    }
}
