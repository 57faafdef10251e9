//! Where a run's MLPerf log goes and writing it: a path template (`--mllog`, or the spec's `mlperf.log` under
//! the spec's results folder) with `{run_id}`, `{config}` and `{repeat}` replaced by the run's, refused before
//! any run starts when two runs would share a file; each log is written whole, atomically, when its run ends.

use std::path::{Path, PathBuf};

use trainbench_contract::RunPlan;

use super::events::{LogContext, render, run_log};
use crate::result::RunResult;
use crate::runner::Suite;
use crate::spec::ValidatedSpec;
use crate::spec::rules::mlperf::unknown_placeholders;
use crate::spec::wire::MlperfSpec;

/// Why a log cannot be planned or written.
#[derive(Debug, thiserror::Error)]
pub enum MllogError {
    /// The template holds a placeholder other than the three.
    #[error("the MLPerf log path `{template}` holds unknown placeholder(s) {}; the placeholders are {{run_id}}, {{config}} and {{repeat}}", .unknown.join(", "))]
    Placeholder {
        /// The template.
        template: String,
        /// The unknown placeholders.
        unknown: Vec<String>,
    },
    /// Two runs would write the same file.
    #[error("runs `{first}` and `{second}` would both write their MLPerf log to {}; put {{run_id}} (or {{repeat}}) in the path", .path.display())]
    Shared {
        /// The file.
        path: PathBuf,
        /// The first run.
        first: String,
        /// The second run.
        second: String,
    },
    /// A log was asked for (`--mllog`) of a spec without the submission fields.
    #[error(
        "--mllog writes MLPerf logs, whose submission fields come from the spec's `[mlperf]` table; spec `{spec}` has none (docs/mlperf.md)"
    )]
    NoSubmission {
        /// The spec's name.
        spec: String,
    },
    /// Writing the log failed.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// A suite's MLPerf log paths: a template and the folder a relative one is under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPaths {
    /// The template, with placeholders.
    pub template: String,
    /// The folder a relative template is resolved against.
    pub base: PathBuf,
}

impl LogPaths {
    /// Check the template's placeholders and that `plans` each get a file of their own.
    pub fn new(template: &str, base: &Path, plans: &[RunPlan]) -> Result<Self, MllogError> {
        let unknown = unknown_placeholders(template);
        if !unknown.is_empty() {
            return Err(MllogError::Placeholder { template: template.to_string(), unknown });
        }
        let paths = LogPaths { template: template.to_string(), base: base.to_path_buf() };
        let mut seen: Vec<(PathBuf, &str)> = Vec::new();
        for plan in plans {
            let path = paths.path_of(plan);
            if let Some((_, first)) = seen.iter().find(|(p, _)| *p == path) {
                return Err(MllogError::Shared { path, first: first.to_string(), second: plan.id.clone() });
            }
            seen.push((path, &plan.id));
        }
        Ok(paths)
    }

    /// The log file of `plan`.
    pub fn path_of(&self, plan: &RunPlan) -> PathBuf {
        let config = if plan.config.is_empty() { plan.id.as_str() } else { plan.config.as_str() };
        let name = self
            .template
            .replace("{run_id}", &plan.id)
            .replace("{config}", config)
            .replace("{repeat}", &plan.repeat.to_string());
        self.base.join(name)
    }

    /// Write the log of `result` (atomically: a temporary file renamed); the file written.
    pub fn write(&self, result: &RunResult, cx: &LogContext<'_>) -> Result<PathBuf, MllogError> {
        let path = self.path_of(&result.plan);
        let io = |source| MllogError::Io { path: path.clone(), source };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut tmp = path.clone().into_os_string();
        tmp.push(".tmp");
        std::fs::write(&tmp, render(&run_log(result, cx))).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)?;
        Ok(path)
    }
}

/// The MLPerf logs of one suite: where they go, the submission fields, the model's sequence length.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteLog {
    /// Where each run's log goes.
    pub paths: LogPaths,
    /// The spec's `[mlperf]` table.
    pub submission: MlperfSpec,
    /// Tokens per sample of a sequence model.
    pub sequence_length: Option<u64>,
}

impl SuiteLog {
    /// The logs of `suite` (of `spec`): `--mllog`'s template (`flag`, relative to the working directory) or the
    /// spec's `mlperf.log` (relative to the spec's results folder under `out`); `None` when neither asks for one.
    pub fn plan(
        flag: Option<&str>,
        spec: &ValidatedSpec,
        suite: &Suite,
        out: &Path,
    ) -> Result<Option<Self>, MllogError> {
        let submission = spec.spec().mlperf.as_ref();
        let (template, base) = match (flag, submission.and_then(|m| m.log.as_deref())) {
            (Some(t), _) => (t, PathBuf::new()),
            (None, Some(t)) => (t, out.join(&suite.spec_name)),
            (None, None) => return Ok(None),
        };
        let Some(submission) = submission else {
            return Err(MllogError::NoSubmission { spec: suite.spec_name.clone() });
        };
        let graph = &suite.graph;
        Ok(Some(SuiteLog {
            paths: LogPaths::new(template, &base, &suite.plans)?,
            submission: submission.clone(),
            sequence_length: (graph.item_unit == "tokens").then_some(graph.items_per_sample),
        }))
    }

    /// Write the log of `result`; the file written.
    pub fn write(&self, result: &RunResult) -> Result<PathBuf, MllogError> {
        self.paths.write(result, &LogContext { submission: &self.submission, sequence_length: self.sequence_length })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn plans() -> Vec<RunPlan> {
        (0..2).map(|r| RunPlan { repeat: r, ..RunPlan::for_tests(&format!("lm.b8.r{r}"), 3) }).collect()
    }

    #[test]
    fn each_run_gets_its_own_file_or_the_template_is_refused() {
        let p = LogPaths::new("results/sys/llama31_8b/result_{repeat}.txt", Path::new("/o"), &plans()).unwrap();
        assert_eq!(p.path_of(&plans()[1]), Path::new("/o/results/sys/llama31_8b/result_1.txt"));
        let e = LogPaths::new("log.txt", Path::new("/o"), &plans()).unwrap_err();
        assert!(matches!(e, MllogError::Shared { .. }), "{e}");
        assert!(e.to_string().contains("lm.b8.r0") && e.to_string().contains("lm.b8.r1"), "{e}");
        let e = LogPaths::new("{seed}.txt", Path::new("/o"), &plans()).unwrap_err();
        assert!(e.to_string().contains("{seed}"), "{e}");
    }
}
