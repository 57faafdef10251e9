//! The digits dataset committed under `datasets/digits/` (scikit-learn's handwritten digits converted by
//! `scripts/make_digits.py`) and the spec that trains an MLP on it to a held-out accuracy target,
//! `specs/real/digits_mlp.toml`: the files have the documented shapes, types and label range; the spec trains to
//! its target on every backend built in (tch on the CPU, wgpu on the best adapter: lavapipe in CI).
#![allow(clippy::unwrap_used)]

use std::path::Path;

use trainbench_data::npy::{Dtype, NpyArray};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_committed_digits_have_their_documented_shapes_and_labels() {
    for (split, samples) in [("train", 1437usize), ("test", 360)] {
        let dir = root().join("datasets/digits").join(split);
        let inputs = NpyArray::open(&dir.join("inputs.npy")).unwrap();
        let labels = NpyArray::open(&dir.join("labels.npy")).unwrap();
        assert_eq!((inputs.dtype, inputs.shape.clone()), (Dtype::F32, vec![samples, 64]), "{split} inputs");
        assert_eq!((labels.dtype, labels.shape.clone()), (Dtype::I64, vec![samples]), "{split} labels");
        let mut counts = [0usize; 10];
        let mut row = vec![0f32; 64];
        let mut label = [0i64; 1];
        for i in 0..samples {
            labels.read_i64(i, &mut label).unwrap();
            assert!((0..10).contains(&label[0]), "{split} sample {i}: label {}", label[0]);
            counts[label[0] as usize] += 1;
            inputs.read_f32(i, &mut row).unwrap();
            assert!(row.iter().all(|v| (0.0..=1.0).contains(v)), "{split} sample {i}: a pixel outside [0, 1]");
        }
        // Every digit is present in both splits (the split is a seeded permutation, not sorted by class).
        assert!(counts.iter().all(|&c| c >= samples / 20), "{split}: {counts:?}");
    }
}

#[cfg(any(feature = "tch", feature = "wgpu"))]
mod trained {
    use trainbench::plan::PlacementOverride;
    use trainbench::result::RunOutcome;
    use trainbench::runner::{RunnerOptions, Suite, run_suite};
    use trainbench::spec::diagnostics::render_text;
    use trainbench::spec::wire::BackendChoice;
    use trainbench::spec::{Overrides, SpecValidator};
    use trainbench_contract::DeviceSelector;

    use super::root;

    /// Train the digits spec on `backend` and `device`; the run reaches 95% held-out accuracy within its
    /// 40-epoch budget, and records the curve and the time, steps and epochs to the target.
    fn trains_to_target(backend: BackendChoice, device: DeviceSelector) {
        let path = root().join("specs/real/digits_mlp.toml");
        let checked = SpecValidator::new().unwrap().check_file(&path, "digits_mlp.toml", &Overrides::none());
        let spec = checked.into_result().map_err(|d| render_text(&d)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let opts = RunnerOptions { out_dir: dir.path().to_path_buf(), no_collectors: true, ..Default::default() };
        let suite = Suite::placed(&spec, PlacementOverride { backend: Some(backend), device: Some(device) });
        crate::common::link_backends();
        let report = run_suite(&suite, &opts, &mut |_, _| {}).unwrap();
        let result = &report.results[0];
        assert_eq!(result.outcome, RunOutcome::Completed, "{:?}", result.outcome);
        let m = result.metrics.as_ref().unwrap();
        let t = m.time_to_target.as_ref().unwrap();
        let curve: Vec<(f64, Option<f64>)> = t.curve.iter().map(|p| (p.epoch, p.accuracy)).collect();
        eprintln!(
            "{backend:?}: reached {} in {:?} s, {:?} epochs, {:?} steps; curve {curve:?}",
            t.reached, t.time_to_target_s, t.epochs_to_target, t.steps_to_target
        );
        assert!(t.reached, "{backend:?}: 95% not reached in 40 epochs: {curve:?}");
        assert_eq!(t.eval_samples, 360);
        assert!(t.curve.last().and_then(|p| p.accuracy).is_some_and(|a| a >= 0.95));
        assert_eq!(t.epochs_to_target, Some(t.curve.len() as f64), "evaluated every epoch, stopped at the target");
        assert_eq!(t.steps_to_target, Some(44 * t.curve.len() as u64), "44 full batches of 32 per epoch");
        assert!(t.time_to_target_s.is_some_and(|s| s > 0.0 && s >= t.train_s));
        // Real data, not synthetic: the loader read the npy files, whose last partial batch is dropped.
        let data = result.data.as_ref().unwrap();
        assert_eq!((data.samples, data.batches_per_epoch, data.dropped_per_epoch), (1437, 44, 29));
    }

    #[cfg(feature = "tch")]
    #[test]
    fn digits_mlp_reaches_its_target_on_tch() {
        trains_to_target(BackendChoice::Tch, DeviceSelector::Cpu);
    }

    #[cfg(feature = "wgpu")]
    #[test]
    fn digits_mlp_reaches_its_target_on_wgpu() {
        use trainbench_contract::WgpuAdapter;
        if trainbench_backend_wgpu::adapters().is_empty() {
            trainbench_contract::conformance::prerequisite_missing(
                "wgpu found no adapter (install mesa-vulkan-drivers for lavapipe)",
            );
            return;
        }
        trains_to_target(BackendChoice::Wgpu, DeviceSelector::Wgpu(WgpuAdapter::Default));
    }
}
