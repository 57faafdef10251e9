//! The `devices` subcommand: every device each backend built into this binary can run on, with the selector
//! that picks it in a spec (`device = "..."`).

use comfy_table::{ContentArrangement, Table, presets};
use trainbench_contract::DeviceInfo;
use trainbench_contract::mock::MockConfig;

use super::args::{FormatArg, OutputFormat};
use super::{CommandError, Outcome};
use trainbench_contract::BackendKind;

use crate::backend_registry;
use crate::format::human_bytes;

/// Arguments of `trainbench devices`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output format (text: a table; JSON: every detail of each device, by backend; `--json` is the same as
    /// `--format json`).
    #[command(flatten)]
    pub format: FormatArg,
}

/// Details shown in the table, in this order, when a device reports them (`--format json` has every detail).
const SHOWN: [&str; 11] = [
    "api",
    "vendor",
    "driver",
    "driver_info",
    "compute_capability",
    "multiprocessors",
    "logical_cpus",
    "max_buffer_size",
    "max_storage_buffer_binding_size",
    "max_compute_invocations_per_workgroup",
    "timestamp_query",
];

/// One backend's answer: its devices, or why it has none here.
struct Listing {
    backend: &'static str,
    devices: Vec<DeviceInfo>,
    note: Option<String>,
}

fn listings() -> Vec<Listing> {
    [BackendKind::Tch, BackendKind::Wgpu]
        .into_iter()
        .map(|kind| {
            let backend = kind.name();
            if !backend_registry::built(kind) {
                let note = format!("not built into this binary (rebuild with `--features {backend}`)");
                return Listing { backend, devices: Vec::new(), note: Some(note) };
            }
            let devices = backend_registry::create(kind, &MockConfig::default()).devices();
            let note = devices.is_empty().then(|| "no device found".to_string());
            Listing { backend, devices, note }
        })
        .collect()
}

/// The listings as a table: one row per device, and one per backend without devices.
fn table(listings: &[Listing]) -> String {
    let mut t = Table::new();
    t.load_preset(presets::ASCII_MARKDOWN).set_content_arrangement(ContentArrangement::Disabled);
    t.set_header(["backend", "selector", "name", "kind", "memory", "peak fp32", "details"]);
    for l in listings {
        if let Some(note) = &l.note {
            t.add_row([l.backend, "-", note.as_str(), "-", "-", "-", "-"]);
        }
        for d in &l.devices {
            let details: Vec<String> =
                SHOWN.iter().filter_map(|k| d.details.get(*k).map(|v| format!("{k}={v}"))).collect();
            t.add_row([
                l.backend.to_string(),
                d.selector.clone(),
                d.name.clone(),
                d.kind.clone(),
                d.memory_bytes.map(human_bytes).unwrap_or_else(|| "-".into()),
                d.peak_flops_fp32.map(|f| format!("{:.2} TFLOP/s", f / 1e12)).unwrap_or_else(|| "-".into()),
                details.join(", "),
            ]);
        }
    }
    t.to_string()
}

/// Carry out `trainbench devices`.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    let listings = listings();
    if args.format.get() == OutputFormat::Json {
        let map: serde_json::Map<String, serde_json::Value> = listings
            .iter()
            .map(|l| {
                let v = serde_json::to_value(&l.devices)?;
                Ok((l.backend.to_string(), v))
            })
            .collect::<Result<_, CommandError>>()?;
        let text = serde_json::to_string_pretty(&map)?;
        outln!("{text}");
    } else {
        outln!("{}", table(&listings));
    }
    Ok(Outcome::Success)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn table_lists_devices_and_missing_backends() {
        let dev = DeviceInfo {
            selector: "wgpu:0".into(),
            name: "llvmpipe".into(),
            kind: "software".into(),
            memory_bytes: None,
            peak_flops_fp32: None,
            details: BTreeMap::from([("api".to_string(), "Vulkan".to_string()), ("x".into(), "hidden".into())]),
        };
        let out = table(&[
            Listing { backend: "tch", devices: Vec::new(), note: Some("not built".into()) },
            Listing { backend: "wgpu", devices: vec![dev], note: None },
        ]);
        assert!(out.contains("| tch") && out.contains("not built"), "{out}");
        assert!(out.contains("wgpu:0") && out.contains("api=Vulkan") && !out.contains("hidden"), "{out}");
    }
}
