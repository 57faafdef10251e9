//! The model's arithmetic on small hand-computed cases: one linear layer on a made-up device, the exchange
//! formulas, the calibrated curve and the direction of what-ifs.

use trainbench_graph::graph::{InputKind, LossKind};
use trainbench_graph::{GraphBuilder, OptimizerSpec, Precision};

use super::*;
use crate::hardware::wire::{
    Alternatives, Calibration, DeviceKind, DeviceProfile, KernelPoint, Link, LinkKind, PeakTflops, ProfileKind,
};
use crate::predict::price_classes::{ElementwiseClass, NodeClass, OptimizerKind};
use trainbench_comm::{DataParallel, Interconnect, Topology};

/// input [1000] -> linear 1000 -> 1000 (no bias) -> MSE against a dense target [1000].
fn gemm_graph() -> Graph {
    let mut b = GraphBuilder::new("gemm");
    let x = b.input("x", &[1000], InputKind::Dense).unwrap();
    let t = b.input("t", &[1000], InputKind::Dense).unwrap();
    let y = b.linear("fc", x, 1000, false).unwrap();
    b.loss("loss", LossKind::Mse, &[y, t]).unwrap();
    b.finish(1, "samples").unwrap()
}

fn link(kind: LinkKind, gbs: f64, latency_us: f64) -> Link {
    Link {
        kind,
        name: format!("{} {gbs}", kind.as_str()),
        generation: None,
        lanes: None,
        bandwidth_gbs: gbs,
        latency_us,
    }
}

/// 1 TFLOP/s, 1000 GB/s, PCIe 10 GB/s, NVLink 50 GB/s, network 2.5 GB/s (20 Gbit) with a 10 GB/s alternative.
fn profile() -> HardwareFile {
    HardwareFile {
        version: 1,
        kind: ProfileKind::Hardware,
        name: "made-up".into(),
        description: String::new(),
        device: DeviceProfile {
            name: "made-up GPU".into(),
            kind: DeviceKind::Gpu,
            peak_tflops: PeakTflops { fp32: 1.0, tf32: None, fp16: Some(4.0), bf16: None, fp8: None },
            memory_bandwidth_gbs: 1000.0,
            memory_gib: 16.0,
        },
        host_link: Some(link(LinkKind::Pcie, 10.0, 0.0)),
        intra_node: Some(link(LinkKind::Nvlink, 50.0, 0.0)),
        network: Some(link(LinkKind::Ethernet, 2.5, 0.0)),
        alternatives: Alternatives { network: vec![link(LinkKind::Ethernet, 10.0, 0.0)], ..Alternatives::default() },
        calibration: None,
        fitted: None,
    }
}

/// The profile as the loader hands it to the model: fitted once (`crate::hardware::load::with_fitted`).
fn fitted(prof: &HardwareFile) -> HardwareFile {
    crate::hardware::load::with_fitted(prof.clone())
}

/// [`super::predict`] on `prof` as loaded (fitted once).
fn predict(graph: &Graph, setting: &Setting, prof: &HardwareFile) -> Result<Prediction, PredictError> {
    super::predict(graph, setting, &fitted(prof))
}

fn setting(batch: usize, strategy: DataParallel, nodes: usize, per_node: usize, interconnect: Interconnect) -> Setting {
    Setting {
        batch,
        precision: Precision::Fp32,
        optimizer: OptimizerSpec::Sgd { lr: 0.1, momentum: 0.0, weight_decay: 0.0, nesterov: false },
        topology: Topology { nodes, devices_per_node: per_node, interconnect, ..Topology::on_one_node(strategy, 1) },
        schedule: Default::default(),
        numerics: Default::default(),
        pipeline_layers: Vec::new(),
        steps_run: None,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1e-12)
}

#[test]
fn one_linear_layer_is_compute_bound_at_the_peak() {
    let p = predict(&gemm_graph(), &setting(100, DataParallel::Single, 1, 1, Interconnect::Pcie), &profile()).unwrap();
    let fc = p.layers.iter().find(|l| l.name == "fc").unwrap();
    // 2 x 100 x 1000 x 1000 FLOPs at 1e12 FLOP/s.
    assert!(close(fc.forward.flops, 2e8) && close(fc.forward.compute_s, 2e-4), "{fc:?}");
    // Input 100 x 1000 x 4 B + output as much + 1e6 fp32 weights, at 1e12 B/s.
    assert!(close(fc.forward.bytes, 4.8e6) && close(fc.forward.memory_s, 4.8e-6));
    assert_eq!(fc.forward.bound, Bound::Compute);
    assert!(close(fc.forward.time_s, 2e-4));
    // The input is data: only the weight gradient, 1 x forward.
    assert!(close(fc.backward.flops, 2e8) && close(fc.backward.time_s, 2e-4));
    // Data: two dense inputs of 1000 f32 per sample, 100 samples over 10 GB/s.
    assert!(close(p.phases.data_s, 100.0 * 8000.0 / 1e10));
    // SGD without momentum: read parameter and gradient, write parameter: 12 bytes per parameter.
    assert!(close(p.phases.optimizer_s, 1.2e7 / 1e12));
    let loss = p.layers.iter().find(|l| l.name == "loss").unwrap();
    assert_eq!(loss.forward.bound, Bound::Memory);
    assert_eq!(p.comm.time_s, 0.0);
    let total = p.phases.data_s + p.phases.forward_s + p.phases.backward_s + p.phases.optimizer_s;
    assert!(close(p.step_time_s, total));
    assert!(close(p.shares.data + p.shares.compute + p.shares.comm, 1.0));
    assert!(close(p.samples_per_s, 100.0 / total));
    assert!(p.bound.compute_bound_s > p.bound.memory_bound_s);
}

#[test]
fn exchange_follows_the_ring_and_parameter_server_formulas() {
    let g = gemm_graph();
    let s = 1e6 * 4.0; // gradient bytes
    let mut prof = profile();
    prof.network = Some(link(LinkKind::Ethernet, 2.5, 20.0));
    let ring = predict(&g, &setting(400, DataParallel::AllReduce, 4, 1, Interconnect::Ethernet), &prof).unwrap();
    assert!(close(ring.comm.time_s, 2.0 * 3.0 * 20e-6 + 2.0 * 3.0 / 4.0 * s / 2.5e9), "{:?}", ring.comm);
    assert_eq!(ring.per_device_batch, 100);
    // One server: its link carries W x S each way; with 2 workers per machine each gets half the NIC.
    let ps =
        predict(&g, &setting(400, DataParallel::ParameterServer { servers: 1 }, 2, 2, Interconnect::Ethernet), &prof)
            .unwrap();
    let per_direction = 20e-6 + f64::max(s / (2.5e9 / 2.0), 4.0 * s / 2.5e9);
    assert!(close(ps.comm.time_s, 2.0 * per_direction), "{:?}", ps.comm);
    assert!(ps.shares.comm > ring.shares.comm);
    // Overlap hides the exchange under backward, never below the compute.
    assert!(ring.step_time_overlapped_s < ring.step_time_s);
    assert!(ring.step_time_overlapped_s >= ring.phases.forward_s + ring.phases.backward_s);
}

#[test]
fn a_missing_link_or_peak_is_refused() {
    let g = gemm_graph();
    let e =
        predict(&g, &setting(200, DataParallel::AllReduce, 2, 1, Interconnect::Infiniband), &profile()).unwrap_err();
    assert!(matches!(e, PredictError::NoLink { .. }), "{e}");
    let mut s = setting(100, DataParallel::Single, 1, 1, Interconnect::Pcie);
    s.precision = Precision::Bf16;
    assert!(matches!(predict(&g, &s, &profile()).unwrap_err(), PredictError::NoPeak { .. }));
    let e = predict(&g, &setting(10, DataParallel::AllReduce, 1, 3, Interconnect::Nvlink), &profile()).unwrap_err();
    assert_eq!(e, PredictError::Batch { batch: 10, world: 3 });
}

#[test]
fn calibration_replaces_the_peak_by_the_curve_and_adds_overhead() {
    let g = gemm_graph();
    let mut prof = profile();
    let point = |flops: f64, seconds: f64| KernelPoint {
        precision: Precision::Fp32,
        shape: String::new(),
        flops,
        seconds,
        source: None,
    };
    // 10 us overhead; net rates 1e11 at 1e6 FLOPs and 4e11 at 1e9 FLOPs.
    prof.calibration = Some(Calibration {
        method: "test".into(),
        measured_at: String::new(),
        backend: "mock".into(),
        device: "cpu".into(),
        op_overhead_us: 10.0,
        triad_gbs: 100.0,
        host_to_device_gbs: None,
        gemm: vec![point(1e6, 1e-5 + 1e-5), point(1e9, 1e9 / 4e11 + 1e-5)],
        conv: vec![],
        conv_backward: vec![],
        bandwidth: vec![],
        ..Default::default()
    });
    let p = predict(&g, &setting(100, DataParallel::Single, 1, 1, Interconnect::Pcie), &prof).unwrap();
    let fc = p.layers.iter().find(|l| l.name == "fc").unwrap();
    // 2e8 FLOPs lies at 2/3 of the way from 1e6 to 1e9 in log space: rate 1e11 x 4^(log(200)/log(1000)).
    let t = (200f64).ln() / (1000f64).ln();
    let rate = (1e11f64.ln() + t * (4e11f64.ln() - 1e11f64.ln())).exp();
    assert!(close(fc.forward.compute_s, 2e8 / rate), "{fc:?}");
    // One forward operation's overhead, and memory at the triad's 100 GB/s.
    assert!(close(fc.forward.overhead_s, 1e-5) && close(fc.forward.memory_s, 4.8e6 / 1e11));
    assert!(close(fc.backward.overhead_s, 3e-5));
    assert!(p.calibrated);
    assert!(rates::interpolate(&[(1.0, 2.0)], 5.0) == Some(2.0));
}

#[test]
fn memory_time_follows_the_bandwidth_of_the_working_set() {
    let g = gemm_graph();
    let mut prof = profile();
    let bw = |bytes: f64, gbs: f64, overhead_s: f64| crate::hardware::wire::BandwidthPoint {
        bytes,
        seconds: bytes / (gbs * 1e9) + overhead_s,
        source: None,
    };
    // 1 us overhead; a 1 MB working set at 400 GB/s (a cache), 100 MB at 10 GB/s (memory); each point's
    // call includes the overhead, which the model adds per operation on its own.
    prof.calibration = Some(Calibration {
        method: "test".into(),
        measured_at: String::new(),
        backend: "mock".into(),
        device: "cpu".into(),
        op_overhead_us: 1.0,
        triad_gbs: 10.0,
        host_to_device_gbs: None,
        gemm: vec![],
        conv: vec![],
        conv_backward: vec![],
        bandwidth: vec![bw(1e8, 10.0, 1e-6), bw(1e6, 400.0, 1e-6)],
        ..Default::default()
    });
    let dev = coefficients(&fitted(&prof), Precision::Fp32).unwrap();
    assert!(close(dev.memory_s(1e6), 1e6 / 400e9), "net of the overhead");
    assert!(close(dev.memory_s(1e3), 1e3 / 400e9), "flat below the smallest set");
    assert!(close(dev.memory_s(1e9), 1e9 / 10e9), "flat beyond the largest");
    // Halfway in log space: the geometric mean of the rates.
    assert!(close(dev.memory_s(1e7), 1e7 / (400e9f64 * 10e9).sqrt()));
    // The forward of `fc` moves 4.8 MB (inputs, weights, output): between the two points, well above 10 GB/s.
    let p = predict(&g, &setting(100, DataParallel::Single, 1, 1, Interconnect::Pcie), &prof).unwrap();
    let fc = p.layers.iter().find(|l| l.name == "fc").unwrap();
    assert!(close(fc.forward.memory_s, dev.memory_s(4.8e6)) && fc.forward.memory_s < 4.8e6 / 10e9 / 5.0);
    // Without points, every size moves at the triad.
    prof.calibration.as_mut().unwrap().bandwidth.clear();
    let flat = coefficients(&fitted(&prof), Precision::Fp32).unwrap();
    assert!(close(flat.memory_s(1e6), 1e6 / 10e9));
}

/// input [features] -> linear (no bias) -> dropout 0.1 -> MSE against a dense target.
fn dropout_graph(features: usize) -> Graph {
    let mut b = GraphBuilder::new("drop");
    let x = b.input("x", &[features], InputKind::Dense).unwrap();
    let t = b.input("t", &[features], InputKind::Dense).unwrap();
    let y = b.linear("fc", x, features, false).unwrap();
    let d = b.dropout("drop", y, 0.1).unwrap();
    b.loss("loss", LossKind::Mse, &[d, t]).unwrap();
    b.finish(1, "samples").unwrap()
}

#[test]
fn a_measured_element_wise_class_costs_its_per_element_work() {
    let g = dropout_graph(1000);
    let mut prof = profile();
    // 1 us overhead; dropout measured at 10 ns per element forward, 2 ns backward on 1e5 elements.
    prof.calibration = Some(Calibration {
        method: "test".into(),
        measured_at: String::new(),
        backend: "mock".into(),
        device: "cpu".into(),
        op_overhead_us: 1.0,
        triad_gbs: 1000.0,
        host_to_device_gbs: None,
        gemm: vec![],
        conv: vec![],
        conv_backward: vec![],
        bandwidth: vec![],
        elementwise: vec![crate::hardware::wire::ElementwisePoint {
            op: ElementwiseClass::Dropout,
            elements: 1e5,
            forward_s: 1e-3 + 1e-6,
            backward_s: 2e-4 + 1e-6,
            precision: None,
            attention_shape: None,
        }],
        ..Default::default()
    });
    let p = predict(&g, &setting(100, DataParallel::Single, 1, 1, Interconnect::Pcie), &prof).unwrap();
    let drop = p.layers.iter().find(|l| l.name == "drop").unwrap();
    // 100 samples x 1000 elements at 10 ns: 1 ms, above its bytes at 1000 GB/s: compute-bound.
    assert!(close(drop.forward.compute_s, 1e-3) && drop.forward.bound == Bound::Compute, "{drop:?}");
    assert!(close(drop.backward.compute_s, 2e-4) && drop.backward.bound == Bound::Compute, "{drop:?}");
    // A class that was not measured keeps bytes over bandwidth.
    prof.calibration.as_mut().unwrap().elementwise[0].op = ElementwiseClass::Softmax;
    let p = predict(&g, &setting(100, DataParallel::Single, 1, 1, Interconnect::Pcie), &prof).unwrap();
    let drop = p.layers.iter().find(|l| l.name == "drop").unwrap();
    assert_eq!((drop.forward.compute_s, drop.forward.bound), (0.0, Bound::Memory));
}

#[test]
fn element_wise_costs_follow_the_measured_sizes() {
    let g = dropout_graph(1000);
    let mut prof = profile();
    // 1 us per operation; dropout's net forward cost: 10 us at 1e3 elements (mostly fixed), 1 ms at 1e5, 20 ms at
    // 1e6 (past the caches); backward a tenth of it.
    let point = |elements: f64, net: f64| crate::hardware::wire::ElementwisePoint {
        op: ElementwiseClass::Dropout,
        elements,
        forward_s: net + 1e-6,
        backward_s: net / 10.0 + 1e-6,
        precision: None,
        attention_shape: None,
    };
    let mut cal = step_calibration();
    cal.node.clear();
    cal.gemm_shapes.clear();
    cal.op_overhead_us = 1.0;
    cal.elementwise = vec![point(1e6, 20e-3), point(1e3, 10e-6), point(1e5, 1e-3)];
    prof.calibration = Some(cal);
    let forward = |batch: usize| {
        let p = predict(&g, &setting(batch, DataParallel::Single, 1, 1, Interconnect::Pcie), &prof).unwrap();
        let drop = p.layers.iter().find(|l| l.name == "drop").unwrap().clone();
        (drop.forward.compute_s, drop.backward.compute_s)
    };
    // At a measured size, its cost; below the smallest, on the line through the two smallest; between two, on
    // the line between them; beyond the largest, at the largest's cost per element.
    assert!(close(forward(1).0, 10e-6) && close(forward(1).1, 1e-6), "{:?}", forward(1));
    let below = |n: f64| 10e-6 - (1e3 - n) * (1e-3 - 10e-6) / (1e5 - 1e3);
    let half = {
        let p =
            predict(&dropout_graph(500), &setting(1, DataParallel::Single, 1, 1, Interconnect::Pcie), &prof).unwrap();
        p.layers.iter().find(|l| l.name == "drop").unwrap().forward.compute_s
    };
    assert!(close(half, below(500.0).max(0.0)), "{half} {}", below(500.0));
    assert!(close(forward(100).0, 1e-3));
    let between = 10e-6 + (1e4 - 1e3) / (1e5 - 1e3) * (1e-3 - 10e-6);
    assert!(close(forward(10).0, between), "{} {between}", forward(10).0);
    assert!(close(forward(2000).0, 40e-3) && close(forward(2000).1, 4e-3));
}

#[test]
fn a_tensor_read_by_two_nodes_pays_for_its_gradient_sum() {
    let graph = |two_readers: bool| {
        let mut b = GraphBuilder::new("sum");
        let x = b.input("x", &[1000], InputKind::Dense).unwrap();
        let t = b.input("t", &[1000], InputKind::Dense).unwrap();
        let y = b.linear("fc", x, 1000, false).unwrap();
        let a = b.act("a", y, trainbench_graph::graph::Activation::Relu).unwrap();
        let c = if two_readers { y } else { b.act("c", a, trainbench_graph::graph::Activation::Relu).unwrap() };
        let s = b.add_nodes("sum", &[a, c]).unwrap();
        b.loss("loss", LossKind::Mse, &[s, t]).unwrap();
        b.finish(1, "samples").unwrap()
    };
    let s = setting(10, DataParallel::Single, 1, 1, Interconnect::Pcie);
    let fc = |g: &Graph| predict(g, &s, &profile()).unwrap().layers.into_iter().find(|l| l.name == "fc").unwrap();
    let (one, two) = (fc(&graph(false)), fc(&graph(true)));
    // `fc`'s output read by the ReLU and the add: one sum over 10 x 1000 fp32 elements (two reads, one write).
    assert!(close(two.backward.bytes - one.backward.bytes, 3.0 * 10.0 * 1000.0 * 4.0), "{one:?} {two:?}");
    assert_eq!(one.forward, two.forward);
}

#[test]
fn what_ifs_point_the_right_way_with_formula_magnitudes() {
    let g = gemm_graph();
    let prof = profile();
    let s = setting(800, DataParallel::ParameterServer { servers: 1 }, 8, 1, Interconnect::Ethernet);
    let base = predict(&g, &s, &prof).unwrap();
    let rows = whatif::what_if(&AnalyzedGraph::new(&g), &s, &fitted(&prof), &base, &[], &Terms::all());
    let find = |p: &str| rows.iter().find(|r| r.change.starts_with(p)).unwrap_or_else(|| panic!("{p}: {rows:?}"));
    // A 4x faster network divides T_comm by 4 (no latency), the rest unchanged.
    let net = find("network:");
    let expected = base.step_time_s / (base.step_time_s - base.phases.comm_s * 0.75);
    assert!(close(net.speedup.unwrap(), expected), "{net:?}");
    // All-reduce over NVLink in one machine is faster than PS on Ethernet.
    assert!(find("strategy: all-reduce over NVLink").speedup.unwrap() > 1.0);
    assert!(find("strategy: all-reduce on the same link").speedup.unwrap() > 1.0);
    // fp16 at 4x the peak speeds up compute only.
    let fp16 = find("precision: fp16");
    assert!(fp16.speedup.unwrap() > 1.0 && fp16.speedup.unwrap() < 4.0);
}

/// A calibration with only the training step's terms: per-node costs, an optimizer and a product grid.
fn step_calibration() -> Calibration {
    use crate::hardware::wire::{GemmShapePoint, NodePoint, OptimizerPoint};
    let node = |class: &str, f: f64, b: f64| NodePoint {
        class: NodeClass::parse(class).unwrap(),
        forward_s: f,
        backward_s: b,
    };
    // Rates: 1e10 FLOP/s for every product with m = 1, 1e11 with m = 1000 (k, n in {10, 1000}).
    let mut grid = Vec::new();
    for m in [1u64, 1000] {
        for k in [10u64, 1000] {
            for n in [10u64, 1000] {
                let rate = if m == 1 { 1e10 } else { 1e11 };
                grid.push(GemmShapePoint {
                    precision: Precision::Fp32,
                    m,
                    k,
                    n,
                    seconds: 2.0 * (m * k * n) as f64 / rate,
                });
            }
        }
    }
    let opt = |tensors: u64, parameters: u64| OptimizerPoint {
        kind: OptimizerKind::Sgd,
        tensors,
        parameters,
        seconds: tensors as f64 * 1e-6 + parameters as f64 * 1e-9,
    };
    Calibration {
        method: "test".into(),
        measured_at: String::new(),
        backend: "mock".into(),
        device: "cpu".into(),
        op_overhead_us: 0.0,
        triad_gbs: 1000.0,
        host_to_device_gbs: None,
        gemm: vec![],
        conv: vec![],
        conv_backward: vec![],
        bandwidth: vec![],
        elementwise: vec![],
        node: vec![node("elementwise", 2e-6, 3e-6), node("linear", 5e-6, 7e-6), node("step", 11e-6, 13e-6)],
        optimizer: vec![opt(64, 2304), opt(2, 1_000_000)],
        gemm_shapes: grid,
        ..Default::default()
    }
}

#[test]
fn the_training_step_calibration_prices_nodes_products_and_the_optimizer() {
    let g = gemm_graph();
    let mut prof = profile();
    prof.calibration = Some(step_calibration());
    let p = predict(&g, &setting(1, DataParallel::Single, 1, 1, Interconnect::Pcie), &prof).unwrap();
    let fc = p.layers.iter().find(|l| l.name == "fc").unwrap();
    // A linear layer's own fixed cost in each phase; the loss's 3 operations at the element-wise node's.
    assert!(close(fc.forward.overhead_s, 5e-6) && close(fc.backward.overhead_s, 7e-6), "{fc:?}");
    let loss = p.layers.iter().find(|l| l.name == "loss").unwrap();
    assert!(close(loss.forward.overhead_s, 3.0 * 2e-6) && close(loss.backward.overhead_s, 3.0 * 3e-6));
    let step = p.layers.iter().find(|l| l.name == "(step)").unwrap();
    assert!(close(step.forward.time_s, 11e-6) && close(step.backward.time_s, 13e-6));
    // Batch 1: one row against 1000 x 1000 at the grid's 1e10; backward only the weight gradient [1000 x 1] x
    // [1 x 1000], whose inner side is 1 but whose rows are 1000: 1e11.
    assert!(close(fc.forward.compute_s, 2e6 / 1e10), "{fc:?}");
    assert!(close(fc.backward.compute_s, 2e6 / 1e11), "{fc:?}");
    // Between the grid's rows, between its rates (log-log).
    let dev = coefficients(&fitted(&prof), Precision::Fp32).unwrap();
    let mid = 2.0 * 31.6227766 * 1000.0 * 1000.0 / dev.gemm_s(31.6227766, 1000.0, 1000.0);
    assert!((mid / (1e10f64 * 1e11).sqrt() - 1.0).abs() < 1e-6, "{mid}");
    // SGD over 1 tensor (no bias) of 1e6 parameters: 1 us + 1 ms, measured kind; Adam was not measured and
    // falls back to one pass over the bytes.
    assert!(close(p.phases.optimizer_s, 1e-6 + 1e6 * 1e-9), "{:?}", p.phases);
    let mut adam = setting(1, DataParallel::Single, 1, 1, Interconnect::Pcie);
    adam.optimizer = OptimizerSpec::Adam { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 };
    let q = predict(&g, &adam, &prof).unwrap();
    assert!(close(q.phases.optimizer_s, 1e6 * 4.0 * 7.0 / 1000e9), "{:?}", q.phases);
}

#[test]
fn a_convolution_follows_the_grid_by_its_channels_and_pixels_and_its_class_by_its_share() {
    use crate::hardware::wire::ConvShapePoint;
    let graph = |stride: usize| {
        let mut b = GraphBuilder::new("conv");
        let x = b.input("x", &[8, 16, 16], InputKind::Dense).unwrap();
        let y = b.conv("conv", x, trainbench_graph::builder::ConvCfg::square(8, 3, stride, 1)).unwrap();
        let t = b.input("t", &[8, 16 / stride, 16 / stride], InputKind::Dense).unwrap();
        b.loss("loss", LossKind::Mse, &[y, t]).unwrap();
        b.finish(1, "samples").unwrap()
    };
    let mut cal = step_calibration();
    // 8 channels: 1e10 FLOP/s forward and 5e9 backward; 64 channels 1e11 and 5e10 (pixels 256 and 4096 alike).
    // The 3 x 3 stride-2 class at half the forward rate and a quarter of the backward's.
    for (stride, forward_share, backward_share) in [(1, 1.0, 1.0), (2, 0.5, 0.25)] {
        for channels in [8u64, 64] {
            for pixels in [256u64, 4096] {
                let flops = 2.0 * (pixels * channels * channels * 9) as f64;
                let rate = if channels == 8 { 1e10 } else { 1e11 };
                cal.conv_shapes.push(ConvShapePoint {
                    precision: Precision::Fp32,
                    channels,
                    pixels,
                    batch: None,
                    kernel: 3,
                    stride,
                    transposed: false,
                    forward_s: flops / (rate * forward_share),
                    backward_s: 2.0 * flops / (rate / 2.0 * backward_share),
                });
            }
        }
    }
    let mut prof = profile();
    prof.calibration = Some(cal);
    let conv = |stride: usize, terms: Terms| {
        let p = super::predict_with(
            &graph(stride),
            &setting(4, DataParallel::Single, 1, 1, Interconnect::Pcie),
            &fitted(&prof),
            &terms,
        );
        p.unwrap().layers.into_iter().find(|l| l.name == "conv").unwrap()
    };
    // 8 in, 8 out, 4 x 16 x 16 = 1024 output pixels: the 8-channel rates.
    let plain = conv(1, Terms::all());
    assert!(close(plain.forward.compute_s, plain.forward.flops / 1e10), "{plain:?}");
    assert!(close(plain.backward.compute_s, plain.backward.flops / 5e9), "{plain:?}");
    // At stride 2 (4 x 8 x 8 = 256 output pixels), the class's share of the same rates; without the term, the
    // grid's.
    let strided = conv(2, Terms::all());
    assert!(close(strided.forward.compute_s, strided.forward.flops / 5e9), "{strided:?}");
    assert!(close(strided.backward.compute_s, strided.backward.flops / 1.25e9), "{strided:?}");
    let grid = conv(2, Terms::without(&[Term::ConvClasses]));
    assert!(close(grid.forward.compute_s, grid.forward.flops / 1e10), "{grid:?}");
}

#[test]
fn a_tied_weight_pays_for_its_gradient_product_and_sum() {
    // tokens -> embedding [1000 x 10] -> linear 10 -> 1000 sharing the embedding's weight -> MSE.
    let mut b = GraphBuilder::new("tied");
    let x = b.input("x", &[1], InputKind::Tokens { vocab: 1000 }).unwrap();
    let e = b.embedding("emb", x, 1000, 10).unwrap();
    let y = b.linear("proj", e, 1000, false).unwrap();
    b.tie(y, e).unwrap();
    let t = b.input("t", &[1, 1000], InputKind::Dense).unwrap();
    b.loss("loss", LossKind::Mse, &[y, t]).unwrap();
    let g = b.finish(1, "samples").unwrap();
    let mut prof = profile();
    prof.calibration = Some(step_calibration());
    let p = predict(&g, &setting(1, DataParallel::Single, 1, 1, Interconnect::Pcie), &prof).unwrap();
    let proj = p.layers.iter().find(|l| l.name == "proj").unwrap();
    let dev = coefficients(&fitted(&prof), Precision::Fp32).unwrap();
    // Backward: the weight's gradient [10 x 1] x [1 x 1000] beside the input's [1 x 1000] x [1000 x 10], though
    // the analysis counts the weight at the embedding.
    let products = dev.gemm_s(10.0, 1.0, 1000.0) + dev.gemm_s(1.0, 1000.0, 10.0);
    assert!(close(proj.backward.compute_s, products), "{proj:?}");
    // The layer's own fixed cost and one sum into the owner's gradient.
    assert!(close(proj.backward.overhead_s, 7e-6 + 3e-6), "{proj:?}");
    // The weight is read forward and its gradient written backward.
    assert!(proj.forward.bytes >= 10_000.0 * 4.0, "{proj:?}");
}

#[test]
fn the_first_node_of_each_kind_pays_its_cold_start_once_per_phase() {
    use crate::hardware::wire::NodePoint;
    // x [1000] -> linear 1000 -> relu -> relu -> MSE: 4 MB of weights, more than the flushing pass once the
    // optimizer's passes are counted.
    let mut b = GraphBuilder::new("first");
    let x = b.input("x", &[1000], InputKind::Dense).unwrap();
    let y = b.linear("fc", x, 1000, false).unwrap();
    let r1 = b.act("relu1", y, trainbench_graph::graph::Activation::Relu).unwrap();
    let r2 = b.act("relu2", r1, trainbench_graph::graph::Activation::Relu).unwrap();
    let t = b.input("t", &[1000], InputKind::Dense).unwrap();
    b.loss("loss", LossKind::Mse, &[r2, t]).unwrap();
    let g = b.finish(1, "samples").unwrap();
    let mut prof = profile();
    let run =
        |prof: &HardwareFile| predict(&g, &setting(1, DataParallel::Single, 1, 1, Interconnect::Pcie), prof).unwrap();
    prof.calibration = Some(step_calibration());
    let before = run(&prof);
    let first = |class: &str, f: f64, b: f64| NodePoint {
        class: NodeClass::parse(&format!("first-{class}")).unwrap(),
        forward_s: f,
        backward_s: b,
    };
    // The median over the measured classes: 20 us forward, 4 us backward.
    prof.calibration.as_mut().unwrap().node.extend([
        first("relu", 10e-6, 2e-6),
        first("softmax", 20e-6, 4e-6),
        first("gelu", 90e-6, 9e-6),
    ]);
    // What a layer's fixed costs gained over `before` (forward, backward).
    let gained = |after: &Prediction, name: &str| {
        let (a, b) = (
            after.layers.iter().find(|l| l.name == name).unwrap(),
            before.layers.iter().find(|l| l.name == name).unwrap(),
        );
        (a.forward.overhead_s - b.forward.overhead_s, a.backward.overhead_s - b.backward.overhead_s)
    };
    let after = run(&prof);
    let extra = |name: &str| gained(&after, name);
    // Forward in graph order: the linear layer, the first ReLU and the loss; backward in reverse: the loss, the
    // second ReLU and the linear layer. A ReLU pays its class's own; the others, without one, the median.
    let (fc, r1, r2, loss) = (extra("fc"), extra("relu1"), extra("relu2"), extra("loss"));
    assert!(close(fc.0, 20e-6) && close(fc.1, 4e-6), "{fc:?}");
    assert!(close(r1.0, 10e-6) && close(r1.1, 0.0), "{r1:?}");
    assert!(close(r2.0, 0.0) && close(r2.1, 2e-6), "{r2:?}");
    assert!(close(loss.0, 20e-6) && close(loss.1, 4e-6), "{loss:?}");
    // Measured stand-ins replace the median for the kinds without a class: a linear layer's for the linear
    // layer, an add's for the loss.
    prof.calibration.as_mut().unwrap().node.extend([first("linear", 30e-6, 6e-6), first("add", 5e-6, 1e-6)]);
    let stand_ins = run(&prof);
    let (fc, loss) = (gained(&stand_ins, "fc"), gained(&stand_ins, "loss"));
    assert!(close(fc.0, 30e-6) && close(fc.1, 6e-6), "{fc:?}");
    assert!(close(loss.0, 5e-6) && close(loss.1, 1e-6), "{loss:?}");
    // A step that moves little keeps its code warm: a 10-wide layer pays a sliver of it.
    let mut small = GraphBuilder::new("small");
    let x = small.input("x", &[10], InputKind::Dense).unwrap();
    let y = small.linear("fc", x, 10, false).unwrap();
    let t = small.input("t", &[10], InputKind::Dense).unwrap();
    small.loss("loss", LossKind::Mse, &[y, t]).unwrap();
    let small = small.finish(1, "samples").unwrap();
    let q = predict(&small, &setting(1, DataParallel::Single, 1, 1, Interconnect::Pcie), &prof).unwrap();
    let fc = q.layers.iter().find(|l| l.name == "fc").unwrap();
    assert!(fc.forward.overhead_s < 5e-6 + 0.01 * 30e-6, "{fc:?}");
}

#[path = "exchange_tests.rs"]
mod exchange;
