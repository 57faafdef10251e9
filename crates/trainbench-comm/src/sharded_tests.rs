//! ZeRO on the in-process engine: every stage trains what one worker on the mean gradient trains, every worker
//! ends with bit-identical weights, the units cover every tensor once, and the bytes counted are the formulas'.
#![allow(clippy::unwrap_used)]

use super::exchange::{GradientExchange, StopWish};
use super::layout::Layout;
use super::local::ThreadComm;
use super::optim::HostOptimizer;
use super::sharded::{ShardedExchange, units_by_block, units_by_size};
use super::{DataParallel, ExchangeStats};
use trainbench_graph::graph::Graph;
use trainbench_graph::init::initial_values;
use trainbench_graph::model::{MlpSpec, ModelSpec};
use trainbench_graph::training::OptimizerSpec;
use trainbench_graph::zoo::build;

fn mlp() -> Graph {
    build(&ModelSpec::Mlp(MlpSpec { inputs: 7, hidden: vec![5, 3], classes: 3 })).unwrap()
}

/// A two-layer decoder with tied embeddings: a root unit and one unit per layer.
fn gpt() -> Graph {
    let spec = r#"{"layers": 2, "d_model": 16, "heads": 2, "vocab": 37, "seq_len": 8, "max_positions": 8}"#;
    build(&ModelSpec::Gpt(serde_json::from_str(spec).unwrap())).unwrap()
}

fn adam() -> OptimizerSpec {
    OptimizerSpec::Adamw { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.1 }
}

fn grad(layout: &Layout, w: usize, step: u64) -> Vec<f32> {
    (0..layout.total).map(|i| ((i * 7 + w * 13 + step as usize * 3) % 11) as f32 * 0.1 - 0.5).collect()
}

fn initial(layout: &Layout) -> Vec<f32> {
    layout.decls.iter().flat_map(|d| initial_values(d, 5)).collect()
}

/// One worker's optimizer on the mean of `workers` gradients.
fn reference(graph: &Graph, workers: usize, steps: u64) -> Vec<f32> {
    let layout = Layout::of(graph);
    let mut w = initial(&layout);
    let mut opt = HostOptimizer::new(&adam());
    for step in 0..steps {
        let all: Vec<Vec<f32>> = (0..workers).map(|k| grad(&layout, k, step)).collect();
        let mean: Vec<f32> =
            (0..layout.total).map(|i| all.iter().map(|g| g[i]).sum::<f32>() / workers as f32).collect();
        opt.step(&mut w, &mean);
    }
    w
}

/// `steps` steps of `strategy` on `workers` threads; each worker's weights and stats. Stage 3 goes unit by
/// unit as a backend does: every unit gathered for the forward, block units again for the backward.
fn run(
    graph: &Graph,
    strategy: DataParallel,
    workers: usize,
    steps: u64,
    bucket: u64,
) -> Vec<(Vec<f32>, ExchangeStats)> {
    let handles: Vec<_> = ThreadComm::group(workers)
        .into_iter()
        .map(|mut comm| {
            let g = graph.clone();
            std::thread::spawn(move || {
                let mut x = ShardedExchange::new(&mut comm, &g, strategy, &adam(), bucket).unwrap();
                let layout = x.layout().clone();
                let mut w = initial(&layout);
                for step in 0..steps {
                    let mut gr = grad(&layout, x.worker(), step);
                    let wish = if step + 1 == steps { StopWish::Finished } else { StopWish::Continue };
                    let r = if strategy == DataParallel::Zero3 {
                        let s = x.sharded().unwrap();
                        if !s.initialised() {
                            s.init(&w);
                        }
                        let units = s.units().to_vec();
                        let mut buf = Vec::new();
                        for (u, unit) in units.iter().enumerate() {
                            buf.resize(unit.len, 0.0);
                            s.gather(u, &mut buf).unwrap();
                            if unit.graph_block.is_some() {
                                s.gather(u, &mut buf).unwrap();
                            }
                            unit.unpack(&layout, &buf, &mut w);
                            unit.pack(&layout, &gr, &mut buf);
                            s.reduce(u, &buf).unwrap();
                        }
                        s.step(wish).unwrap()
                    } else {
                        x.exchange(&mut gr, &mut w, wish).unwrap()
                    };
                    assert!(r.weights_updated && r.stop == (step + 1 == steps) && !r.interrupted);
                }
                if strategy == DataParallel::Zero3 {
                    // The weights after the last step, gathered as a backend gathers them to report them.
                    let s = x.sharded().unwrap();
                    let units = s.units().to_vec();
                    for (u, unit) in units.iter().enumerate() {
                        let mut buf = vec![0.0; unit.len];
                        s.gather_final(u, &mut buf).unwrap();
                        unit.unpack(&layout, &buf, &mut w);
                    }
                }
                (w, x.stats())
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn every_stage_trains_what_one_worker_trains_on_the_mean_gradient() {
    for (graph, strategy) in [(mlp(), DataParallel::Zero1), (mlp(), DataParallel::Zero2), (gpt(), DataParallel::Zero3)]
    {
        for workers in [2, 3, 4] {
            // 64-byte buckets: several units, most of them padded.
            let out = run(&graph, strategy, workers, 3, 64);
            assert!(out.iter().all(|(w, _)| w == &out[0].0), "{strategy:?} x{workers}: bit-identical weights");
            let want = reference(&graph, workers, 3);
            let worst = want.iter().zip(&out[0].0).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert!(worst < 1e-6, "{strategy:?} x{workers}: {worst}");
        }
    }
}

#[test]
fn units_cover_every_tensor_once_and_blocks_get_their_own() {
    let g = gpt();
    let layout = Layout::of(&g);
    let units = units_by_block(&g, &layout, 3).unwrap();
    assert_eq!(units.len(), 1 + g.blocks.len(), "root, then one unit per layer");
    assert_eq!(units[0].name, "root");
    let mut seen: Vec<usize> = units.iter().flat_map(|u| u.tensors.clone()).collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..layout.decls.len()).collect::<Vec<_>>());
    assert!(units.iter().all(|u| u.block * 3 >= u.len && u.block * 3 < u.len + 3), "padding below one per rank");
    let by_size = units_by_size(&layout, 4 * 100, 2);
    assert!(by_size.iter().all(|u| u.len <= 100 || u.tensors.len() == 1), "buckets within the cap, or one tensor");
    assert_eq!(by_size.iter().map(|u| u.len).sum::<usize>(), layout.total);
}

#[test]
fn bytes_per_step_and_kind_are_the_ring_formulas() {
    let (steps, workers) = (2u64, 4usize);
    let w = workers as u64;
    for (graph, strategy) in [(mlp(), DataParallel::Zero1), (mlp(), DataParallel::Zero2), (gpt(), DataParallel::Zero3)]
    {
        let layout = Layout::of(&graph);
        let units = match strategy {
            DataParallel::Zero3 => units_by_block(&graph, &layout, workers).unwrap(),
            _ => units_by_size(&layout, 64, workers),
        };
        let padded: u64 = units.iter().map(|u| 4 * u.padded(workers) as u64).sum();
        let blocks: u64 = units.iter().filter(|u| u.graph_block.is_some()).map(|u| 4 * u.padded(workers) as u64).sum();
        let stats = run(&graph, strategy, workers, steps, 64)[0].1;
        let share = |bytes: u64| (w - 1) * bytes / w;
        assert_eq!(stats.reduce_scatter_bytes, steps * share(padded), "{strategy:?}: (W-1)/W x S reduce-scattered");
        // Stages 1-2 gather once per step: with the reduce-scatter, what a ring all-reduce moves. Stage 3 gathers
        // block units twice (forward and backward), the root unit once (it stays gathered through the step);
        // the final gather for the report is not a step's.
        let gathers = match strategy {
            DataParallel::Zero3 => steps * share(padded + blocks),
            _ => steps * share(padded),
        };
        assert_eq!(stats.all_gather_bytes, gathers, "{strategy:?}");
        assert_eq!(stats.bytes_sent, stats.reduce_scatter_bytes + stats.all_gather_bytes);
        if strategy != DataParallel::Zero3 {
            assert_eq!(stats.bytes_sent / steps, ExchangeStats::ring_bytes_per_step(padded, workers));
        }
    }
}

/// `steps` overlapped steps: each worker hands its buckets over in reverse (the order they arrive in does not
/// matter: they are exchanged in bucket order), then finishes; every worker's weights.
fn run_overlapped(graph: &Graph, strategy: DataParallel, workers: usize, steps: u64) -> Vec<Vec<f32>> {
    use super::all_reduce::AllReduceExchange;
    use super::exchange::Overlapped;
    use super::overlap::exchange_during;
    let handles: Vec<_> = ThreadComm::group(workers)
        .into_iter()
        .map(|mut comm| {
            let g = graph.clone();
            std::thread::spawn(move || {
                let mut opt = HostOptimizer::new(&adam());
                let mut x: Box<dyn GradientExchange> = match strategy {
                    DataParallel::AllReduce => Box::new(AllReduceExchange::new(&mut comm, &g, 64)),
                    s => Box::new(ShardedExchange::new(&mut comm, &g, s, &adam(), 64).unwrap()),
                };
                let layout = x.layout().clone();
                let mut w = initial(&layout);
                if let Some(s) = x.sharded() {
                    s.init(&w);
                }
                for step in 0..steps {
                    let worker = x.worker();
                    let o: &mut dyn Overlapped = x.overlapped().unwrap();
                    let buckets = o.buckets().to_vec();
                    assert!(buckets.len() > 2, "several buckets");
                    let gr = grad(&layout, worker, step);
                    exchange_during(o, &mut |feed| {
                        for (b, unit) in buckets.iter().enumerate().rev() {
                            let mut values = vec![0.0; unit.len];
                            unit.pack(&layout, &gr, &mut values);
                            feed.send(b, values)?;
                        }
                        Ok(())
                    })
                    .unwrap();
                    let mut mean = Vec::new();
                    let r = o.finish(&mut mean, &mut w, StopWish::Continue).unwrap();
                    if !r.weights_updated {
                        opt.step(&mut w, &mean);
                    }
                }
                w
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn overlapped_buckets_exchange_what_the_exchange_after_backward_does() {
    for strategy in [DataParallel::AllReduce, DataParallel::Zero1, DataParallel::Zero2] {
        let out = run_overlapped(&mlp(), strategy, 3, 3);
        assert!(out.iter().all(|w| w == &out[0]), "{strategy:?}: bit-identical weights");
        let want = reference(&mlp(), 3, 3);
        let worst = want.iter().zip(&out[0]).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst < 1e-6, "{strategy:?}: {worst}");
    }
}

/// `steps` stage-3 steps through the communication thread, as the tch backend's prefetch runs them: the forward
/// gathers each unit and asks for the next one first; the backward takes the block units last first, asking for
/// the one below, and hands each block's gradients over; the root unit's go at the step's end. A worker
/// given `slow` sleeps between blocks, so the workers' timing differs.
fn run_prefetched(graph: &Graph, workers: usize, steps: u64, slow: usize) -> Vec<(Vec<f32>, ExchangeStats)> {
    use super::prefetch::with_unit_queue;
    let handles: Vec<_> = ThreadComm::group(workers)
        .into_iter()
        .map(|mut comm| {
            let g = graph.clone();
            std::thread::spawn(move || {
                let mut x = ShardedExchange::new(&mut comm, &g, DataParallel::Zero3, &adam(), 0).unwrap();
                let layout = x.layout().clone();
                let worker = x.worker();
                let mut w = initial(&layout);
                let s = x.sharded().unwrap();
                s.init(&w);
                let units = s.units().to_vec();
                let blocks: Vec<usize> = (0..units.len()).filter(|&u| units[u].graph_block.is_some()).collect();
                let nap = || {
                    if worker == slow {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                };
                let mut spare = Vec::new();
                for step in 0..steps {
                    let gr = grad(&layout, worker, step);
                    let (forward, ran) = with_unit_queue(s, &mut spare, |q| -> Result<(), super::CommError> {
                        for (i, &u) in blocks.iter().enumerate() {
                            let values = q.take(u)?;
                            if let Some(&next) = blocks.get(i + 1) {
                                q.prefetch(next)?;
                            }
                            nap();
                            units[u].unpack(&layout, &values, &mut w);
                            q.recycle(values);
                        }
                        Ok(())
                    });
                    forward.unwrap();
                    ran.unwrap();
                    let (backward, ran) = with_unit_queue(s, &mut spare, |q| -> Result<(), super::CommError> {
                        q.prefetch(*blocks.last().unwrap())?;
                        for (i, &u) in blocks.iter().enumerate().rev() {
                            let values = q.take(u)?;
                            if i > 0 {
                                q.prefetch(blocks[i - 1])?;
                            }
                            assert_eq!(values.len(), units[u].len);
                            q.recycle(values);
                            nap();
                            let mut grads = q.gradient_buffer(u);
                            units[u].pack(&layout, &gr, &mut grads);
                            q.reduce(u, grads)?;
                        }
                        Ok(())
                    });
                    backward.unwrap();
                    ran.unwrap();
                    let mut buf = vec![0.0; units[0].len];
                    units[0].pack(&layout, &gr, &mut buf);
                    s.reduce(0, &buf).unwrap();
                    let wish = if step + 1 == steps { StopWish::Finished } else { StopWish::Continue };
                    s.step(wish).unwrap();
                    s.gather(0, &mut buf).unwrap();
                    units[0].unpack(&layout, &buf, &mut w);
                    s.count_prefetched_step();
                }
                for &u in &blocks {
                    let mut buf = vec![0.0; units[u].len];
                    s.gather_final(u, &mut buf).unwrap();
                    units[u].unpack(&layout, &buf, &mut w);
                }
                assert!(spare.len() >= 2, "buffers kept for the next step: {}", spare.len());
                (w, x.stats())
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn prefetched_stage_3_trains_and_moves_what_the_unit_by_unit_calls_do() {
    let g = gpt();
    for workers in [2, 3] {
        for slow in [0, 1] {
            let out = run_prefetched(&g, workers, 3, slow);
            assert!(out.iter().all(|(w, _)| w == &out[0].0), "x{workers}: bit-identical weights");
            let want = reference(&g, workers, 3);
            let worst = want.iter().zip(&out[0].0).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert!(worst < 1e-6, "x{workers}: {worst}");
            let (prefetched, direct) = (out[0].1, run(&g, DataParallel::Zero3, workers, 3, 0)[0].1);
            assert_eq!(prefetched.all_gather_bytes, direct.all_gather_bytes);
            assert_eq!(prefetched.reduce_scatter_bytes, direct.reduce_scatter_bytes);
            assert_eq!(prefetched.overlapped_steps, 3);
        }
    }
}

/// Each worker's squares of its shard of the mean gradient, per tensor weighted, summed over the workers, are
/// the weighted squares of the whole mean gradient: every value counted once, the padding never.
#[test]
fn the_shards_squares_sum_to_the_mean_gradients_squares_tensor_by_tensor() {
    for (graph, strategy) in [(mlp(), DataParallel::Zero1), (gpt(), DataParallel::Zero2)] {
        let workers = 3;
        let layout = Layout::of(&graph);
        // Tensor `i` weighs `i + 1`: a value counted in the wrong tensor changes the sum.
        let weight = |i: usize| (i + 1) as f64;
        let handles: Vec<_> = ThreadComm::group(workers)
            .into_iter()
            .map(|mut comm| {
                let g = graph.clone();
                std::thread::spawn(move || {
                    let mut x = ShardedExchange::new(&mut comm, &g, strategy, &adam(), 64).unwrap();
                    let mut w = initial(x.layout());
                    let mut gr = grad(x.layout(), x.worker(), 1);
                    x.exchange(&mut gr, &mut w, StopWish::Finished).unwrap();
                    x.sharded().unwrap().gradient_squares(&weight)
                })
            })
            .collect();
        let sum: f64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        let all: Vec<Vec<f32>> = (0..workers).map(|k| grad(&layout, k, 1)).collect();
        let mean = |i: usize| f64::from(all.iter().map(|g| g[i]).sum::<f32>() / workers as f32);
        let want: f64 = (0..layout.decls.len())
            .map(|t| {
                let (o, n) = (layout.offsets[t], layout.len_of(t));
                weight(t) * (o..o + n).map(|i| mean(i) * mean(i)).sum::<f64>()
            })
            .sum();
        // The mean is rounded to f32 in another order than the reference's: agreement to f32 precision.
        assert!((sum - want).abs() <= 1e-6 * want, "{strategy:?}: {sum} against {want}");
    }
}
