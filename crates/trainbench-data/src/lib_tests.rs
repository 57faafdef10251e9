//! Tests of the input pipeline on an in-memory dataset: epochs, shuffling, sharding, workers, skipping.

use std::sync::Arc;

use super::loader::{EpochShape, epoch_order};
use super::*;
use trainbench_graph::init::{HostTensor, SeededRng};

/// Sample `i` holds `[i, i + 0.5]` and label `i % 10`, plus a value from its augmentation generator; samples
/// listed in `bad` cannot be read.
struct Counting {
    n: usize,
    bad: Vec<usize>,
}

impl Dataset for Counting {
    fn len(&self) -> usize {
        self.n
    }
    fn read(&self, index: usize, rng: &mut SeededRng, out: SampleOut<'_>) -> Result<(), DataError> {
        if self.bad.contains(&index) {
            return Err(DataError { file: format!("sample-{index}.bin"), reason: "corrupt".into() });
        }
        let InputOut::Dense(v) = out.input else { panic!("dense") };
        v.copy_from_slice(&[index as f32, index as f32 + 0.5, rng.uniform()]);
        out.labels[0] = (index % 10) as i64;
        Ok(())
    }
    fn info(&self) -> DatasetInfo {
        DatasetInfo { samples: self.n, description: "counting".into() }
    }
}

fn layout() -> Layout {
    Layout {
        input: 0,
        input_name: "x".into(),
        input_kind: ValueKind::Dense,
        input_shape: vec![3],
        labels: 1,
        label_name: "y".into(),
        label_shape: vec![],
        classes: 10,
    }
}

fn config(batch: usize, world: usize, rank: usize, workers: usize) -> LoaderConfig {
    LoaderConfig {
        batch_size: batch,
        world_size: world,
        rank,
        seed: 7,
        workers,
        prefetch: 2 * workers,
        on_error: OnError::Fail,
    }
}

fn loader(n: usize, bad: &[usize], config: LoaderConfig) -> Loader {
    Loader::new(Arc::new(Counting { n, bad: bad.to_vec() }), layout(), config).unwrap_or_else(|e| panic!("{e}"))
}

/// The sample ids of a batch (its first input value per sample).
fn ids(b: &HostBatch) -> Vec<usize> {
    let HostTensor::Dense(v) = &b.inputs[0].1 else { panic!("dense") };
    v.chunks(3).map(|s| s[0] as usize).collect()
}

fn pull(l: &mut Loader, batches: usize) -> Vec<HostBatch> {
    (0..batches).map(|_| l.next_batch().unwrap_or_else(|e| panic!("{e}"))).collect()
}

#[test]
fn an_epoch_visits_each_sample_once_and_drops_the_last_partial_batch() {
    let shape = EpochShape::new(100, 16).unwrap();
    assert_eq!((shape.batches_per_epoch, shape.samples_per_epoch, shape.dropped_per_epoch), (6, 96, 4));
    let mut l = loader(100, &[], config(16, 1, 0, 0));
    let epoch0: Vec<usize> = pull(&mut l, 6).iter().flat_map(ids).collect();
    let mut sorted = epoch0.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 96, "96 distinct samples in epoch 0");
    let order: Vec<usize> = epoch_order(100, 7, 0).iter().map(|&i| i as usize).collect();
    assert_eq!(epoch0, order[..96], "batches follow the epoch's order");
    let epoch1: Vec<usize> = pull(&mut l, 6).iter().flat_map(ids).collect();
    assert_ne!(epoch0, epoch1, "each epoch is reshuffled");
    assert_eq!(l.stats().batches, 12);
}

#[test]
fn labels_and_values_travel_with_their_sample() {
    let mut l = loader(50, &[], config(10, 1, 0, 0));
    let b = l.next_batch().unwrap();
    assert_eq!(b.inputs[0].0, 0);
    assert_eq!(b.inputs[1].0, 1);
    let HostTensor::Dense(v) = &b.inputs[0].1 else { panic!("dense") };
    let HostTensor::Ids(y) = &b.inputs[1].1 else { panic!("ids") };
    assert_eq!((v.len(), y.len()), (30, 10));
    for (s, label) in v.chunks(3).zip(y) {
        assert_eq!(s[1], s[0] + 0.5);
        assert_eq!(*label, (s[0] as i64) % 10);
    }
}

#[test]
fn batches_do_not_depend_on_the_number_of_workers() {
    let reference = pull(&mut loader(100, &[], config(8, 1, 0, 0)), 30);
    for workers in [1, 2, 4] {
        assert_eq!(pull(&mut loader(100, &[], config(8, 1, 0, workers)), 30), reference, "{workers} workers");
    }
    let other_seed = pull(&mut loader(100, &[], LoaderConfig { seed: 8, ..config(8, 1, 0, 0) }), 30);
    assert_ne!(other_seed, reference);
}

#[test]
fn ranks_together_see_exactly_the_global_batch() {
    let single: Vec<usize> = pull(&mut loader(64, &[], config(16, 1, 0, 0)), 8).iter().flat_map(ids).collect();
    let shards: Vec<Vec<HostBatch>> = (0..4).map(|r| pull(&mut loader(64, &[], config(16, 4, r, 2)), 8)).collect();
    let mut joined = Vec::new();
    for k in 0..8 {
        for shard in &shards {
            assert_eq!(ids(&shard[k]).len(), 4);
            joined.extend(ids(&shard[k]));
        }
    }
    assert_eq!(joined, single);
    assert!(Loader::new(Arc::new(Counting { n: 64, bad: vec![] }), layout(), config(10, 4, 0, 0)).is_err());
}

#[test]
fn a_dataset_smaller_than_one_batch_is_refused() {
    let e =
        Loader::new(Arc::new(Counting { n: 5, bad: vec![] }), layout(), config(8, 1, 0, 0)).err().unwrap().to_string();
    assert!(e.contains("5 samples") && e.contains("batch of 8"), "{e}");
}

#[test]
fn an_unreadable_sample_fails_the_batch_or_is_skipped_and_counted() {
    let order = epoch_order(40, 7, 0);
    let bad = order[3] as usize;
    for workers in [0, 2] {
        let mut l = loader(40, &[bad], config(8, 1, 0, workers));
        let e = l.next_batch().unwrap_err();
        assert_eq!(e.file, format!("sample-{bad}.bin"));
        let mut l = loader(40, &[bad], LoaderConfig { on_error: OnError::Skip, ..config(8, 1, 0, workers) });
        let b = l.next_batch().unwrap();
        let got = ids(&b);
        assert!(!got.contains(&bad));
        assert_eq!(got[3], order[4] as usize, "the next sample of the order takes its place");
        assert_eq!(l.stats().skipped, 1);
    }
    let mut all_bad =
        loader(20, &(0..20).collect::<Vec<_>>(), LoaderConfig { on_error: OnError::Skip, ..config(4, 1, 0, 1) });
    assert!(all_bad.next_batch().unwrap_err().reason.contains("could not be read either"));
}
