//! Tests of the load check with synthetic readings: the decision never depends on the host it runs on.
#![allow(clippy::unwrap_used)]

use super::*;

fn quiet() -> LoadReading {
    LoadReading {
        cores: 2,
        others_per_core: 0.05,
        steal_share: Some(0.0),
        probe_cv: Some(0.03),
        probe_drift: Some(0.02),
        probes: 40,
    }
}

#[test]
fn a_quiet_reading_passes_and_is_marked_quiet() {
    let limits = LoadLimits::default();
    assert!(quiet().excesses(&limits).is_empty());
    assert!(check(&quiet(), &limits, false, "while calibrating").is_ok());
    let mark = quiet().mark(&limits, false);
    assert!(!mark.loaded && mark.exceeded.is_empty() && mark.cores == 2);
}

#[test]
fn a_loaded_reading_is_refused_naming_each_figure_and_its_limit() {
    let limits = LoadLimits::default();
    // Two other processes on two cores, 5% steal, a probe stretched by scheduler slices.
    let loaded = LoadReading { others_per_core: 1.0, steal_share: Some(0.05), probe_cv: Some(0.6), ..quiet() };
    let err = check(&loaded, &limits, false, "before calibrating").unwrap_err();
    assert_eq!(err.exceeded.len(), 3);
    let text = err.to_string();
    for part in [
        "before calibrating",
        "others' load per core 1.000 > 0.250",
        "steal 0.050 > 0.020",
        "probe spread 0.600 > 0.150",
        "--allow-loaded",
    ] {
        assert!(text.contains(part), "{part} missing from: {text}");
    }
    // Allowed: stored, and the mark says why.
    assert!(check(&loaded, &limits, true, "while calibrating").is_ok());
    let mark = loaded.mark(&limits, true);
    assert!(mark.loaded && mark.allowed_loaded && mark.exceeded.len() == 3);
    assert_eq!(mark.limit_probe_cv, 0.15);
}

#[test]
fn one_figure_over_its_limit_is_enough_and_unknown_figures_count_as_within() {
    let limits = LoadLimits::default();
    let spread = LoadReading { probe_cv: Some(0.2), ..quiet() };
    assert_eq!(spread.excesses(&limits).iter().map(|e| e.figure).collect::<Vec<_>>(), ["probe spread"]);
    let unknown = LoadReading { steal_share: None, probe_cv: None, ..quiet() };
    assert!(unknown.excesses(&limits).is_empty());
}

#[test]
fn proc_files_are_read_and_others_load_excludes_the_calibrations_own() {
    assert_eq!(parse_loadavg("2.75 2.61 2.32 3/812 99\n"), Some(2.75));
    assert_eq!(parse_loadavg("garbage"), None);
    assert_eq!(parse_loadavg(""), None);
    let a = parse_stat("cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n").unwrap();
    assert_eq!(a, CpuTicks { total: 1000, steal: 40 });
    let b = CpuTicks { total: 2000, steal: 90 };
    assert_eq!(steal_share(a, b), Some(0.05));
    assert_eq!(steal_share(a, a), None);
    assert_eq!(parse_stat("intr 1 2 3"), None);
    assert_eq!(parse_stat("cpu  1 2 x 4 5 6 7 8"), None);
    // The calibration's own thread is not other work; the figure never goes negative.
    assert_eq!(others_per_core(2.75, 1.0, 2), 0.875);
    assert_eq!(others_per_core(0.5, 1.0, 2), 0.0);
}

#[test]
fn the_spread_is_the_coefficient_of_variation() {
    assert_eq!(coefficient_of_variation(&[1.0]), None);
    assert_eq!(coefficient_of_variation(&[0.0, 0.0]), None);
    assert_eq!(coefficient_of_variation(&[2.0, 2.0, 2.0]), Some(0.0));
    let cv = coefficient_of_variation(&[1.0, 3.0]).unwrap();
    assert!((cv - 2f64.sqrt() / 2.0).abs() < 1e-12);
}

#[test]
fn the_drift_is_the_spread_of_the_checkpoints_medians_in_log() {
    // Three checkpoints of five timings: medians 1, 2 and 4 whatever the odd stretched timing.
    let timings = [1.0, 1.0, 9.0, 1.0, 0.9, 2.0, 2.1, 2.0, 1.9, 50.0, 4.0, 4.0, 3.9, 4.2, 4.0];
    let drift = checkpoint_drift(&timings, 5).unwrap();
    // ln 1, ln 2, ln 4: mean ln 2, sample variance ((ln 2)^2 + 0 + (ln 2)^2) / 2.
    assert!((drift - 2f64.ln()).abs() < 1e-12, "{drift}");
    // One speed throughout, however spiky: no drift.
    assert_eq!(checkpoint_drift(&[1.0, 1.0, 7.0, 1.0, 1.0, 1.0], 3), Some(0.0));
    // A trailing incomplete checkpoint is left out; one checkpoint, or none, gives nothing.
    assert_eq!(checkpoint_drift(&[1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 99.0], 3), checkpoint_drift(&[1.0, 2.0], 1));
    assert_eq!(checkpoint_drift(&[1.0, 1.0, 1.0], 3), None);
    assert_eq!(checkpoint_drift(&[], 5), None);
    assert_eq!(checkpoint_drift(&[1.0, 2.0], 0), None);
    assert_eq!(checkpoint_drift(&[0.0, 1.0], 1), None);
    // It is kept in the mark, judged against no limit.
    let drifting = LoadReading { probe_drift: Some(0.4), ..quiet() };
    let mark = drifting.mark(&LoadLimits::default(), false);
    assert!(!mark.loaded && mark.probe_drift == Some(0.4));
}
