//! Tests of metric derivation on hand-made measurements.
#![allow(clippy::unwrap_used)]

use trainbench_contract::MemoryMeasured;
use trainbench_contract::steplog::{StepLog, WarmupSteps};
use trainbench_graph::OptimizerSpec;

use super::*;
use crate::result::MemoryEstimate;

fn plan() -> RunPlan {
    RunPlan {
        config: "m.b4.fp32.1x1".into(),
        warmup: 2,
        seed: 1,
        optimizer: OptimizerSpec::default(),
        ..RunPlan::for_tests("m.b4.fp32.1x1.r0", 20)
    }
}

fn step(total: f64) -> PhaseTimes {
    PhaseTimes {
        data_s: 0.1 * total,
        stall_s: 0.04 * total,
        copy_s: 0.06 * total,
        forward_s: 0.3 * total,
        backward_s: 0.4 * total,
        comm_s: 0.0,
        optimizer_s: 0.1 * total,
        total_s: total,
    }
}

fn raw() -> RawMeasurements {
    // 10 transient iterations at 2 s, then 20 steady ones at 0.5 s.
    let mut steps: Vec<PhaseTimes> = (0..10).map(|_| step(2.0)).collect();
    steps.extend((0..20).map(|_| step(0.5)));
    RawMeasurements {
        warmup_steps: WarmupSteps { count: 2, first: Some(step(3.0)), last: Some(step(3.0)) },
        steps: StepLog::of(steps.into_iter().enumerate().map(|(i, p)| (p, Some(2.0 - i as f64 * 0.01)))),
        memory: MemoryMeasured {
            weights: 100,
            gradients: 100,
            optimizer_state: 100,
            peak_allocated: Some(1000),
            reserved: Some(2000),
            activations: Some(500),
        },
        ..RawMeasurements::default()
    }
}

fn analysis() -> AnalysisSummary {
    AnalysisSummary {
        parameters: 25,
        trainable_parameters: None,
        active_parameters: None,
        buffers: 0,
        forward_flops_per_sample: 1000,
        backward_flops_per_sample: 2000,
        train_flops_per_sample: 3000,
        model_flops: Some(trainbench_graph::analysis::ModelFlops {
            per_sample: 2400,
            per_token: Some(300),
            convention: "test convention".into(),
        }),
        hardware_flops_per_sample: None,
        memory: MemoryEstimate {
            weights_bytes: 100,
            gradients_bytes: 100,
            optimizer_state_bytes: 100,
            activations_bytes: 500,
            workspace_bytes: 50,
            total_bytes: 850,
        },
        notes: vec![],
        pipeline_stages: Vec::new(),
    }
}

fn input<'a>(
    plan: &'a RunPlan,
    raw: &'a RawMeasurements,
    a: &'a AnalysisSummary,
    c: &'a CollectorReport,
) -> DeriveInput<'a> {
    DeriveInput {
        plan,
        raw,
        items_per_sample: 8,
        item_unit: "tokens",
        analysis: Some(a),
        peak: Some(Peak { flop_per_s: 240.0, precision: peak::PeakPrecision::Fp32, source: "test".into() }),
        collectors: c,
        window: (0.0, 1.0),
        cpu_absent: "collectors disabled",
        gpu_absent: "the run used the CPU",
    }
}

#[test]
fn steady_state_is_cut_and_throughput_follows() {
    let (p, r, a, c) = (plan(), raw(), analysis(), CollectorReport::default());
    let m = derive(&input(&p, &r, &a, &c)).unwrap();
    assert_eq!(m.steady_state.start_index, 10);
    assert_eq!(m.steady_state.warmup_iterations, 2);
    assert_eq!(m.step_times_s.len(), 30);
    assert_eq!(m.step_time.n, 20);
    assert_eq!(m.step_time.median_s, 0.5);
    assert_eq!(m.step_time.median_ci95_s, [0.5, 0.5]);
    // 4 samples per 0.5 s
    assert_eq!(m.throughput.samples_per_s, 8.0);
    assert_eq!(m.throughput.items_per_s, 64.0);
    // 3000 FLOPs per sample x 8 samples/s = 24000 FLOP/s
    assert_eq!(m.flops.achieved_flop_per_s, Some(24000.0));
    assert_eq!(m.flops.fraction, Some(100.0));
}

#[test]
fn phases_memory_and_loss() {
    let (p, r, a, c) = (plan(), raw(), analysis(), CollectorReport::default());
    let m = derive(&input(&p, &r, &a, &c)).unwrap();
    assert!((m.phases.forward.share - 0.3).abs() < 1e-12);
    // The data phase splits into the wait for the batch (stall) and its copy; the stall share is its own.
    assert!((m.phases.data_stall.share - 0.04).abs() < 1e-12);
    assert!((m.phases.data_copy.share - 0.06).abs() < 1e-12);
    assert!((m.phases.data_stall.mean_s + m.phases.data_copy.mean_s - m.phases.data.mean_s).abs() < 1e-12);
    assert!((m.phases.other.share - 0.1).abs() < 1e-12);
    assert!((m.phases.backward.mean_s - 0.2).abs() < 1e-12);
    assert_eq!(m.memory.measured.activations_and_workspace_bytes, Some(700));
    assert_eq!(m.memory.estimate.as_ref().unwrap().total_bytes, 850);
    let loss = m.loss.unwrap();
    assert_eq!(loss.first, Some(2.0));
    assert!((loss.last.unwrap() - 1.71).abs() < 1e-12);
    assert!(loss.all_finite);
    assert_eq!(m.gpu, Sampled::unavailable("the run used the CPU"));
    assert_eq!(m.cpu, Sampled::unavailable("collectors disabled"));
}

#[test]
fn nothing_measured_gives_no_metrics() {
    let (p, a, c) = (plan(), analysis(), CollectorReport::default());
    let r = RawMeasurements::default();
    assert!(derive(&input(&p, &r, &a, &c)).is_none());
}

#[test]
fn gpu_samples_give_utilisation_and_energy_per_sample() {
    let (p, r, a) = (plan(), raw(), analysis());
    let g = |t: f64, e: u64| nvml::GpuSample {
        t,
        util_gpu: Some(50),
        power_mw: Some(100_000),
        energy_mj: Some(e),
        ..Default::default()
    };
    // 100 J per second from the counter = 100 W; 8 samples/s -> 12.5 J per sample.
    let c = CollectorReport {
        cpu: None,
        gpu: Some(Ok((0, vec![g(0.0, 0), g(0.5, 50_000), g(1.0, 100_000)]))),
        gpu_scope: None,
    };
    let m = derive(&input(&p, &r, &a, &c)).unwrap();
    let pw = m.power.get().unwrap();
    assert_eq!((pw.mean_power_w, pw.energy_j, pw.energy_per_sample_j), (100.0, 100.0, 12.5));
    assert_eq!(m.gpu.get().unwrap().utilization_mean_percent, 50.0);
}

#[test]
fn a_mig_instance_marks_the_gpu_figures_gpu_wide() {
    let (p, r, a) = (plan(), raw(), analysis());
    let g = |t: f64, e: u64| nvml::GpuSample { t, power_mw: Some(100_000), energy_mj: Some(e), ..Default::default() };
    let c = CollectorReport {
        cpu: None,
        gpu: Some(Ok((0, vec![g(0.0, 0), g(1.0, 100_000)]))),
        gpu_scope: Some(nvml::MIG_SCOPE.into()),
    };
    let m = derive(&input(&p, &r, &a, &c)).unwrap();
    assert_eq!(m.power.get().unwrap().scope.as_deref(), Some(nvml::MIG_SCOPE));
    // NVML has no utilisation for a MIG-enabled GPU: that figure is unavailable, not borrowed.
    assert!(m.gpu.get().is_none());
}

/// The memory figures of a run: weights, gradients and state 100 bytes each, allocator peak 1000.
fn with_memory(activations: Option<u64>) -> RawMeasurements {
    let mut r = raw();
    r.memory.activations = activations;
    r
}

#[test]
fn the_breakdown_splits_the_peak_from_measured_activations() {
    let (p, a, c) = (plan(), analysis(), CollectorReport::default());
    // Activations measured around the forward pass: workspace is the rest of the peak, and the parts sum to it.
    let r = with_memory(Some(500));
    let mem = derive(&input(&p, &r, &a, &c)).unwrap().memory;
    assert_eq!(mem.measured.activations_bytes, Some(500));
    assert_eq!(mem.measured.workspace_bytes, Some(200));
    assert_eq!(mem.measured.breakdown_to_peak, Some(1.0));
    assert_eq!(mem.measured.activations_and_workspace_bytes, Some(700));
    // The analysis estimates 850 bytes against a peak of 1000: 15% low.
    assert!((mem.estimate_error.unwrap() + 0.15).abs() < 1e-12);
    // Activations and gradients that never coexist: the parts exceed the peak, workspace is 0 and the ratio says
    // by how much.
    let r = with_memory(Some(800));
    let mem = derive(&input(&p, &r, &a, &c)).unwrap().memory;
    assert_eq!(mem.measured.workspace_bytes, Some(0));
    assert!((mem.measured.breakdown_to_peak.unwrap() - 1.1).abs() < 1e-12);
    // Without a measured activation figure (the CPU) only the older derivation is there.
    let r = with_memory(None);
    let mem = derive(&input(&p, &r, &a, &c)).unwrap().memory;
    assert_eq!((mem.measured.workspace_bytes, mem.measured.breakdown_to_peak), (None, None));
    assert_eq!(mem.measured.activations_and_workspace_bytes, Some(700));
}

#[test]
fn the_free_running_window_is_reported_beside_the_per_step_figure() {
    let (p, a, c) = (plan(), analysis(), CollectorReport::default());
    let mut r = raw();
    assert!(derive(&input(&p, &r, &a, &c)).unwrap().throughput.free_running.is_none());
    // 20 steps of batch 4 in 8 s: 10 samples/s against the per-step 8 samples/s.
    r.free_running = Some(trainbench_contract::FreeRunning { steps: 20, seconds: 8.0 });
    let t = derive(&input(&p, &r, &a, &c)).unwrap().throughput;
    assert_eq!(t.samples_per_s, 8.0);
    let fr = t.free_running.unwrap();
    assert_eq!((fr.steps, fr.samples_per_s, fr.ratio_to_per_step), (20, 10.0, 1.25));
    // A window that measured nothing is left out.
    r.free_running = Some(trainbench_contract::FreeRunning { steps: 0, seconds: 0.0 });
    assert!(derive(&input(&p, &r, &a, &c)).unwrap().throughput.free_running.is_none());
}

#[test]
fn the_tf32_switches_are_recorded_with_the_flops() {
    let (p, a, c) = (plan(), analysis(), CollectorReport::default());
    let mut r = raw();
    r.tf32 = Some(trainbench_contract::Tf32::default());
    assert_eq!(derive(&input(&p, &r, &a, &c)).unwrap().flops.tf32, Some(trainbench_contract::Tf32::default()));
}

#[test]
fn an_accumulated_step_counts_every_micro_batch() {
    let (a, c) = (analysis(), CollectorReport::default());
    let schedule = trainbench_graph::training::StepSchedule { grad_accumulation: 4, ..Default::default() };
    let p = RunPlan { schedule, ..plan() };
    let mut r = raw();
    r.free_running = Some(trainbench_contract::FreeRunning { steps: 20, seconds: 8.0 });
    let m = derive(&input(&p, &r, &a, &c)).unwrap();
    // 4 micro-batches of 4 samples (8 tokens each) per 0.5 s step.
    assert_eq!(m.step_time.median_s, 0.5);
    assert_eq!(m.throughput.samples_per_s, 32.0);
    assert_eq!(m.throughput.items_per_s, 256.0);
    assert_eq!(m.throughput.free_running.unwrap().samples_per_s, 40.0);
    assert_eq!(m.flops.achieved_flop_per_s, Some(96000.0));
}

/// The MFU figures of a derivation, which must be available.
fn mfu_of(m: &Metrics) -> &crate::result::ModelFlopUtilization {
    m.flops.mfu.as_ref().and_then(|x| x.get()).unwrap()
}

#[test]
fn mfu_divides_model_flops_by_the_peak_it_records() {
    let (p, r, a, c) = (plan(), raw(), analysis(), CollectorReport::default());
    let m = derive(&input(&p, &r, &a, &c)).unwrap();
    // 2400 model FLOPs per sample x 8 samples/s = 19200 FLOP/s over 240 FLOP/s.
    let mfu = mfu_of(&m);
    assert_eq!((mfu.achieved_flop_per_s, mfu.mfu), (19200.0, 80.0));
    assert_eq!(mfu.convention, "test convention");
    assert_eq!((mfu.peak.flop_per_s, mfu.peak.devices, mfu.peak.precision.as_str()), (240.0, 1, "fp32"));
    assert_eq!(mfu.peak.source, "test");
    assert_eq!(m.flops.peak_precision.as_deref(), Some("fp32"));
    // No checkpointing: no HFU.
    assert!(mfu.hfu.is_none());
    // Tokens per device equal the global figure on one device.
    assert_eq!(m.throughput.items_per_s_per_device, Some(64.0));
}

#[test]
fn hfu_counts_the_recomputation_over_the_same_peak() {
    let (mut p, r, mut a, c) = (plan(), raw(), analysis(), CollectorReport::default());
    p.schedule.checkpointing = trainbench_graph::training::Checkpointing::Full;
    a.hardware_flops_per_sample = Some(3900);
    let m = derive(&input(&p, &r, &a, &c)).unwrap();
    let hfu = mfu_of(&m).hfu.as_ref().unwrap();
    assert_eq!((hfu.hardware_flops_per_sample, hfu.recomputed_flops_per_sample), (3900, 900));
    assert_eq!((hfu.achieved_flop_per_s, hfu.hfu, hfu.checkpointing.as_str()), (31200.0, 130.0, "full"));
}

#[test]
fn a_data_parallel_run_divides_by_the_sum_of_its_ranks_peaks() {
    // The same global rate on one process and over two ranks: the two ranks have twice the peak, so half the
    // utilisation (a global rate over one rank's peak read 32.2% where one process read 12.6%).
    let (p, r, a, c) = (plan(), raw(), analysis(), CollectorReport::default());
    let one = derive(&input(&p, &r, &a, &c)).unwrap();
    let mut p2 = plan();
    p2.topology = trainbench_comm::Topology::on_one_node(trainbench_comm::DataParallel::AllReduce, 2);
    let two = derive(&input(&p2, &r, &a, &c)).unwrap();
    assert_eq!(two.throughput.samples_per_s, one.throughput.samples_per_s);
    assert_eq!(two.flops.achieved_flop_per_s, one.flops.achieved_flop_per_s);
    assert_eq!(two.flops.peak_flop_per_s, Some(480.0));
    assert_eq!(two.flops.fraction, Some(50.0));
    assert_eq!(two.flops.peak_source.as_deref(), Some("test x 2 devices"));
    let mfu = mfu_of(&two);
    assert_eq!(
        (mfu.mfu, mfu.peak.flop_per_s, mfu.peak.per_device_flop_per_s, mfu.peak.devices),
        (40.0, 480.0, 240.0, 2)
    );
    // Tokens per device: the global 64 tokens/s over 2 ranks.
    assert_eq!(two.throughput.items_per_s, 64.0);
    assert_eq!(two.throughput.items_per_s_per_device, Some(32.0));
}

#[test]
fn a_tensor_parallel_run_counts_each_tokens_flops_once_for_the_mesh() {
    // Two ranks splitting every layer (TP=2) and two ranks each training half the batch (TP=1, DP=2) at the
    // same global rate: the same model FLOPs per second over the same two devices, the same MFU. A TP group
    // computes one replica: counting each rank's share as a whole model's would double it.
    let (r, a, c) = (raw(), analysis(), CollectorReport::default());
    let mut dp = plan();
    dp.topology = trainbench_comm::Topology::on_one_node(trainbench_comm::DataParallel::AllReduce, 2);
    let mut tp = dp.clone();
    tp.topology.mesh = trainbench_comm::Mesh { tensor_parallel: 2, ..trainbench_comm::Mesh::flat() };
    let (by_data, by_tensor) = (derive(&input(&dp, &r, &a, &c)).unwrap(), derive(&input(&tp, &r, &a, &c)).unwrap());
    assert_eq!(tp.topology.data_parallel(), 1);
    assert_eq!(by_tensor.throughput.items_per_s, by_data.throughput.items_per_s);
    let (m_tp, m_dp) = (mfu_of(&by_tensor), mfu_of(&by_data));
    assert_eq!((m_tp.mfu, m_tp.achieved_flop_per_s, m_tp.peak.devices), (m_dp.mfu, m_dp.achieved_flop_per_s, 2));
    assert_eq!(m_tp.mfu, 40.0);
}

#[test]
fn accumulated_micro_batches_count_in_the_throughput_and_the_utilisation() {
    let (mut p, r, a, c) = (plan(), raw(), analysis(), CollectorReport::default());
    p.schedule.grad_accumulation = 2;
    let m = derive(&input(&p, &r, &a, &c)).unwrap();
    // 2 micro-batches of 4 per 0.5 s step.
    assert_eq!(m.throughput.samples_per_s, 16.0);
    assert_eq!(mfu_of(&m).achieved_flop_per_s, 2400.0 * 16.0);
}

#[test]
fn mfu_is_unavailable_without_a_peak_of_the_runs_precision() {
    let (mut p, r, a, c) = (plan(), raw(), analysis(), CollectorReport::default());
    // A bf16 run with only an fp32 figure (a CPU's GEMM rate): the fp32 figure is no bf16 peak.
    p.precision = trainbench_graph::Precision::Bf16;
    let m = derive(&input(&p, &r, &a, &c)).unwrap();
    let Some(crate::result::Sampled::Unavailable { reason }) = &m.flops.mfu else { panic!("{:?}", m.flops.mfu) };
    assert!(reason.contains("no bf16 peak") && reason.contains("fp32"), "{reason}");
    // The training-FLOP fraction stays, marked with the precision of its peak.
    assert_eq!(m.flops.peak_precision.as_deref(), Some("fp32"));
    // No peak at all, or no analysis: unavailable with the reason, never a guess.
    let mut i = input(&p, &r, &a, &c);
    i.peak = None;
    let m = derive(&i).unwrap();
    assert!(matches!(&m.flops.mfu, Some(crate::result::Sampled::Unavailable { reason }) if reason.contains("no peak")));
    i.analysis = None;
    let m = derive(&i).unwrap();
    assert!(
        matches!(&m.flops.mfu, Some(crate::result::Sampled::Unavailable { reason }) if reason.contains("analysis"))
    );
}

#[test]
fn an_moe_models_mfu_never_exceeds_a_dense_models_of_the_same_active_size() {
    use trainbench_graph::model::{GptSpec, ModelSpec, MoeSpec};
    let base = r#""layers": 2, "d_model": 64, "heads": 4, "vocab": 100, "activation": "swiglu", "seq_len": 16,
        "bias": false"#;
    let gpt = |ffn: usize, moe: Option<MoeSpec>| {
        let mut s: GptSpec = serde_json::from_str(&format!(r#"{{{base}, "ffn": {ffn}}}"#)).unwrap();
        s.moe = moe;
        let graph = trainbench_graph::zoo::build(&ModelSpec::Gpt(s)).unwrap();
        (trainbench_graph::analysis::analyze(&graph), graph)
    };
    // Six experts of width 32, top-2: per token the router (6 x 64) and two experts, as many weights as a dense
    // feed-forward of width 66; all six experts would be a width of 192.
    let moe: MoeSpec = serde_json::from_str(r#"{"experts": 6, "top_k": 2, "expert_ffn": 32}"#).unwrap();
    let (sparse, dense, all_experts) = (gpt(66, Some(moe)), gpt(66, None), gpt(192, None));
    assert_eq!(sparse.0.active_parameters, dense.0.parameters);
    let (p, r, c) = (plan(), raw(), CollectorReport::default());
    let mfu = |(a, g): &(trainbench_graph::analysis::Analysis, trainbench_graph::Graph)| {
        let summary = crate::runner::plan_run::analysis_summary(a, g, &p);
        mfu_of(&derive(&input(&p, &r, &summary, &c)).unwrap()).mfu
    };
    // The same throughput: the MoE's MFU is the dense twin's, and far below one counting every expert.
    assert!(mfu(&sparse) <= mfu(&dense));
    assert!(mfu(&sparse) < 0.7 * mfu(&all_experts));
    let summary = crate::runner::plan_run::analysis_summary(&sparse.0, &sparse.1, &p);
    assert_eq!(summary.active_parameters, Some(sparse.0.active_parameters));
}
