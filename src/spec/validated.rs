//! [`ValidatedSpec`]: a spec that passed every check, with its canonical form, hash and workload graph; what
//! plan, run and results take.

use std::path::{Path, PathBuf};

use trainbench_contract::DeviceSelector;
use trainbench_graph::Graph;

use super::diagnostics::Diagnostic;
use super::wire::{self, SpecFile};

/// A spec that passed every check: the typed spec, where it came from, its canonical form and hash, and the
/// model's workload graph. The rest of the pipeline (plan, run, results) takes this type.
#[derive(Debug, Clone)]
pub struct ValidatedSpec {
    spec: SpecFile,
    pub(crate) source: Option<PathBuf>,
    /// The folder relative dataset paths were resolved against when validated (`None` from memory).
    pub(crate) base_dir: Option<PathBuf>,
    overrides: Vec<String>,
    canonical: String,
    sha256: String,
    graph: Graph,
    device: DeviceSelector,
    pub(crate) warnings: Vec<Diagnostic>,
}

impl ValidatedSpec {
    /// A validated spec of `spec` with its graph, device and the overrides applied; canonical form and hash
    /// computed here.
    pub(crate) fn new(spec: SpecFile, graph: Graph, device: DeviceSelector, overrides: Vec<String>) -> Self {
        let canonical = canonical_toml(&spec);
        let sha256 = crate::digest::sha256_hex(&canonical);
        Self { spec, source: None, base_dir: None, overrides, canonical, sha256, graph, device, warnings: Vec::new() }
    }

    /// The typed spec, defaults filled in and overrides applied.
    pub fn spec(&self) -> &SpecFile {
        &self.spec
    }

    /// The benchmark name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The spec file it was read from (`None` when checked from memory).
    pub fn source(&self) -> Option<&Path> {
        self.source.as_deref()
    }

    /// The `--set` overrides applied, in order (already part of [`Self::spec`] and the canonical form).
    pub fn overrides(&self) -> &[String] {
        &self.overrides
    }

    /// The canonical TOML form: every field written out with defaults filled in, in a fixed order. Two specs
    /// that mean the same benchmark have the same canonical form, whatever their layout, comments or defaults.
    pub fn canonical_toml(&self) -> &str {
        &self.canonical
    }

    /// SHA-256 of [`Self::canonical_toml`], lower-case hex (64 characters).
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// `topology.device`, parsed when the spec was validated.
    pub fn device(&self) -> DeviceSelector {
        self.device
    }

    /// The model's training graph, as built by the zoo.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The local dataset's folder (`dataset.path` resolved against the spec's folder, or as written when the
    /// spec was checked from memory); `None` for synthetic data.
    pub fn dataset_root(&self) -> Option<PathBuf> {
        if self.spec.dataset.source != wire::DataSource::Local {
            return None;
        }
        let path = Path::new(self.spec.dataset.path.as_deref()?);
        let joined = match &self.base_dir {
            Some(base) => base.join(path),
            None => path.to_path_buf(),
        };
        Some(std::path::absolute(&joined).unwrap_or(joined))
    }

    /// The folder of the evaluation split (`dataset.eval_path`) of a local dataset, resolved like
    /// [`ValidatedSpec::dataset_root`]; `None` without one.
    pub fn eval_root(&self) -> Option<PathBuf> {
        if self.spec.dataset.source != wire::DataSource::Local {
            return None;
        }
        let path = Path::new(self.spec.dataset.eval_path.as_deref()?);
        let joined = match &self.base_dir {
            Some(base) => base.join(path),
            None => path.to_path_buf(),
        };
        Some(std::path::absolute(&joined).unwrap_or(joined))
    }

    /// Warnings found while validating (the spec is valid regardless).
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }
}

/// Serialize a spec to TOML; the types only hold TOML-representable values (integers are bounded by the schema,
/// floats are finite), so this does not fail in practice; JSON is the fallback so a hash always exists.
fn canonical_toml(spec: &SpecFile) -> String {
    toml::to_string(spec).unwrap_or_else(|_| serde_json::to_string(spec).unwrap_or_default())
}

#[cfg(test)]
#[path = "validated_tests.rs"]
mod tests;
