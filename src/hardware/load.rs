//! Reading hardware profiles: bytes -> TOML with spans -> JSON Schema (`schema/hardware.schema.json`) -> typed
//! [`HardwareFile`] -> the rules the schema cannot say (positive figures, which link kinds fit which role, the
//! format version and its `fitted` table), every problem a located [`Diagnostic`] -> a version 1 profile fitted
//! once ([`with_fitted`]). It reuses the spec stage's loader, humanizer and diagnostics. The names a calibration
//! records are string enums in the schema: an unknown one is refused here, at its key.

use std::path::Path;

use jsonschema::error::ValidationErrorKind;
use schemars::generate::SchemaSettings;
use serde_json::Value;

use super::wire::{HardwareFile, Link, LinkKind};
use crate::predict::price_classes::{ElementwiseClass, NodeClass, OptimizerKind};
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

/// The profile format versions read: 1 (measured points, fitted when loaded) and 2 (the fitted coefficients
/// stored).
pub const VERSIONS: [u32; 2] = [1, 2];

/// The format version `trainbench calibrate` writes.
pub const WRITTEN_VERSION: u32 = 2;

/// `file` with its coefficients: a version 2 profile's as stored; a version 1 profile (or one built in memory)
/// fitted from its calibration and device figures now, once (`crate::calibrate::fit`).
pub fn with_fitted(mut file: HardwareFile) -> HardwareFile {
    if file.fitted.is_none() {
        file.fitted = Some(crate::calibrate::fit::fitted(&file));
    }
    file
}

/// `file` as `trainbench calibrate` writes it: format version 2, its coefficients fitted from what it holds now.
pub fn as_written(mut file: HardwareFile) -> HardwareFile {
    file.fitted = Some(crate::calibrate::fit::fitted(&file));
    file.version = WRITTEN_VERSION;
    file
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
            (Some(file), d) if !d.iter().any(Diagnostic::is_error) => Ok(with_fitted(file)),
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
        // A name the model does not know: one typed error at its key, in place of the schema's enum message.
        let unknown = unknown_names(display, &form.value);
        for (pointer, unknown) in &unknown {
            let path = FieldPath::from_pointer(pointer, &form.value);
            let loc = load::locate(&root, &path);
            let message = format!("`{path}` = \"{}\" is not a name the model knows", unknown.name);
            let d = sources.diagnostic(&loc.span, &path, message).expected(format!("one of {}", unknown.known));
            out.push(
                d.hint("calibration points are written by `trainbench calibrate`; remove the point, or recalibrate"),
            );
        }
        for error in self.compiled.iter_errors(&form.value).take(crate::spec::diagnostics::MAX_DIAGNOSTICS) {
            if matches!(error.kind(), ValidationErrorKind::PropertyNames { .. }) {
                continue;
            }
            for d in humanizer.explain(&error) {
                let named = unknown
                    .iter()
                    .any(|(pointer, _)| FieldPath::from_pointer(pointer, &form.value).to_string() == d.path);
                if !named && !out.iter().any(|o| o.path == d.path && o.message == d.message) {
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

/// A name in a profile's calibration the model does not know (an element-wise class, a node class, an optimizer
/// kind): the profile is refused when loaded, at this key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {key} = \"{name}\" is not a name the model knows (known: {known})")]
pub struct UnknownName {
    /// The profile file, as shown.
    pub file: String,
    /// Where in the profile (`calibration.elementwise[3].op`).
    pub key: String,
    /// The name found.
    pub name: String,
    /// The names the model knows there, comma-separated.
    pub known: String,
}

/// The names under `calibration` of `profile` (a profile file `file` as JSON) that the model does not know,
/// each with its JSON pointer.
pub fn unknown_names(file: &str, profile: &Value) -> Vec<(String, UnknownName)> {
    let elementwise: Vec<&str> = ElementwiseClass::ALL.iter().map(|c| c.name()).collect();
    let optimizers: Vec<&str> = OptimizerKind::ALL.iter().map(|k| k.name()).collect();
    let node = NodeClass::known();
    let lists = [
        ("elementwise", "op", elementwise.join(", ")),
        ("node", "class", node),
        ("optimizer", "kind", optimizers.join(", ")),
    ];
    let mut found = Vec::new();
    for (list, field, known) in lists {
        let points = profile.pointer(&format!("/calibration/{list}")).and_then(Value::as_array);
        for (i, point) in points.into_iter().flatten().enumerate() {
            let Some(name) = point.get(field).and_then(Value::as_str) else { continue };
            if !known.split(", ").any(|k| k == name) {
                found.push((
                    format!("/calibration/{list}/{i}/{field}"),
                    UnknownName {
                        file: file.to_string(),
                        key: format!("calibration.{list}[{i}].{field}"),
                        name: name.to_string(),
                        known: known.clone(),
                    },
                ));
            }
        }
    }
    found
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
    if !VERSIONS.contains(&f.version) {
        v.push((
            "/version".into(),
            format!("unsupported hardware profile version {}", f.version),
            "write `version = 1` (version 2 is written by `trainbench calibrate`, with its `fitted` table)",
        ));
    }
    match (&f.fitted, f.version) {
        (Some(_), 1) => v.push((
            "/fitted".into(),
            "a version 1 profile holds no fitted coefficients (they are fitted when it is loaded)".into(),
            "write `version = 2`, or remove the `fitted` table",
        )),
        (None, 2) => v.push((
            "/version".into(),
            "a version 2 profile stores its fitted coefficients, and this one has no `fitted` table".into(),
            "write `version = 1` to have it fitted when loaded, or recalibrate",
        )),
        (Some(fitted), 2) => {
            let peaks = &f.device.peak_tflops;
            for (name, peak, stored) in
                [("fp16", peaks.fp16, fitted.fp16.is_some()), ("bf16", peaks.bf16, fitted.bf16.is_some())]
            {
                if peak.is_some() != stored {
                    v.push((
                        format!("/fitted{}", if stored { format!("/{name}") } else { String::new() }),
                        format!("the device's {name} peak and `fitted.{name}` go together: one is missing"),
                        "write `version = 1` and remove the `fitted` table to have it fitted when loaded, or recalibrate",
                    ));
                }
            }
            for (name, c) in
                [("fp32", Some(&fitted.fp32)), ("fp16", fitted.fp16.as_ref()), ("bf16", fitted.bf16.as_ref())]
            {
                if let Some(problem) = c.and_then(|c| c.problem()) {
                    v.push((
                        format!("/fitted/{name}"),
                        format!("the fitted {name} coefficients are not well formed: {problem}"),
                        "write `version = 1` and remove the `fitted` table to have it fitted when loaded, or recalibrate",
                    ));
                }
            }
        }
        _ => {}
    }
    // A measured shape belongs to an attention point: on any other class the fit would set the points aside where
    // nothing reads them.
    let points = f.calibration.as_ref().map_or(&[][..], |c| c.elementwise.as_slice());
    for (i, p) in points.iter().enumerate().filter(|(_, p)| p.attention_shape.is_some() && !p.op.is_attention()) {
        v.push((
            format!("/calibration/elementwise/{i}/attention_shape"),
            format!("`attention_shape` is for attention points only; this point measures `{}`", p.op.name()),
            "remove `attention_shape` from the point, or give it an attention class (attention, attention_causal, \
             attention_cross)",
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
