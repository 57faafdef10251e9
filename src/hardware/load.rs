//! Reading hardware profiles: bytes -> TOML with spans -> JSON Schema (`schema/hardware.schema.json`) -> typed
//! [`HardwareFile`] -> the rules the schema cannot say (positive figures, which link kinds fit which role),
//! every problem a located [`Diagnostic`]. It reuses the spec stage's loader, humanizer and diagnostics.

use std::path::Path;

use jsonschema::error::ValidationErrorKind;
use schemars::generate::SchemaSettings;
use serde_json::Value;

use super::wire::{HardwareFile, Link, LinkKind};
use crate::spec::diagnostics::{self, Diagnostic};
use crate::spec::humanize::Humanizer;
use crate::spec::load::{self, Origin, Sources};
use crate::spec::path::FieldPath;
use crate::spec::schema::shape_for_editors;

/// The `$id` of the hardware profile schema.
pub const HARDWARE_SCHEMA_ID: &str = "https://trainbench.dev/schema/hardware-v1.json";

/// The JSON Schema (draft 2020-12) of hardware profiles.
pub fn hardware_schema() -> Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    let mut value = generator.into_root_schema_for::<HardwareFile>().to_value();
    if let Value::Object(root) = &mut value {
        root.insert("$id".into(), Value::String(HARDWARE_SCHEMA_ID.into()));
    }
    shape_for_editors(&mut value);
    value
}

/// The hardware schema as the committed `schema/hardware.schema.json` holds it.
pub fn hardware_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&hardware_schema()).unwrap_or_default();
    text.push('\n');
    text
}

/// Whether a TOML text is a hardware profile rather than a spec: its top-level `kind` is `"hardware"`, or
/// (for a file too broken to parse) its `#:schema` line names `hardware.schema.json`.
pub fn looks_like_profile(text: &str) -> bool {
    if let Ok(table) = text.parse::<toml::Table>() {
        return table.get("kind").and_then(toml::Value::as_str) == Some("hardware");
    }
    text.lines().any(|l| l.trim_start().starts_with("#:schema") && l.contains("hardware.schema.json"))
}

/// Read at most one byte more than a profile (or spec) may hold, so a device file or a huge file cannot hang
/// or exhaust memory; the size check of [`load::decode`] then reports it.
pub fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(load::MAX_SPEC_BYTES as u64 + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Checks hardware profiles; build once, reuse for many files.
pub struct ProfileValidator {
    schema: Value,
    compiled: jsonschema::Validator,
}

/// Why the validator could not be set up (a bug: trainbench generates the schema itself).
#[derive(Debug, thiserror::Error)]
#[error("the hardware schema does not compile: {0}")]
pub struct HardwareSchemaError(String);

impl ProfileValidator {
    /// Compile the hardware schema.
    pub fn new() -> Result<Self, HardwareSchemaError> {
        let schema = hardware_schema();
        let compiled = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(&schema)
            .map_err(|e| HardwareSchemaError(e.to_string()))?;
        Ok(Self { schema, compiled })
    }

    /// Check the profile at `path`, shown in diagnostics as `display`.
    pub fn check_file(&self, path: &Path, display: &str) -> Result<HardwareFile, Vec<Diagnostic>> {
        match read_bounded(path) {
            Ok(bytes) => self.check_bytes(display, &bytes),
            Err(e) => Err(vec![Diagnostic::error(display, format!("cannot read the hardware profile: {e}"))]),
        }
    }

    /// Check profile text given as bytes.
    pub fn check_bytes(&self, display: &str, bytes: &[u8]) -> Result<HardwareFile, Vec<Diagnostic>> {
        let mut out = self.run(display, bytes)?;
        diagnostics::sort(&mut out.1);
        match out {
            (Some(file), d) if !d.iter().any(Diagnostic::is_error) => Ok(file),
            (_, d) => Err(d),
        }
    }

    fn run(&self, display: &str, bytes: &[u8]) -> Result<(Option<HardwareFile>, Vec<Diagnostic>), Vec<Diagnostic>> {
        let text = load::decode(display, bytes).map_err(|d| vec![*d])?;
        let sources = Sources::new(display, text.clone());
        let (root, problems) = load::parse(&sources, &text, Origin::File)?;
        let form = load::to_json(&root);
        let mut out: Vec<Diagnostic> = problems
            .iter()
            .chain(&form.problems)
            .map(|p| sources.diagnostic(&p.span, &p.path, p.message.clone()).maybe_hint(p.hint.clone()))
            .collect();
        let humanizer = Humanizer {
            schema: &self.schema,
            instance: &form.value,
            root: &root,
            sources: &sources,
            poisoned: &form.poisoned,
        };
        for error in self.compiled.iter_errors(&form.value).take(crate::spec::diagnostics::MAX_DIAGNOSTICS) {
            if matches!(error.kind(), ValidationErrorKind::PropertyNames { .. }) {
                continue;
            }
            for d in humanizer.explain(&error) {
                if !out.iter().any(|o| o.path == d.path && o.message == d.message) {
                    out.push(d);
                }
            }
        }
        if !out.is_empty() {
            return Err(out);
        }
        let file: HardwareFile = match serde_json::from_value(form.value.clone()) {
            Ok(f) => f,
            Err(e) => {
                let d = Diagnostic::error(display, format!("the profile passed the schema but not its types: {e}"))
                    .hint("this is a bug in trainbench's hardware schema; please report it with the file");
                return Err(vec![d]);
            }
        };
        let at = |path: &str, message: String, hint: &str| {
            let path = FieldPath::from_pointer(path, &form.value);
            let loc = load::locate(&root, &path);
            sources.diagnostic(&loc.span, &path, message).hint(hint.to_string())
        };
        for (pointer, message, hint) in rules(&file) {
            out.push(at(&pointer, message, hint));
        }
        Ok((Some(file), out))
    }
}

/// The rules beyond the schema, as (JSON pointer, message, hint).
fn rules(f: &HardwareFile) -> Vec<(String, String, &'static str)> {
    let mut v = Vec::new();
    let mut positive = |pointer: &str, what: &str, x: f64| {
        if x <= 0.0 {
            v.push((pointer.to_string(), format!("{what} must be above 0 (got {x})"), "write the datasheet figure"));
        }
    };
    positive("/device/peak_tflops/fp32", "the fp32 peak", f.device.peak_tflops.fp32);
    positive("/device/memory_bandwidth_gbs", "the memory bandwidth", f.device.memory_bandwidth_gbs);
    for (name, l) in [("host_link", &f.host_link), ("intra_node", &f.intra_node), ("network", &f.network)] {
        if let Some(l) = l {
            positive(&format!("/{name}/bandwidth_gbs"), "a link's bandwidth", l.bandwidth_gbs);
        }
    }
    let alts = [
        ("host_link", &f.alternatives.host_link),
        ("intra_node", &f.alternatives.intra_node),
        ("network", &f.alternatives.network),
    ];
    for (name, list) in alts {
        for (i, l) in list.iter().enumerate() {
            positive(&format!("/alternatives/{name}/{i}/bandwidth_gbs"), "a link's bandwidth", l.bandwidth_gbs);
        }
    }
    if f.version != 1 {
        v.push((
            "/version".into(),
            format!("unsupported hardware profile version {}", f.version),
            "write `version = 1`",
        ));
    }
    let mut role = |pointer: String, l: &Link, allowed: &[LinkKind], role: &str| {
        if !allowed.contains(&l.kind) {
            let names: Vec<&str> = allowed.iter().map(|k| k.as_str()).collect();
            v.push((
                format!("{pointer}/kind"),
                format!("a {} link cannot be the {role} (allowed: {})", l.kind.as_str(), names.join(", ")),
                "move the link to the table of its role: host_link, intra_node or network",
            ));
        }
    };
    const HOST: &[LinkKind] = &[LinkKind::Pcie, LinkKind::Nvlink];
    const INTRA: &[LinkKind] = &[LinkKind::Pcie, LinkKind::Nvlink, LinkKind::SharedMemory];
    const NET: &[LinkKind] = &[LinkKind::Ethernet, LinkKind::Infiniband];
    if let Some(l) = &f.host_link {
        role("/host_link".into(), l, HOST, "host link");
    }
    if let Some(l) = &f.intra_node {
        role("/intra_node".into(), l, INTRA, "intra-node link");
    }
    if let Some(l) = &f.network {
        role("/network".into(), l, NET, "network");
    }
    for (i, l) in f.alternatives.host_link.iter().enumerate() {
        role(format!("/alternatives/host_link/{i}"), l, HOST, "host link");
    }
    for (i, l) in f.alternatives.intra_node.iter().enumerate() {
        role(format!("/alternatives/intra_node/{i}"), l, INTRA, "intra-node link");
    }
    for (i, l) in f.alternatives.network.iter().enumerate() {
        role(format!("/alternatives/network/{i}"), l, NET, "network");
    }
    v
}
