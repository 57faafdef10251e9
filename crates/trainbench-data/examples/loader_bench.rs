//! trainbench's side of `scripts/loader_bench.sh`: images/s of the image-folder pipeline alone (decode,
//! random-resized crop to 224, flip, normalise; batch 32) with a given number of worker threads.
//!
//! `cargo run --release -p trainbench-data --example loader_bench -- DIR WORKERS [BATCHES]`
//! prints one line: `trainbench workers=N images_per_s=X` (timed from the first batch to the last, so thread
//! start-up is left out, as on the PyTorch side).

use std::sync::Arc;
use std::time::Instant;
use trainbench_data::{BatchSource, Format, Layout, Loader, LoaderConfig, OnError, ValueKind};

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, workers, rest @ ..] = args.as_slice() else {
        return Err("usage: loader_bench DIR WORKERS [BATCHES]".into());
    };
    let workers: usize = workers.parse().map_err(|e| format!("WORKERS: {e}"))?;
    let batches: usize = rest.first().map_or(Ok(40), |b| b.parse()).map_err(|e| format!("BATCHES: {e}"))?;
    let layout = Layout {
        input: 0,
        input_name: "image".into(),
        input_kind: ValueKind::Dense,
        input_shape: vec![3, 224, 224],
        labels: 1,
        label_name: "labels".into(),
        label_shape: vec![],
        classes: 1000,
    };
    let dataset =
        trainbench_data::open(Format::ImageFolder, std::path::Path::new(dir), &layout).map_err(|e| e.to_string())?;
    let config = LoaderConfig {
        batch_size: 32,
        world_size: 1,
        rank: 0,
        seed: 0,
        workers,
        prefetch: 2 * workers.max(1),
        on_error: OnError::Fail,
    };
    let mut loader = Loader::new(Arc::from(dataset), layout, config).map_err(|e| e.to_string())?;
    loader.next_batch().map_err(|e| e.to_string())?;
    let clock = Instant::now();
    for _ in 0..batches {
        loader.next_batch().map_err(|e| e.to_string())?;
    }
    let secs = clock.elapsed().as_secs_f64();
    println!("trainbench workers={workers} images_per_s={:.1}", (batches * 32) as f64 / secs);
    Ok(())
}
