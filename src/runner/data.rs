//! The input pipeline of a run that reads a local dataset: the dataset opened and a [`Loader`] built for the
//! run's batch, seed and rank; its throughput measured alone before the run; and the result's `data` section.
//!
//! Process warm-up (`warmup.rs`) keeps synthetic data: it pays the backend's one-time costs, which do not
//! depend on where batches come from, and the loader's threads belong to each run.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use trainbench_contract::RunPlan;
use trainbench_data::{BatchSource, DataError, Dataset, EvalSet, Layout, Loader, LoaderConfig, OnError, split};
use trainbench_graph::Graph;

use crate::result::{DataSummary, LoaderThroughput};
use crate::spec::ValidatedSpec;
use crate::spec::rules::reader_format;
use crate::spec::wire::{DataFormat, OnDataError};

/// A spec's local dataset, resolved: what a worker process needs to open it too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocalData {
    /// Format.
    pub format: DataFormat,
    /// The dataset's folder, resolved against the spec's folder.
    pub root: PathBuf,
    /// Reading threads.
    pub workers: u32,
    /// Batches held ahead of training (0 without threads).
    pub prefetch: u32,
    /// What an unreadable sample does.
    pub on_error: OnDataError,
    /// The evaluation split of a run with a target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval: Option<EvalSplit>,
}

/// Where a run with a target finds its evaluation split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvalSplit {
    /// A dataset of the same format in this folder (`dataset.eval_path`, resolved).
    Path(PathBuf),
    /// The last fraction of the training dataset's samples, held out of training (`dataset.eval_fraction`).
    Fraction(f64),
}

/// Batch size the evaluation split is read in (its last batch smaller): large enough that evaluation is a
/// few forward passes, small enough to fit wherever a training batch of the model fits.
fn eval_batch(plan: &RunPlan) -> usize {
    plan.batch_size.max(1)
}

/// Time the loader is measured alone for before each run (at least [`MEASURE_MIN_BATCHES`] are pulled).
pub const MEASURE_TIME: Duration = Duration::from_secs(1);
/// Fewest batches pulled when the loader is measured alone.
pub const MEASURE_MIN_BATCHES: u64 = 3;
/// Most batches pulled when the loader is measured alone.
pub const MEASURE_MAX_BATCHES: u64 = 200;

impl LocalData {
    /// The local dataset of `spec`; `None` for synthetic data.
    pub fn of(spec: &ValidatedSpec) -> Option<Self> {
        let d = &spec.spec().dataset;
        let workers = d.workers.unwrap_or(0);
        Some(LocalData {
            format: d.format?,
            root: spec.dataset_root()?,
            workers,
            prefetch: if workers == 0 { 0 } else { d.prefetch.unwrap_or(2 * workers) },
            on_error: d.on_error.unwrap_or_default(),
            eval: match (spec.eval_root(), d.eval_fraction) {
                (Some(p), _) => Some(EvalSplit::Path(p)),
                (None, Some(f)) => Some(EvalSplit::Fraction(f)),
                (None, None) => None,
            },
        })
    }

    /// Open the dataset for `graph` (files listed, headers checked), to build loaders from: the folder's
    /// samples, less the held-out part when the evaluation split is a fraction of them.
    pub fn open(&self, graph: &Graph) -> Result<Arc<dyn Dataset>, DataError> {
        let err = |reason: String| DataError { file: self.root.display().to_string(), reason };
        let layout = Layout::of(graph).map_err(|e| err(e.to_string()))?;
        let dataset: Arc<dyn Dataset> =
            Arc::from(trainbench_data::open(reader_format(self.format), &self.root, &layout)?);
        match &self.eval {
            Some(EvalSplit::Fraction(f)) => {
                let (train, _) = split::hold_out(dataset, *f).map_err(|e| err(e.to_string()))?;
                Ok(Arc::new(train))
            }
            _ => Ok(dataset),
        }
    }

    /// The evaluation split of a run with a target, read whole; `None` without one.
    pub fn eval_set(&self, plan: &RunPlan, graph: &Graph) -> Result<Option<EvalSet>, DataError> {
        let err = |reason: String| DataError { file: self.root.display().to_string(), reason };
        let layout = Layout::of(graph).map_err(|e| err(e.to_string()))?;
        let batch = eval_batch(plan);
        match &self.eval {
            None => Ok(None),
            Some(EvalSplit::Path(path)) => {
                let dataset = trainbench_data::open(reader_format(self.format), path, &layout)?;
                let origin = path.display().to_string();
                split::read_eval(dataset.as_ref(), &layout, batch, plan.seed, &origin).map(Some)
            }
            Some(EvalSplit::Fraction(f)) => {
                let dataset: Arc<dyn Dataset> =
                    Arc::from(trainbench_data::open(reader_format(self.format), &self.root, &layout)?);
                let (_, held) = split::hold_out(dataset, *f).map_err(|e| err(e.to_string()))?;
                let origin = format!("{} (held out: {f})", self.root.display());
                split::read_eval(&held, &layout, batch, plan.seed, &origin).map(Some)
            }
        }
    }

    /// A fresh loader of `dataset` (opened by [`Self::open`]) for `plan` on `graph`, as data-parallel rank
    /// `rank` of `plan.topology.data_parallel()` (the ranks of a tensor group read the same batches).
    pub fn loader(
        &self,
        dataset: Arc<dyn Dataset>,
        plan: &RunPlan,
        graph: &Graph,
        rank: usize,
    ) -> Result<Loader, DataError> {
        let err = |reason: String| DataError { file: self.root.display().to_string(), reason };
        let layout = Layout::of(graph).map_err(|e| err(e.to_string()))?;
        let config = LoaderConfig {
            batch_size: plan.batch_size,
            world_size: plan.topology.data_parallel().max(1),
            rank,
            seed: plan.seed,
            workers: self.workers as usize,
            prefetch: self.prefetch as usize,
            on_error: match self.on_error {
                OnDataError::Fail => OnError::Fail,
                OnDataError::Skip => OnError::Skip,
            },
        };
        Loader::new(dataset, layout, config).map_err(|e| err(e.to_string()))
    }

    /// Pull batches from a fresh loader of `dataset` with no training (for [`MEASURE_TIME`], between
    /// [`MEASURE_MIN_BATCHES`] and [`MEASURE_MAX_BATCHES`] batches) and time them from the loader's start.
    pub fn measure(
        &self,
        dataset: Arc<dyn Dataset>,
        plan: &RunPlan,
        graph: &Graph,
    ) -> Result<LoaderThroughput, DataError> {
        let clock = Instant::now();
        let mut loader = self.loader(dataset, plan, graph, 0)?;
        let per_batch = (plan.batch_size / plan.topology.data_parallel().max(1)) as u64;
        let mut batches = 0u64;
        while batches < MEASURE_MIN_BATCHES || (batches < MEASURE_MAX_BATCHES && clock.elapsed() < MEASURE_TIME) {
            loader.next_batch()?;
            batches += 1;
        }
        let seconds = clock.elapsed().as_secs_f64();
        let samples = batches * per_batch;
        Ok(LoaderThroughput { batches, samples, seconds, samples_per_s: samples as f64 / seconds.max(1e-9) })
    }

    /// The result's `data` section for a run that read through `loader`, measured alone as `throughput`.
    pub fn summary(&self, loader: &Loader, throughput: Option<LoaderThroughput>) -> DataSummary {
        let shape = loader.epoch_shape();
        DataSummary {
            format: self.format.as_str().to_string(),
            path: self.root.display().to_string(),
            description: loader.dataset_info().description,
            samples: shape.samples as u64,
            samples_per_epoch: shape.samples_per_epoch as u64,
            batches_per_epoch: shape.batches_per_epoch as u64,
            dropped_per_epoch: shape.dropped_per_epoch as u64,
            workers: self.workers,
            prefetch: self.prefetch,
            on_error: match self.on_error {
                OnDataError::Fail => "fail",
                OnDataError::Skip => "skip",
            }
            .to_string(),
            skipped: loader.stats().skipped,
            loader: throughput,
        }
    }
}
