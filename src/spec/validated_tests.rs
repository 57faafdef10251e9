//! Unit tests of [`ValidatedSpec`]: the canonical form, its hash and the overrides it records.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::spec::diagnostics;
use crate::spec::overrides::Overrides;
use crate::spec::validate::SpecValidator;

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
    let a = validate("version = 1\nname = \"c\"\n[model]\nfamily = \"transformer\"\n[sweep]\nbatch_sizes = [2, 4]\n");
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
