//! The data of a run on synthetic clicks (`[dataset] source = "clicks"`): the clicks generated on the host from a
//! fixed seed (the same for every run, as a file on disk would be), the training samples cycled in order as
//! this rank's shard of every global batch, the last ones held out as the evaluation split of a run with a
//! target, and the result's `data` section.

use serde::{Deserialize, Serialize};
use trainbench_contract::RunPlan;
use trainbench_data::clicks::Clicks;
use trainbench_data::{DataError, EvalSet, MemorySource};
use trainbench_graph::Graph;

use crate::result::DataSummary;
use crate::spec::ValidatedSpec;
use crate::spec::rules::clicks::click_split;
use crate::spec::wire::DataSource;

/// The seed every run's clicks are drawn from.
pub const CLICKS_SEED: u64 = 41;

/// A spec's synthetic clicks: how many train and how many are held out.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClickData {
    /// Clicks trained on (samples `0..train`).
    pub train: u64,
    /// Clicks held out after them as the evaluation split (0 without one).
    pub held: u64,
}

impl ClickData {
    /// The clicks of `spec`; `None` for other sources.
    pub fn of(spec: &ValidatedSpec) -> Option<Self> {
        let d = &spec.spec().dataset;
        if d.source != DataSource::Clicks {
            return None;
        }
        let (train, held) = click_split(d);
        Some(ClickData { train, held })
    }

    /// This rank's training batches for `plan` (one epoch, cycled) and the evaluation split of a run with a
    /// target.
    pub fn open(
        &self,
        plan: &RunPlan,
        graph: &Graph,
        rank: usize,
    ) -> Result<(MemorySource, Option<EvalSet>), DataError> {
        let clicks =
            Clicks::new(graph, CLICKS_SEED).map_err(|e| DataError { file: "clicks".into(), reason: e.to_string() })?;
        let world = plan.topology.data_parallel().max(1);
        let train = clicks.shard(self.train, plan.batch_size, world, rank);
        if train.is_empty() {
            return Err(DataError {
                file: "clicks".into(),
                reason: format!("{} clicks to train on are fewer than one batch of {}", self.train, plan.batch_size),
            });
        }
        let eval = (plan.target.is_some() && self.held > 0).then(|| EvalSet {
            batches: clicks.batches(self.train..self.train + self.held, plan.batch_size.max(1)),
            origin: format!("clicks {}..{} (held out)", self.train, self.train + self.held),
        });
        Ok((MemorySource::new(train), eval))
    }

    /// The result's `data` section of a run on these clicks with global batch `batch`.
    pub fn summary(&self, batch: usize) -> DataSummary {
        let batches = self.train / batch.max(1) as u64;
        let visited = batches * batch.max(1) as u64;
        DataSummary {
            format: "clicks".into(),
            path: format!("generated (seed {CLICKS_SEED})"),
            description: format!(
                "{} synthetic clicks with a learnable signal, {} held out for evaluation",
                self.train + self.held,
                self.held
            ),
            samples: self.train,
            samples_per_epoch: visited,
            batches_per_epoch: batches,
            dropped_per_epoch: self.train - visited,
            workers: 0,
            prefetch: 0,
            on_error: "fail".into(),
            skipped: 0,
            loader: None,
        }
    }
}
