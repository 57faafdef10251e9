//! Tests of hardware profile loading: shipped profiles validate, problems are located.

use super::*;

const MINIMAL: &str = "version = 1\nkind = \"hardware\"\nname = \"t\"\n[device]\nname = \"d\"\nkind = \"gpu\"\n\
                       peak_tflops = { fp32 = 10.0 }\nmemory_bandwidth_gbs = 500.0\nmemory_gib = 16.0\n";

fn errors(text: &str) -> Vec<Diagnostic> {
    ProfileValidator::new().unwrap().check_bytes("t.toml", text.as_bytes()).unwrap_err()
}

#[test]
fn every_shipped_profile_validates() {
    let v = ProfileValidator::new().unwrap();
    for (name, text) in SHIPPED {
        let f = v.check_bytes(name, text.as_bytes()).unwrap_or_else(|d| panic!("{name}: {d:?}"));
        assert_eq!(&f.name, name, "a shipped profile's name is its file name");
        assert!(looks_like_profile(text));
    }
    assert_eq!(v.shipped().len(), SHIPPED.len());
}

#[test]
fn a_minimal_profile_validates_and_resolves_by_name() {
    let v = ProfileValidator::new().unwrap();
    let f = v.check_bytes("t.toml", MINIMAL.as_bytes()).unwrap();
    assert!(f.host_link.is_none() && f.network.is_none());
    assert_eq!(v.resolve("v100").unwrap().origin, "shipped:v100");
    let e = v.resolve("no-such-gpu").unwrap_err();
    assert!(e[0].expected.as_deref().unwrap().contains("pai-assumed"), "{e:?}");
}

#[test]
fn unknown_keys_are_located_with_a_suggestion() {
    let text = MINIMAL.replace("memory_gib", "memory_gb");
    let e = errors(&text);
    let d = e.iter().find(|d| d.message.contains("memory_gb")).unwrap_or_else(|| panic!("{e:?}"));
    assert_eq!(d.line, Some(9));
    assert!(d.hint.as_deref().unwrap_or("").contains("memory_gib"), "{d:?}");
}

#[test]
fn figures_must_be_positive_and_links_fit_their_role() {
    let text = format!("{MINIMAL}[network]\nkind = \"nvlink\"\nname = \"n\"\nbandwidth_gbs = 0.0\n",);
    let e = errors(&text);
    let bw = e.iter().find(|d| d.path == "network.bandwidth_gbs").unwrap_or_else(|| panic!("{e:?}"));
    assert_eq!(bw.line, Some(13));
    let role = e.iter().find(|d| d.path == "network.kind").unwrap_or_else(|| panic!("{e:?}"));
    assert!(role.message.contains("ethernet, infiniband"), "{role:?}");
}

#[test]
fn a_spec_is_not_a_profile() {
    assert!(!looks_like_profile("version = 1\nname = \"x\"\n[model]\nfamily = \"mlp\"\n"));
    assert!(looks_like_profile("#:schema ../schema/hardware.schema.json\nversion = = 1\n"));
}
