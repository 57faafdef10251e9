//! Rules of the `[mlperf]` table: what an MLPerf Training log of a trainbench run can honestly say. The closed
//! division is refused (its reference dataset and hyperparameters cannot hold for a trainbench run); a log needs
//! a `[training.target]` on the benchmark's quality metric and a model of the benchmark's family (Llama-3.1-8B:
//! a decoder to a log-perplexity target, i.e. the mean cross-entropy `loss`; DLRM-DCNv2: a `dlrm` to an AUC
//! target); the log path's placeholders are the known ones.

use trainbench_contract::target::TargetMetric;
use trainbench_graph::ModelSpec;

use super::finding::Finding;
use crate::spec::path::FieldPath;
use crate::spec::wire::{MlperfBenchmark, MlperfDivision, MlperfSpec, TrainingSpec};

fn key(k: &str) -> FieldPath {
    FieldPath::keys(&["mlperf", k])
}

/// The placeholders an MLPerf log path may hold.
pub const LOG_PLACEHOLDERS: [&str; 3] = ["{run_id}", "{config}", "{repeat}"];

/// The `{...}` of `template` that are not [`LOG_PLACEHOLDERS`], in order.
pub fn unknown_placeholders(template: &str) -> Vec<String> {
    let mut unknown = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let tail = &rest[open..];
        let Some(close) = tail.find('}') else {
            unknown.push(tail.to_string());
            break;
        };
        let name = &tail[..=close];
        if !LOG_PLACEHOLDERS.contains(&name) {
            unknown.push(name.to_string());
        }
        rest = &tail[close + 1..];
    }
    unknown
}

/// The `[mlperf]` table against itself, the target and the model.
pub fn check_mlperf(
    out: &mut Vec<Finding>,
    mlperf: &MlperfSpec,
    training: Option<&TrainingSpec>,
    model: Option<&ModelSpec>,
) {
    if mlperf.division == MlperfDivision::Closed {
        out.push(
            Finding::new(
                key("division"),
                "the closed division requires the benchmark's reference dataset, model and hyperparameters, which a \
                 trainbench run does not use, so its log would not hold (docs/mlperf.md lists the rules)",
            )
            .expected("\"open\"")
            .hint("write `division = \"open\"` (the default)"),
        );
    }
    if mlperf.org.trim().is_empty() {
        out.push(Finding::new(key("org"), "`mlperf.org` (submission_org) must not be blank"));
    }
    if let Some(platform) = mlperf.platform.as_deref().filter(|p| p.trim().is_empty()) {
        out.push(Finding::new(key("platform"), format!("`mlperf.platform` must not be blank, found {platform:?}")));
    }
    if let Some(log) = &mlperf.log {
        let unknown = unknown_placeholders(log);
        if !unknown.is_empty() {
            out.push(
                Finding::new(key("log"), format!("`mlperf.log` holds unknown placeholder(s) {}", unknown.join(", ")))
                    .hint("the placeholders are {run_id}, {config} and {repeat}"),
            );
        }
    }
    let metric = match mlperf.benchmark {
        MlperfBenchmark::Llama31B8 => {
            if let Some(m) = model.filter(|m| !matches!(m, ModelSpec::Gpt(_))) {
                out.push(
                    Finding::new(
                        key("benchmark"),
                        format!("`llama31_8b` is a decoder-only language model; this spec's model is `{}`", m.family()),
                    )
                    .hint("use `family = \"gpt\"` (a Llama-shaped decoder), or another benchmark"),
                );
            }
            TargetMetric::Loss
        }
        MlperfBenchmark::DlrmDcnv2 => {
            if let Some(m) = model.filter(|m| !matches!(m, ModelSpec::Dlrm(_))) {
                out.push(
                    Finding::new(
                        key("benchmark"),
                        format!("`dlrm_dcnv2` is a click model (DLRM-DCNv2); this spec's model is `{}`", m.family()),
                    )
                    .hint("use `family = \"dlrm\"` trained on `[dataset] source = \"clicks\"`, or another benchmark"),
                );
            }
            TargetMetric::Auc
        }
        other => {
            out.push(
                Finding::new(
                    key("benchmark"),
                    format!(
                        "trainbench cannot train `{}` to its quality metric yet; the benchmarks it can log are \
                         `llama31_8b` (a decoder to a log-perplexity target) and `dlrm_dcnv2` (a DLRM to an AUC \
                         target)",
                        other.as_str()
                    ),
                )
                .expected("\"llama31_8b\" or \"dlrm_dcnv2\""),
            );
            return;
        }
    };
    let Some(training) = training else { return };
    match &training.target {
        None => out.push(
            Finding::new(
                key("benchmark"),
                format!(
                    "MLPerf scores the time to a quality target, but the spec has no `[training.target]` (`{}` \
                     trains to {})",
                    mlperf.benchmark.as_str(),
                    metric_words(metric)
                ),
            )
            .hint(format!("add `[training.target]` with `metric = \"{}\"`", metric.as_str())),
        ),
        Some(t) if t.metric != metric => out.push(
            Finding::new(
                FieldPath::keys(&["training", "target", "metric"]),
                format!(
                    "`{}`'s quality metric is {}; the target is on `{}`",
                    mlperf.benchmark.as_str(),
                    metric_words(metric),
                    t.metric.as_str()
                ),
            )
            .expected(format!("\"{}\"", metric.as_str())),
        ),
        Some(_) => {}
    }
}

fn metric_words(metric: TargetMetric) -> &'static str {
    match metric {
        TargetMetric::Loss => "log perplexity (the evaluation split's mean cross-entropy, `loss`)",
        TargetMetric::Accuracy => "accuracy",
        TargetMetric::Auc => "AUC (the area under the ROC curve of the click logits, `auc`)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_other_than_the_three_are_named() {
        assert!(unknown_placeholders("results/x/result_{repeat}.txt").is_empty());
        assert!(unknown_placeholders("{run_id}-{config}").is_empty());
        assert_eq!(unknown_placeholders("a/{seed}/{repeat}/{oops"), vec!["{seed}", "{oops"]);
    }
}
