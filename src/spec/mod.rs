//! The spec stage: TOML text -> [`wire::SpecFile`] (with spans) -> [`ValidatedSpec`], with located diagnostics.
//!
//! Entry points: [`SpecValidator`] (reuse one for many files) or [`load_spec`] for a single file.

pub mod diagnostics;
pub mod humanize;
pub mod load;
pub mod overrides;
pub mod path;
pub mod rules;
pub mod schema;
pub mod validate;
pub mod wire;

use std::path::{Path, PathBuf};

use trainbench_contract::DeviceSelector;
use trainbench_graph::Graph;

pub use diagnostics::{Diagnostic, Severity};
pub use overrides::Overrides;
pub use validate::{Checked, SpecValidator};
pub use wire::SpecFile;

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
    fn new(spec: SpecFile, graph: Graph, device: DeviceSelector, overrides: Vec<String>) -> Self {
        let canonical = canonical_toml(&spec);
        let sha256 = crate::format::sha256_hex(&canonical);
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

/// Validate one spec file with `overrides` (the convenience entry point for commands that take one spec).
pub fn load_spec(path: &Path, overrides: &Overrides) -> Result<ValidatedSpec, Vec<Diagnostic>> {
    let validator =
        SpecValidator::new().map_err(|e| vec![Diagnostic::error(path.display().to_string(), e.to_string())])?;
    validator.check_file(path, &path.display().to_string(), overrides).into_result()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn validate(text: &str) -> ValidatedSpec {
        let v = SpecValidator::new().unwrap();
        let checked = v.check_bytes("t.toml", text.as_bytes(), None, &Overrides::none());
        checked.spec.unwrap_or_else(|| panic!("{}", diagnostics::render_text(&checked.diagnostics)))
    }

    #[test]
    fn canonical_form_ignores_layout_comments_and_written_defaults() {
        let a = validate("version = 1\nname = \"c\"\n[model]\nfamily = \"mlp\"\n");
        let b = validate(
            "# a comment\nname = \"c\"\nversion = 1\nmodel = { family = \"mlp\", inputs = 784 }\n[run]\nwarmup = 10\n",
        );
        assert_eq!(a.canonical_toml(), b.canonical_toml());
        assert_eq!(a.sha256(), b.sha256());
        assert_eq!(a.sha256().len(), 64);
        let c = validate("version = 1\nname = \"c\"\n[model]\nfamily = \"mlp\"\n[run]\nwarmup = 11\n");
        assert_ne!(a.sha256(), c.sha256());
    }

    #[test]
    fn canonical_form_reads_back_to_the_same_spec() {
        let a =
            validate("version = 1\nname = \"c\"\n[model]\nfamily = \"transformer\"\n[sweep]\nbatch_sizes = [2, 4]\n");
        let back: SpecFile = toml::from_str(a.canonical_toml()).unwrap();
        assert_eq!(&back, a.spec());
    }

    #[test]
    fn overrides_are_part_of_the_spec_and_recorded() {
        let v = SpecValidator::new().unwrap();
        let o = Overrides::parse(&["run.iterations=70".to_string()]).unwrap();
        let text = "version = 1\nname = \"c\"\n[model]\nfamily = \"mlp\"\n";
        let s = v.check_bytes("t.toml", text.as_bytes(), None, &o).spec.unwrap();
        assert_eq!(s.spec().run.iterations, 70);
        assert_eq!(s.overrides(), ["run.iterations=70"]);
        assert!(s.canonical_toml().contains("iterations = 70"));
    }
}
