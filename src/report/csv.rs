//! CSV export: one row per run (repeats not pooled), every summary metric, the recorded prediction's step time and
//! profile, and the environment in columns.

use super::model::{ReportModel, device_name};
use crate::result::RunResult;

/// Column names of `runs.csv`, in order.
pub const COLUMNS: [&str; 44] = [
    "spec",
    "run_id",
    "config",
    "repeat",
    "outcome",
    "backend",
    "device",
    "precision",
    "batch_size",
    "world_size",
    "strategy",
    "comm_share",
    "samples_per_s",
    "items_per_s",
    "item_unit",
    "items_per_s_per_device",
    "step_n",
    "step_median_s",
    "step_mean_s",
    "step_p5_s",
    "step_p95_s",
    "step_p99_s",
    "step_cv",
    "gpu_utilization_percent",
    "flop_fraction",
    "mfu",
    "hfu",
    "mfu_peak_flop_per_s",
    "mfu_peak_precision",
    "mfu_convention",
    "cpu_utilization",
    "weights_bytes",
    "gradients_bytes",
    "optimizer_state_bytes",
    "activations_and_workspace_bytes",
    "peak_allocated_bytes",
    "estimated_total_bytes",
    "energy_per_sample_j",
    "predicted_step_s",
    "prediction_profile",
    "trainbench_version",
    "library_versions",
    "spec_sha256",
    "started_at",
];

/// Quote a field when it holds a comma, a quote or a line break (RFC 4180).
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

fn num<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

fn row(r: &RunResult) -> Vec<String> {
    let m = r.metrics.as_ref();
    let st = m.map(|m| &m.step_time);
    let mem = m.map(|m| &m.memory.measured);
    let predicted = r.prediction.as_ref().and_then(|p| p.predicted());
    let mfu = m.and_then(|m| m.flops.mfu.as_ref()).and_then(|x| x.get());
    let libs: Vec<String> = r.environment.library_versions.iter().map(|(k, v)| format!("{k}={v}")).collect();
    vec![
        r.spec_name.clone(),
        r.run_id.clone(),
        r.config_id().to_string(),
        r.plan.repeat.to_string(),
        r.outcome.status().to_string(),
        r.backend.clone(),
        device_name(r),
        r.plan.precision.as_str().to_string(),
        r.plan.batch_size.to_string(),
        r.plan.topology.world_size().to_string(),
        r.plan.topology.strategy.name().to_string(),
        num(super::model::comm_share_of(r)),
        num(m.map(|m| m.throughput.samples_per_s)),
        num(m.map(|m| m.throughput.items_per_s)),
        m.map(|m| m.throughput.item_unit.clone()).unwrap_or_default(),
        num(m.and_then(|m| m.throughput.items_per_s_per_device)),
        num(st.map(|s| s.n)),
        num(st.map(|s| s.median_s)),
        num(st.map(|s| s.mean_s)),
        num(st.map(|s| s.p5_s)),
        num(st.map(|s| s.p95_s)),
        num(st.map(|s| s.p99_s)),
        num(st.map(|s| s.cv)),
        num(m.and_then(|m| m.gpu.get()).map(|g| g.utilization_mean_percent)),
        num(m.and_then(|m| m.flops.fraction)),
        num(mfu.map(|u| u.mfu)),
        num(mfu.and_then(|u| u.hfu.as_ref()).map(|h| h.hfu)),
        num(mfu.map(|u| u.peak.flop_per_s)),
        mfu.map(|u| u.peak.precision.clone()).unwrap_or_default(),
        mfu.map(|u| u.convention.clone()).unwrap_or_default(),
        num(m.and_then(|m| m.cpu.get()).map(|c| c.utilization)),
        num(mem.map(|x| x.weights_bytes)),
        num(mem.map(|x| x.gradients_bytes)),
        num(mem.map(|x| x.optimizer_state_bytes)),
        num(mem.and_then(|x| x.activations_and_workspace_bytes)),
        num(mem.and_then(|x| x.peak_allocated_bytes)),
        num(m.and_then(|m| m.memory.estimate.as_ref()).map(|e| e.total_bytes)),
        num(m.and_then(|m| m.power.get()).map(|p| p.energy_per_sample_j)),
        num(predicted.map(|p| p.step_time_s)),
        predicted.map(|p| p.profile.name.clone()).unwrap_or_default(),
        r.environment.trainbench_version.clone(),
        libs.join(";"),
        r.environment.spec_sha256.clone(),
        r.environment.started_at.clone(),
    ]
}

/// Render `runs.csv`: a header line, then one line per run in the model's order.
pub fn render(model: &ReportModel<'_>) -> String {
    let mut out = COLUMNS.join(",");
    out.push('\n');
    for l in &model.runs {
        let cells: Vec<String> = row(&l.result).iter().map(|c| field(c)).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_when_needed() {
        assert_eq!(field("abc"), "abc");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
