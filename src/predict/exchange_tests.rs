//! The performance model's tests of the exchange a step pays: what the overlap leaves exposed, ZeRO-3's gathers
//! per micro-batch and its prefetch, and a CPU whose workers share memory.

use super::*;

#[test]
fn the_step_pays_the_exchange_the_engines_overlap_leaves_exposed() {
    // Two layers of 1000 x 1000: with one-tensor buckets the second layer's hides under the backward pass.
    let mut b = GraphBuilder::new("gemm2");
    let x = b.input("x", &[1000], InputKind::Dense).unwrap();
    let t = b.input("t", &[1000], InputKind::Dense).unwrap();
    let h = b.linear("fc0", x, 1000, false).unwrap();
    let y = b.linear("fc1", h, 1000, false).unwrap();
    b.loss("loss", LossKind::Mse, &[y, t]).unwrap();
    let g = b.finish(1, "samples").unwrap();
    let mut prof = profile();
    prof.network = Some(link(LinkKind::Ethernet, 2.5, 20.0));
    let at = |strategy: DataParallel, overlap: bool| {
        let mut s = setting(400, strategy, 4, 1, Interconnect::Ethernet);
        s.topology.overlap = overlap && strategy.can_overlap();
        predict(&g, &s, &prof).unwrap()
    };
    let (serial, overlapped) = (at(DataParallel::AllReduce, false), at(DataParallel::AllReduce, true));
    assert_eq!(serial.comm.exposed_s, serial.comm.time_s, "no overlap: all of it");
    assert_eq!(serial.comm.time_s, overlapped.comm.time_s, "the same collectives");
    // One bucket (the model is far below 25 MiB): the backward pass completes it last, nothing hides.
    assert!(close(overlapped.comm.exposed_s, overlapped.comm.time_s), "{:?}", overlapped.comm);
    // Buckets of one tensor each: what exceeds the backward pass, or at least the first layer's bucket.
    let mut s = setting(400, DataParallel::AllReduce, 4, 1, Interconnect::Ethernet);
    s.topology.bucket_bytes = 4;
    let small = predict(&g, &s, &prof).unwrap();
    let c = &small.comm;
    assert!(c.exposed_s < c.time_s && c.exposed_s >= (c.time_s - small.phases.backward_s).max(0.0), "{c:?}");
    assert!(close(small.phases.comm_s, c.exposed_s) && small.step_time_s < serial.step_time_s);
    // ZeRO-1/2 hide at most their reduce-scatter; ZeRO-3 nothing.
    let mut s = setting(400, DataParallel::Zero2, 4, 1, Interconnect::Ethernet);
    s.topology.bucket_bytes = 4;
    let z2 = predict(&g, &s, &prof).unwrap();
    assert!(z2.comm.exposed_s >= z2.comm.time_s / 2.0 && z2.comm.exposed_s < z2.comm.time_s, "{:?}", z2.comm);
    // ZeRO-3 of a model without blocks: one root unit, reduce-scattered and gathered at the step's end (what an
    // all-reduce moves), nothing to gather ahead.
    let z3 = at(DataParallel::Zero3, true);
    assert!(close(z3.comm.exposed_s, z3.comm.time_s) && close(z3.comm.time_s, serial.comm.time_s), "{:?}", z3.comm);
}

/// A 4-layer decoder of the zoo: a root unit and one unit per layer for ZeRO-3.
fn decoder() -> Graph {
    let spec = r#"{"layers": 4, "d_model": 64, "heads": 4, "vocab": 500, "seq_len": 32, "max_positions": 32}"#;
    trainbench_graph::zoo::build(&trainbench_graph::model::ModelSpec::Gpt(serde_json::from_str(spec).unwrap())).unwrap()
}

#[test]
fn zero_3_gathers_blocks_per_micro_batch_and_its_prefetch_hides_them_but_not_the_root() {
    let g = decoder();
    let mut prof = profile();
    prof.network = Some(link(LinkKind::Ethernet, 2.5, 20.0));
    let at = |overlap: bool, k: u32| {
        let mut s = setting(64, DataParallel::Zero3, 4, 1, Interconnect::Ethernet);
        s.topology.overlap = overlap;
        s.schedule = trainbench_graph::training::StepSchedule {
            checkpointing: trainbench_graph::training::Checkpointing::Full,
            grad_accumulation: k,
        };
        predict(&g, &s, &prof).unwrap()
    };
    let (serial, prefetched) = (at(false, 1), at(true, 1));
    let z = serial.comm.zero3.unwrap();
    // The units as the engine cuts them: the root (embeddings, final norm) and one per layer.
    let layout = trainbench_comm::Layout::of(&g);
    let units = trainbench_comm::sharded::units_by_block(&g, &layout, 4).unwrap();
    let root = 4.0 * units[0].len as f64;
    let s = 4.0 * layout.total as f64;
    let (w, alpha, bw) = (4.0, 20e-6, 2.5e9);
    assert!(close(serial.comm.bytes_per_worker, (w - 1.0) / w * (3.0 * (s - root) + 2.0 * root)), "{:?}", serial.comm);
    assert!(close(z.blocks_s, 4.0 * (w - 1.0) * alpha + (w - 1.0) / w * (s - root) / bw), "{z:?}");
    assert!(close(z.root_s, 2.0 * (w - 1.0) * alpha + 2.0 * (w - 1.0) / w * root / bw), "{z:?}");
    assert!(close(serial.comm.time_s, 3.0 * z.blocks_s + z.root_s));
    assert_eq!(serial.comm.exposed_s, serial.comm.time_s, "no overlap: all of it");
    // Prefetch: the same collectives; what exceeds the computation waits, never less than the root's and
    // one block's gather in the forward pass and one block's collective in the backward.
    let c = &prefetched.comm;
    assert_eq!(c.time_s, serial.comm.time_s);
    assert!(c.exposed_s < c.time_s, "{c:?}");
    assert!(c.exposed_s >= z.root_s + 2.0 * z.largest_block_s - 1e-12, "{c:?} {z:?}");
    let compute = prefetched.phases.forward_s + prefetched.phases.backward_s;
    assert!(c.exposed_s >= c.time_s - compute - 1e-12);
    // Two micro-batches gather and reduce-scatter the blocks twice, the root once.
    let two = at(false, 2);
    assert!(close(two.comm.time_s, 6.0 * z.blocks_s + z.root_s), "{:?}", two.comm);
}

#[test]
fn on_a_cpu_whose_workers_share_memory_the_overlap_hides_nothing() {
    let g = decoder();
    let mut cpu = profile();
    cpu.device.kind = DeviceKind::Cpu;
    cpu.intra_node = Some(link(LinkKind::SharedMemory, 1.0, 5.0));
    let mut gpu = profile();
    gpu.intra_node = Some(link(LinkKind::Pcie, 1.0, 5.0));
    for strategy in [DataParallel::AllReduce, DataParallel::Zero2, DataParallel::Zero3] {
        let mut s = setting(64, strategy, 1, 2, Interconnect::Pcie);
        s.topology.bucket_bytes = 4096;
        s.schedule.checkpointing = trainbench_graph::training::Checkpointing::Full;
        let (on_cpu, on_gpu) = (predict(&g, &s, &cpu).unwrap(), predict(&g, &s, &gpu).unwrap());
        assert_eq!(on_cpu.comm.exposed_s, on_cpu.comm.time_s, "{strategy:?}: {:?}", on_cpu.comm);
        assert!(on_gpu.comm.exposed_s < on_gpu.comm.time_s, "{strategy:?}: {:?}", on_gpu.comm);
    }
}
