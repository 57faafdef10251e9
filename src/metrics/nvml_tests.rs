//! Unit tests of the NVML summaries on synthetic samples (no driver needed).
#![allow(clippy::unwrap_used)]

use super::*;

fn sample(t: f64, util: u32, power_w: u32, energy_j: Option<u64>) -> GpuSample {
    GpuSample {
        t,
        util_gpu: Some(util),
        util_mem: Some(util / 2),
        mem_used: Some(1000 + util as u64),
        process_mem: Some(500),
        power_mw: Some(power_w * 1000),
        energy_mj: energy_j.map(|j| j * 1000),
        sm_clock_mhz: Some(1500),
        temp_c: Some(40 + util / 10),
    }
}

#[test]
fn selectors_map_to_targets() {
    let target = |s: &str| GpuTarget::from_selector(s.parse().unwrap(), None);
    assert_eq!(target("cuda").unwrap().cuda_ordinal, 0);
    assert_eq!(target("cuda:3").unwrap().cuda_ordinal, 3);
    assert!(target("cpu").is_none());
    assert!(target("wgpu:0").is_none());
}

#[test]
fn utilisation_uses_samples_inside_the_window() {
    let s =
        [sample(0.0, 0, 50, None), sample(1.0, 80, 200, None), sample(2.0, 100, 300, None), sample(3.0, 0, 50, None)];
    let Sampled::Available(u) = summarize_utilization(&s, 0, 0.5, 2.5) else { panic!() };
    assert_eq!(u.samples, 2);
    assert_eq!(u.utilization_mean_percent, 90.0);
    assert_eq!(u.utilization_max_percent, 100.0);
    assert_eq!(u.memory_utilization_mean_percent, 45.0);
    assert_eq!(u.memory_used_max_bytes, 1100);
    assert_eq!(u.process_memory_max_bytes, Some(500));
    assert_eq!(u.temperature_max_c, 50.0);
}

#[test]
fn a_window_between_two_samples_uses_both_neighbours() {
    let s = [sample(0.0, 40, 100, None), sample(1.0, 60, 100, None)];
    let Sampled::Available(u) = summarize_utilization(&s, 0, 0.2, 0.4) else { panic!() };
    assert_eq!((u.samples, u.utilization_mean_percent), (2, 50.0));
}

#[test]
fn power_from_the_energy_counter() {
    // 600 J between t = 0 and t = 3: 200 W, whatever the instantaneous readings say.
    let s = [sample(0.0, 0, 10, Some(1000)), sample(1.5, 0, 999, Some(1300)), sample(3.0, 0, 10, Some(1600))];
    let p = summarize_power(&s, 0.1, 2.9).unwrap();
    assert_eq!(p.method, "counter");
    assert_eq!(p.mean_w, 200.0);
    assert_eq!(p.max_w, 999.0);
}

#[test]
fn power_integrated_without_a_counter() {
    // Trapezoid: (100 + 300)/2 over 1 s, then (300 + 300)/2 over 1 s -> 500 J over 2 s = 250 W.
    let s = [sample(0.0, 0, 100, None), sample(1.0, 0, 300, None), sample(2.0, 0, 300, None)];
    let p = summarize_power(&s, 0.0, 2.0).unwrap();
    assert_eq!(p.method, "integrated");
    assert_eq!(p.mean_w, 250.0);
    assert!(summarize_power(&s[..1], 0.0, 2.0).is_err());
}

#[test]
fn inventory_degrades_without_a_driver() {
    match inventory() {
        Sampled::Available(inv) => assert!(!inv.driver_version.is_empty()),
        Sampled::Unavailable { reason } => assert!(reason.contains("NVML"), "{reason}"),
    }
}
