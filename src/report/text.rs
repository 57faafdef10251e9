//! Sentences about a report's runs shared by its pages and by compare: the summary under the title, the
//! machines the runs came from, and a run's environment in one line.

use super::model::{ReportModel, device_name};
use crate::result::RunResult;

/// The sentence under a report's title: how many runs, configurations and specs, on which backends and devices.
pub fn summary_line(model: &ReportModel<'_>) -> String {
    let specs = model.specs();
    let line = format!(
        "{} runs in {} configurations of {} spec(s): {}; on {}.",
        model.runs.len(),
        model.configs.len(),
        specs.len(),
        specs.join(", "),
        model.placements().join(", ")
    );
    match machines_note(model) {
        Some(note) => format!("{line} {note}"),
        None => line,
    }
}

/// The machines the runs came from (host names, with how many runs each) when there is more than one, as for a
/// suite a cluster ran (`run --on slurm`): figures of different machines differ by the machine too.
pub fn machines_note(model: &ReportModel<'_>) -> Option<String> {
    let mut hosts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for l in &model.runs {
        *hosts.entry(l.result.environment.hostname.as_str()).or_insert(0) += 1;
    }
    (hosts.len() > 1).then(|| {
        let list: Vec<String> = hosts.iter().map(|(h, n)| format!("{h} ({n})")).collect();
        format!(
            "The runs came from {} machines: {}; figures of configurations run on different machines differ by the \
             machine as well (each run's host is in \"Runs and environments\").",
            hosts.len(),
            list.join(", ")
        )
    })
}

/// One-line environment summary of a run: device, backend libraries, trainbench version, CPU, host.
pub fn environment_summary(r: &RunResult) -> String {
    let env = &r.environment;
    let libs: Vec<String> = env.library_versions.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let libs = if libs.is_empty() { String::new() } else { format!(" ({})", libs.join(", ")) };
    let driver = env.gpus.get().map(|g| format!("; driver {}", g.driver_version)).unwrap_or_default();
    format!(
        "{} via {}{libs}{driver}; trainbench {}; {} x{}; {}",
        device_name(r),
        r.backend,
        env.trainbench_version,
        env.cpu.model,
        env.cpu.logical_cores,
        env.hostname
    )
}
