//! Time-to-accuracy: what a run with a target trains towards ([`TargetPlan`]), the bookkeeping every backend
//! shares while it trains (when to evaluate, when to stop: [`TargetTracker`]), and what it records
//! ([`TargetOutcome`]: the evaluation curve, and the time, steps and epochs to the target).
//!
//! A backend with a target trains until an evaluation reaches it or the target's budget runs out. The shared
//! training loop ([`crate::steady_loop::SteadyLoop`]) keeps the tracker for every backend: after each training
//! step it asks [`TargetTracker::due`]; when due the backend evaluates the whole evaluation split (forward
//! only) into an [`EvalTally`], which the loop hands to [`TargetTracker::record`]. Time to target is wall-clock time
//! from the first training step to the end of the evaluation that reached it, evaluations included (as
//! MLPerf's run clock); `train_s` is the part of it spent in training steps.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use trainbench_graph::graph::{Graph, LossKind, NodeId, Op};

/// The metric a target is set on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TargetMetric {
    /// Classification accuracy on the evaluation split (argmax of the logits equals the label), reached when
    /// at least the value.
    Accuracy,
    /// Mean loss on the evaluation split, reached when at most the value.
    Loss,
    /// ROC AUC of a binary model's scores over the evaluation split (the logits of its binary cross-entropy
    /// loss against its targets, computed exactly: `auc.rs`), reached when at least the value.
    Auc,
}

impl TargetMetric {
    /// Name as written in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetMetric::Accuracy => "accuracy",
            TargetMetric::Loss => "loss",
            TargetMetric::Auc => "auc",
        }
    }
}

/// How often a run with a target evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvalEvery {
    /// Every this many training steps.
    Steps(u64),
    /// Every this many epochs of the training split.
    Epochs(u64),
}

/// A training target: train until the evaluation split's metric reaches the value, or the budget ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetPlan {
    /// The metric.
    pub metric: TargetMetric,
    /// The value to reach (accuracy and AUC: at least; loss: at most).
    pub value: f64,
    /// How often to evaluate.
    pub every: EvalEvery,
    /// Give up after this many epochs of the training split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_epochs: Option<u64>,
    /// Give up after this many training steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u64>,
    /// Give up after this many seconds of training (evaluations included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_seconds: Option<f64>,
}

/// One evaluation of the evaluation split.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalPoint {
    /// Training steps done before it.
    pub step: u64,
    /// Epochs of the training split done before it (fractional).
    pub epoch: f64,
    /// Seconds from the first training step to the end of this evaluation.
    pub elapsed_s: f64,
    /// Mean loss over the evaluation split.
    pub loss: f64,
    /// Accuracy over the evaluation split; `None` when the graph has no cross-entropy loss.
    pub accuracy: Option<f64>,
    /// ROC AUC over the evaluation split; absent when the graph has no binary cross-entropy loss (or the split
    /// holds one class only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auc: Option<f64>,
    /// Seconds this evaluation took (it started `eval_s` before `elapsed_s`); absent in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_s: Option<f64>,
}

/// What a run with a target recorded.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetOutcome {
    /// Every evaluation, in order.
    pub curve: Vec<EvalPoint>,
    /// Whether an evaluation reached the target.
    pub reached: bool,
    /// Seconds from the first training step to the end of the evaluation that reached the target.
    pub time_to_target_s: Option<f64>,
    /// Training steps done when the target was reached.
    pub steps_to_target: Option<u64>,
    /// Epochs done when the target was reached.
    pub epochs_to_target: Option<f64>,
    /// Seconds spent in training steps over the whole run (evaluations excluded).
    pub train_s: f64,
    /// Seconds spent evaluating over the whole run.
    pub eval_s: f64,
    /// Samples in the evaluation split.
    pub eval_samples: u64,
    /// Why the run stopped: `target reached`, or the budget that ended it.
    pub stopped: String,
}

/// Sums over the batches of one evaluation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EvalTally {
    /// Sum over samples of the (weighted, summed) per-sample loss.
    pub loss_sum: f64,
    /// Samples evaluated.
    pub samples: u64,
    /// Predictions equal to their label (per position for sequence outputs).
    pub correct: u64,
    /// Predictions made.
    pub predictions: u64,
    /// A binary model's `(score, is a click)` of every sample, for the exact AUC (empty for other models).
    pub scored: Vec<(f32, bool)>,
}

impl EvalTally {
    /// Add one batch of `samples` samples with mean loss `mean_loss` and `correct` of `predictions` right.
    pub fn add(&mut self, samples: u64, mean_loss: f64, correct: u64, predictions: u64) {
        self.loss_sum += mean_loss * samples as f64;
        self.samples += samples;
        self.correct += correct;
        self.predictions += predictions;
    }

    /// Add one batch of a binary model's scores (its logits) and targets (0 or 1), for the AUC.
    pub fn add_scores(&mut self, scores: &[f32], targets: &[f32]) {
        self.scored.extend(crate::auc::scored_pairs(scores, targets));
    }
}

/// The node holding a classifier's logits and the node holding its labels: the inputs of the graph's
/// cross-entropy loss, the first one when there are several. `None` when the graph has none (accuracy is then
/// undefined).
pub fn classifier_nodes(graph: &Graph) -> Option<(NodeId, NodeId)> {
    graph.losses.iter().find_map(|&l| match graph.nodes[l].op {
        Op::Loss { loss: LossKind::CrossEntropy, .. } => {
            let ins = &graph.nodes[l].inputs;
            Some((*ins.first()?, *ins.get(1)?))
        }
        Op::Input { .. }
        | Op::Conv { .. }
        | Op::BatchNorm { .. }
        | Op::LayerNorm { .. }
        | Op::RmsNorm { .. }
        | Op::Linear { .. }
        | Op::Embedding { .. }
        | Op::Rnn { .. }
        | Op::Attention { .. }
        | Op::Rotary { .. }
        | Op::Sdpa { .. }
        | Op::ClassToken { .. }
        | Op::EmbeddingBag { .. }
        | Op::Pool { .. }
        | Op::AdaptivePool { .. }
        | Op::Act { .. }
        | Op::Softmax
        | Op::Dropout { .. }
        | Op::Add
        | Op::Mul
        | Op::Concat { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Slice { .. }
        | Op::Mean { .. }
        | Op::MatMul { .. }
        | Op::SinusoidalPositions { .. }
        | Op::LearnedPositions { .. }
        | Op::CriticBatch
        | Op::RoiAlign { .. }
        | Op::Lora { .. }
        | Op::Moe { .. }
        | Op::Loss { .. } => None,
    })
}

/// Count the positions where the argmax over the last dimension of `logits` (`labels.len()` rows of
/// `classes` values) equals the label: `(correct, predictions)`.
pub fn count_correct(logits: &[f32], classes: usize, labels: &[i64]) -> (u64, u64) {
    if classes == 0 {
        return (0, 0);
    }
    let mut correct = 0u64;
    for (row, &label) in logits.chunks_exact(classes).zip(labels) {
        let mut best = 0usize;
        for (k, v) in row.iter().enumerate() {
            if *v > row[best] {
                best = k;
            }
        }
        if best as i64 == label {
            correct += 1;
        }
    }
    (correct, labels.len().min(logits.len() / classes) as u64)
}

/// The bookkeeping of a run with a target (see the module docs).
#[derive(Debug, Clone)]
pub struct TargetTracker {
    plan: TargetPlan,
    /// Training batches per epoch, when the source knows.
    epoch_batches: Option<u64>,
    steps: u64,
    last_eval_step: u64,
    outcome: TargetOutcome,
}

/// Why a [`TargetTracker`] cannot run a plan.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct TargetError(pub String);

impl TargetTracker {
    /// Start tracking `plan`; `epoch_batches` is the training split's batches per epoch
    /// ([`trainbench_data::BatchSource::epoch_batches`]), needed when the plan counts in epochs.
    pub fn new(plan: &TargetPlan, epoch_batches: Option<u64>) -> Result<Self, TargetError> {
        let epochs_used = matches!(plan.every, EvalEvery::Epochs(_)) || plan.max_epochs.is_some();
        if epochs_used && epoch_batches.is_none_or(|b| b == 0) {
            return Err(TargetError(
                "the target counts epochs, but the dataset does not say how many batches an epoch has; count in \
                 steps (`eval_every_steps`, `max_steps`) instead"
                    .into(),
            ));
        }
        if plan.max_epochs.is_none() && plan.max_steps.is_none() && plan.max_seconds.is_none() {
            return Err(TargetError("the target has no budget: set max_epochs, max_steps or max_seconds".into()));
        }
        Ok(Self { plan: plan.clone(), epoch_batches, steps: 0, last_eval_step: 0, outcome: TargetOutcome::default() })
    }

    fn epochs(&self) -> f64 {
        match self.epoch_batches {
            Some(b) if b > 0 => self.steps as f64 / b as f64,
            _ => 0.0,
        }
    }

    /// Count one training step of `seconds`.
    pub fn trained(&mut self, seconds: f64) {
        self.steps += 1;
        self.outcome.train_s += seconds;
    }

    /// Whether an evaluation is due after the steps counted so far.
    pub fn due(&self) -> bool {
        let since = self.steps - self.last_eval_step;
        match self.plan.every {
            EvalEvery::Steps(n) => since >= n.max(1),
            EvalEvery::Epochs(n) => since >= n.max(1) * self.epoch_batches.unwrap_or(1).max(1),
        }
    }

    /// Record an evaluation that took `eval_seconds`, ending `elapsed_s` after the first training step.
    pub fn record(&mut self, tally: EvalTally, eval_seconds: f64, elapsed_s: f64) {
        self.last_eval_step = self.steps;
        self.outcome.eval_s += eval_seconds;
        self.outcome.eval_samples = tally.samples;
        let loss = if tally.samples > 0 { tally.loss_sum / tally.samples as f64 } else { f64::NAN };
        let accuracy = (tally.predictions > 0).then(|| tally.correct as f64 / tally.predictions as f64);
        let auc = crate::auc::roc_auc(&tally.scored);
        let (step, epoch, eval_s) = (self.steps, self.epochs(), Some(eval_seconds));
        let point = EvalPoint { step, epoch, elapsed_s, loss, accuracy, auc, eval_s };
        self.outcome.curve.push(point);
        let hit = match self.plan.metric {
            TargetMetric::Accuracy => accuracy.is_some_and(|a| a >= self.plan.value),
            TargetMetric::Loss => loss <= self.plan.value,
            TargetMetric::Auc => auc.is_some_and(|a| a >= self.plan.value),
        };
        if hit && !self.outcome.reached {
            self.outcome.reached = true;
            self.outcome.time_to_target_s = Some(elapsed_s);
            self.outcome.steps_to_target = Some(self.steps);
            self.outcome.epochs_to_target = self.epoch_batches.map(|_| point.epoch);
            self.outcome.stopped = "target reached".into();
        }
    }

    /// Whether the run should stop, `elapsed_s` after its first training step: the target was reached or a
    /// budget ran out (which is then recorded as the reason).
    pub fn finished(&mut self, elapsed_s: f64) -> bool {
        if self.outcome.reached {
            return true;
        }
        let why = if self.plan.max_steps.is_some_and(|n| self.steps >= n) {
            Some(format!("max_steps ({}) without reaching the target", self.steps))
        } else if self.plan.max_epochs.is_some_and(|n| self.epoch_batches.is_some() && self.epochs() >= n as f64) {
            Some(format!("max_epochs ({:.0}) without reaching the target", self.epochs()))
        } else if self.plan.max_seconds.is_some_and(|s| elapsed_s >= s) {
            Some(format!("max_seconds ({elapsed_s:.1} s) without reaching the target"))
        } else {
            None
        };
        match why {
            Some(w) => {
                self.outcome.stopped = w;
                true
            }
            None => false,
        }
    }

    /// Whether the last step was not evaluated yet (a run ending on its budget evaluates once more).
    pub fn unevaluated_steps(&self) -> bool {
        self.steps > self.last_eval_step
    }

    /// What was recorded.
    pub fn outcome(self) -> TargetOutcome {
        self.outcome
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn plan(metric: TargetMetric, value: f64, every: EvalEvery) -> TargetPlan {
        TargetPlan { metric, value, every, max_epochs: None, max_steps: Some(100), max_seconds: None }
    }

    #[test]
    fn argmax_accuracy_counts_rows() {
        let logits = [0.1, 0.9, 0.0, 2.0, 1.0, 0.5, 0.0, 0.0, 3.0];
        assert_eq!(count_correct(&logits, 3, &[1, 0, 1]), (2, 3));
        assert_eq!(count_correct(&logits, 0, &[1]), (0, 0));
    }

    #[test]
    fn evaluates_on_its_cadence_and_stops_at_the_target() {
        let mut t = TargetTracker::new(&plan(TargetMetric::Accuracy, 0.9, EvalEvery::Epochs(1)), Some(4)).unwrap();
        for _ in 0..3 {
            t.trained(0.5);
            assert!(!t.due());
        }
        t.trained(0.5);
        assert!(t.due());
        let mut tally = EvalTally::default();
        tally.add(10, 1.0, 5, 10);
        t.record(tally, 0.25, 2.25);
        assert!(!t.due() && !t.finished(2.25));
        for _ in 0..4 {
            t.trained(0.5);
        }
        let mut tally = EvalTally::default();
        tally.add(10, 0.2, 9, 10);
        t.record(tally, 0.25, 4.5);
        assert!(t.finished(4.5));
        let o = t.outcome();
        assert!(o.reached);
        assert_eq!((o.steps_to_target, o.epochs_to_target, o.time_to_target_s), (Some(8), Some(2.0), Some(4.5)));
        assert_eq!(o.curve.len(), 2);
        assert_eq!(o.curve[0].accuracy, Some(0.5));
        assert_eq!((o.train_s, o.eval_s), (4.0, 0.5));
    }

    #[test]
    fn a_budget_ends_a_run_that_misses_the_target() {
        let p = TargetPlan { max_steps: Some(3), ..plan(TargetMetric::Loss, 0.1, EvalEvery::Steps(1)) };
        let mut t = TargetTracker::new(&p, None).unwrap();
        for _ in 0..3 {
            assert!(!t.finished(0.0));
            t.trained(0.1);
            let mut tally = EvalTally::default();
            tally.add(4, 0.5, 0, 0);
            t.record(tally, 0.0, 0.0);
        }
        assert!(t.finished(0.3));
        let o = t.outcome();
        assert!(!o.reached && o.time_to_target_s.is_none());
        assert!(o.stopped.starts_with("max_steps"), "{}", o.stopped);
        assert_eq!(o.curve[0].accuracy, None);
    }

    #[test]
    fn epochs_need_a_known_epoch_and_a_budget_is_required() {
        assert!(TargetTracker::new(&plan(TargetMetric::Loss, 0.1, EvalEvery::Epochs(1)), None).is_err());
        let p = TargetPlan { max_steps: None, ..plan(TargetMetric::Loss, 0.1, EvalEvery::Steps(1)) };
        assert!(TargetTracker::new(&p, Some(3)).is_err());
    }
}
