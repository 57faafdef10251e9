//! The GPU profiles built from published micro-benchmark figures (`validation/profiles/`) and the published
//! training rows that judge them (`validation/published_rows.toml`): every profile validates and every figure in
//! it names its source; the rows file keeps at most a third of its rows for tuning, and every predictable row
//! names a spec and a GPU that has a published profile.
#![allow(clippy::unwrap_used)]

use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn every_published_profile_validates_and_every_figure_names_its_source() {
    let v = trainbench::hardware::ProfileValidator::new().unwrap();
    for gpu in ["a100", "h100", "h200", "b200"] {
        let name = format!("validation/profiles/{gpu}-published.toml");
        let f = v.check_file(&Path::new(ROOT).join(&name), &name).unwrap();
        let cal = f.calibration.as_ref().unwrap();
        assert_eq!(cal.backend, "published", "{name}");
        assert!(!cal.gemm.is_empty(), "{name}: a GEMM curve");
        let sources =
            cal.gemm.iter().chain(&cal.attention).map(|p| &p.source).chain(cal.bandwidth.iter().map(|p| &p.source));
        for s in sources {
            assert!(s.as_ref().is_some_and(|s| s.len() > 20), "{name}: a figure without its source");
        }
    }
}

#[test]
fn the_published_rows_tune_at_most_a_third_and_name_what_they_predict_on() {
    let text = std::fs::read_to_string(Path::new(ROOT).join("validation/published_rows.toml")).unwrap();
    let rows: toml::Value = toml::from_str(&text).unwrap();
    let rows = rows["row"].as_array().unwrap();
    let tune = rows.iter().filter(|r| r["role"].as_str() == Some("tune")).count();
    assert!(rows.iter().all(|r| matches!(r["role"].as_str(), Some("tune" | "judge"))));
    assert!(3 * tune <= rows.len(), "{tune} of {} rows tune", rows.len());
    for r in rows.iter().filter(|r| r["predictable"].as_bool() == Some(true)) {
        let spec = r["spec"].as_str().unwrap();
        assert!(Path::new(ROOT).join(spec).is_file(), "{spec}");
        let gpu = r["hardware"].as_str().unwrap();
        assert!(Path::new(ROOT).join(format!("validation/profiles/{gpu}-published.toml")).is_file(), "{gpu}");
        assert!(r["published"].as_float().unwrap() > 0.0 && r["source"].as_str().is_some());
    }
}
