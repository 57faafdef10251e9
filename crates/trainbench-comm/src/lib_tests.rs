//! The strategies on the in-process engine: all-reduce averages, parameter servers apply the same update, both
//! agree on stopping, and the bytes counted are the formulas'.
#![allow(clippy::unwrap_used)]

use super::all_reduce::AllReduceExchange;
use super::exchange::{ExchangeStats, GradientExchange, StopWish};
use super::layout::Layout;
use super::local::ThreadComm;
use super::optim::HostOptimizer;
use super::ps::PsWorkerExchange;
use super::server::serve;
use trainbench_graph::graph::Graph;
use trainbench_graph::init::initial_values;
use trainbench_graph::model::{MlpSpec, ModelSpec};
use trainbench_graph::training::OptimizerSpec;
use trainbench_graph::zoo::build;

fn mlp() -> Graph {
    build(&ModelSpec::Mlp(MlpSpec { inputs: 6, hidden: vec![5, 4], classes: 3 })).unwrap()
}

fn sgd() -> OptimizerSpec {
    OptimizerSpec::Sgd { lr: 0.1, momentum: 0.9, weight_decay: 0.01, nesterov: false }
}

/// Worker `w`'s made-up gradient at `step`.
fn grad(layout: &Layout, w: usize, step: u64) -> Vec<f32> {
    (0..layout.total).map(|i| ((i * 7 + w * 13 + step as usize * 3) % 11) as f32 * 0.1 - 0.5).collect()
}

fn initial(layout: &Layout, seed: u64) -> Vec<f32> {
    layout.decls.iter().flat_map(|d| initial_values(d, seed)).collect()
}

/// Train `steps` steps on `workers` threads with all-reduce and each worker's own optimizer; the weights of
/// every worker, and the stats of worker 0.
fn all_reduce_run(
    workers: usize,
    steps: u64,
    stop_wish_at: Option<(usize, u64)>,
) -> (Vec<Vec<f32>>, ExchangeStats, u64) {
    let g = mlp();
    let handles: Vec<_> = ThreadComm::group(workers)
        .into_iter()
        .map(|mut comm| {
            let g = g.clone();
            std::thread::spawn(move || {
                let mut x = AllReduceExchange::new(&mut comm, &g, crate::exchange::BUCKET_BYTES);
                let layout = x.layout().clone();
                let mut w = initial(&layout, 5);
                let mut opt = HostOptimizer::new(&sgd());
                let mut done = 0;
                for step in 0..steps {
                    let mut gr = grad(&layout, x.worker(), step);
                    let wish = if stop_wish_at == Some((x.worker(), step)) {
                        StopWish::Interrupted
                    } else {
                        StopWish::Continue
                    };
                    let r = x.exchange(&mut gr, &mut [], wish).unwrap();
                    opt.step(&mut w, &gr);
                    done += 1;
                    assert_eq!(r.interrupted, r.stop, "only an interruption stops this run early");
                    if r.stop {
                        break;
                    }
                }
                (w, x.stats(), done)
            })
        })
        .collect();
    let out: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let (stats, done) = (out[0].1, out[0].2);
    assert!(out.iter().all(|o| o.2 == done), "every worker stops at the same step");
    (out.into_iter().map(|o| o.0).collect(), stats, done)
}

#[test]
fn all_reduce_averages_and_every_worker_holds_the_same_weights() {
    let (weights, stats, done) = all_reduce_run(4, 3, None);
    assert_eq!(done, 3);
    assert!(weights.iter().all(|w| w == &weights[0]), "bit-identical weights on every worker");
    // One worker on the mean gradient trains the same weights.
    let layout = Layout::of(&mlp());
    let mut w = initial(&layout, 5);
    let mut opt = HostOptimizer::new(&sgd());
    for step in 0..3 {
        let mean: Vec<f32> =
            (0..layout.total).map(|i| (0..4).map(|k| grad(&layout, k, step)[i]).sum::<f32>() / 4.0).collect();
        opt.step(&mut w, &mean);
    }
    let worst = w.iter().zip(&weights[0]).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(worst < 1e-6, "{worst}");
    let s = 4 * layout.total as u64;
    assert_eq!(stats.bytes_sent, 3 * 2 * 3 * s / 4, "2 (W-1)/W x S per step");
    assert_eq!(stats.steps, 3);
}

#[test]
fn one_workers_wish_to_stop_ends_the_run_for_all_after_that_step() {
    let (_, _, done) = all_reduce_run(3, 10, Some((2, 4)));
    assert_eq!(done, 5);
}

#[test]
fn parameter_servers_train_what_all_reduce_trains_under_sgd() {
    let g = mlp();
    let (workers, servers, steps) = (3usize, 2usize, 4u64);
    let comms = ThreadComm::group(workers + servers);
    let handles: Vec<_> = comms
        .into_iter()
        .enumerate()
        .map(|(rank, mut comm)| {
            let g = g.clone();
            std::thread::spawn(move || {
                if rank >= workers {
                    let r = serve(&mut comm, &g, 5, &sgd(), servers).unwrap();
                    assert_eq!(r.steps, steps);
                    return (Vec::new(), 0, 0);
                }
                let mut x = PsWorkerExchange::new(&mut comm, &g, servers).unwrap();
                let layout = x.layout().clone();
                let mut w = initial(&layout, 5);
                for step in 0..steps {
                    let mut gr = grad(&layout, x.worker(), step);
                    let wish = if step + 1 == steps { StopWish::Finished } else { StopWish::Continue };
                    let r = x.exchange(&mut gr, &mut w, wish).unwrap();
                    assert!(r.weights_updated);
                    assert_eq!(r.stop, step + 1 == steps);
                    assert!(!r.interrupted, "a budget's end is not an interruption");
                }
                let st = x.stats();
                (w, st.bytes_sent, st.bytes_received)
            })
        })
        .collect();
    let out: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let (reference, _, _) = all_reduce_run(workers, steps, None);
    let s = 4 * Layout::of(&g).total as u64;
    for (w, sent, received) in out.iter().take(workers) {
        let worst = w.iter().zip(&reference[0]).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst < 1e-6, "{worst}");
        assert_eq!((*sent, *received), (steps * s, steps * s), "each worker pushes S and pulls S per step");
    }
}

#[test]
fn shards_are_whole_tensors_balanced_by_size() {
    let layout = Layout::of(&mlp());
    let owners = layout.shard_owners(2);
    let load = |s: usize| layout.shard(&owners, s).iter().map(|&i| layout.len_of(i)).sum::<usize>();
    assert_eq!(load(0) + load(1), layout.total);
    // Greedy by size keeps the fullest server within one tensor of an even split.
    let largest = (0..layout.decls.len()).map(|i| layout.len_of(i)).max().unwrap();
    assert!(load(0).max(load(1)) <= layout.total / 2 + largest);
    assert!(load(0) > 0 && load(1) > 0, "both servers hold something");
}

#[test]
fn data_parallel_lora_exchanges_the_adapters_gradients_only() {
    use trainbench_graph::lora::{LoraSpec, LoraTarget, adapt};
    let spec = r#"{"family": "gpt", "layers": 2, "d_model": 32, "heads": 4, "vocab": 50, "seq_len": 8}"#;
    let base = build(&serde_json::from_str::<ModelSpec>(spec).unwrap()).unwrap();
    let lora = LoraSpec {
        rank: 4,
        alpha: Some(8.0),
        dropout: 0.0,
        targets: vec![LoraTarget::Q, LoraTarget::V],
        base_dtype: Default::default(),
    };
    let g = adapt(&base, &lora).unwrap();
    let layout = Layout::of(&g);
    // q and v (32 -> 32) in two layers: 4 adapters of 4 x (32 + 32); every base weight left out.
    assert_eq!(layout.total, 4 * 4 * 64);
    assert!(layout.decls.iter().all(|d| d.local.starts_with("lora_")), "{:?}", layout.decls);
    let stats: Vec<ExchangeStats> = ThreadComm::group(2)
        .into_iter()
        .map(|mut comm| {
            let g = g.clone();
            std::thread::spawn(move || {
                let mut x = AllReduceExchange::new(&mut comm, &g, crate::exchange::BUCKET_BYTES);
                let mut gr = vec![0.5f32; x.layout().total];
                x.exchange(&mut gr, &mut [], StopWish::Continue).unwrap();
                x.stats()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    // A ring all-reduce sends 2 (W-1)/W of the buffer: the adapters' 4-byte gradients, not the base's.
    assert!(stats.iter().all(|s| s.bytes_sent == 4 * layout.total as u64), "{stats:?}");
    // The base holds about 27,000 weights here: the adapters are under a twentieth of them.
    let base_total = Layout::of(&base).total;
    assert!(layout.total * 20 < base_total, "{} adapter weights against {base_total}", layout.total);
}
