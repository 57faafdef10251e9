//! Whether two runs of a mixture of experts routed the same global batch alike: every layer's tokens per
//! expert and drops, as the results' expert-load figures record them.

use trainbench::result::RunResult;

/// Assert that `got` routed what `want` (one rank, the reference) routed: the same layers, in every layer the
/// same assignments per step (computed plus dropped) and per expert the same load within 1% of the layer's (a
/// near-tie between two experts may fall the other way after some steps). `what` names `got` in failures.
pub fn assert_routes_like(want: &RunResult, got: &RunResult, what: &str) {
    let load = |r: &RunResult| serde_json::to_value(&r.metrics.as_ref().unwrap().expert_load).unwrap();
    let (l1, l2) = (load(want), load(got));
    let layers = |l: &serde_json::Value| l["layers"].as_array().cloned().unwrap_or_default();
    assert_eq!(layers(&l1).len(), layers(&l2).len(), "{what}: {l2}");
    assert!(!layers(&l1).is_empty(), "{what}: the reference routed nothing: {l1}");
    for (x, y) in layers(&l1).iter().zip(layers(&l2).iter()) {
        assert_eq!(x["layer"], y["layer"], "{what}");
        let tokens = |v: &serde_json::Value| -> Vec<f64> {
            v["tokens_per_expert"].as_array().unwrap().iter().map(|t| t.as_f64().unwrap()).collect()
        };
        let (tx, ty) = (tokens(x), tokens(y));
        let total = |t: &[f64], v: &serde_json::Value| t.iter().sum::<f64>() + v["dropped_per_step"].as_f64().unwrap();
        assert!((total(&tx, x) - total(&ty, y)).abs() < 1e-6, "{what}: {x} vs {y}");
        let sum: f64 = tx.iter().sum();
        assert!(tx.iter().zip(&ty).all(|(a, b)| (a - b).abs() <= 0.01 * sum), "{what}: {x} vs {y}");
    }
}

/// The mean share of routed assignments dropped over capacity in a run's MoE layers.
pub fn dropped_share(r: &RunResult) -> f64 {
    let load = r.metrics.as_ref().unwrap().expert_load.as_ref().unwrap();
    let shares: Vec<f64> = load.layers.iter().map(|l| l.dropped_fraction.unwrap()).collect();
    assert!(!shares.is_empty(), "no MoE layer in {:?}", load.layers);
    shares.iter().sum::<f64>() / shares.len() as f64
}
