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

const CALIBRATED: &str = include_str!("../../tests/fixtures/hardware/tch-cpu.toml");

#[test]
fn an_unknown_name_is_refused_at_load_naming_the_file_and_the_key() {
    let v = ProfileValidator::new().unwrap();
    let cases = [
        ("op = \"dropout\"", "op = \"swish\"", "calibration.elementwise[0].op", "max_pool"),
        ("class = \"elementwise\"", "class = \"first-conv2d\"", "calibration.node[0].class", "first-add"),
        ("kind = \"sgd\"", "kind = \"lamb\"", "calibration.optimizer[0].kind", "sgd-momentum-decay"),
    ];
    for (good, bad, key, a_known_name) in cases {
        assert!(CALIBRATED.contains(good), "{good}");
        let text = CALIBRATED.replacen(good, bad, 1);
        let e = v.check_bytes("cal.toml", text.as_bytes()).unwrap_err();
        let d = e.iter().find(|d| d.path == key).unwrap_or_else(|| panic!("{key}: {e:?}"));
        assert!(d.file == "cal.toml" && d.line.is_some(), "{d:?}");
        assert!(d.expected.as_deref().unwrap_or("").contains(a_known_name), "{d:?}");
        assert_eq!(e.iter().filter(|d| d.path == key).count(), 1, "one error per key: {e:?}");
        let value: serde_json::Value = serde_json::to_value(toml::from_str::<toml::Value>(&text).unwrap()).unwrap();
        let unknown = load::unknown_names("cal.toml", &value);
        assert_eq!(unknown.len(), 1, "{unknown:?}");
        let message = unknown[0].1.to_string();
        assert!(message.starts_with("cal.toml: ") && message.contains(key) && message.contains(a_known_name));
    }
}

#[test]
fn an_attention_shape_on_a_point_that_is_not_attention_is_refused_where_it_is_written() {
    let good = "op = \"dropout\"\nelements = 1024.0\nforward_s = 0.000037196604390189054\nbackward_s = 0.00001309628069467809\n";
    assert!(CALIBRATED.contains(good));
    let text = CALIBRATED.replacen(
        good,
        &format!("{good}\n[calibration.elementwise.attention_shape]\npositions = 128\nhead_dim = 64\n"),
        1,
    );
    let e = errors(&text);
    let d =
        e.iter().find(|d| d.path == "calibration.elementwise[0].attention_shape").unwrap_or_else(|| panic!("{e:?}"));
    assert!(d.line.is_some() && d.message.contains("`dropout`"), "{d:?}");
    assert!(d.hint.as_deref().unwrap_or("").contains("attention_causal"), "{d:?}");
    // On an attention point the same shape is what the fit reads.
    let attention = text.replacen("op = \"dropout\"", "op = \"attention\"", 1);
    let v = ProfileValidator::new().unwrap();
    assert!(v.check_bytes("t.toml", attention.as_bytes()).is_ok());
}

#[test]
fn a_version_1_profile_is_fitted_at_load_and_written_as_version_2_it_reads_back_the_same() {
    let v = ProfileValidator::new().unwrap();
    let loaded = v.check_bytes("cal.toml", CALIBRATED.as_bytes()).unwrap();
    assert_eq!(loaded.version, 1);
    let fitted = loaded.fitted.clone().unwrap();
    assert!(fitted.fp32.nodes.is_some() && fitted.bf16.is_some());
    let written = load::as_written(loaded.clone());
    assert_eq!(written.version, load::WRITTEN_VERSION);
    let text = toml::to_string(&written).unwrap();
    let read = v.check_bytes("v2.toml", text.as_bytes()).unwrap_or_else(|d| panic!("{d:?}"));
    assert_eq!(read.fitted.as_ref(), Some(&fitted), "the stored coefficients read back bit for bit");
    assert_eq!(read, written);
    // A datasheet profile is fitted to its figures.
    let minimal = v.check_bytes("t.toml", MINIMAL.as_bytes()).unwrap();
    assert_eq!(minimal.fitted.unwrap().fp32.peak_flop_s, 10e12);
}

#[test]
fn the_version_and_the_fitted_table_go_together() {
    let v = ProfileValidator::new().unwrap();
    let written = load::as_written(v.check_bytes("cal.toml", CALIBRATED.as_bytes()).unwrap());
    let text = toml::to_string(&written).unwrap();
    let e = errors(&text.replacen("version = 2", "version = 1", 1));
    assert!(e.iter().any(|d| d.path == "fitted"), "{e:?}");
    let mut unfitted = written.clone();
    unfitted.fitted = None;
    let e = errors(&toml::to_string(&unfitted).unwrap());
    assert!(e.iter().any(|d| d.path == "version" && d.message.contains("fitted")), "{e:?}");
    let mut no_bf16 = written.clone();
    no_bf16.fitted.as_mut().unwrap().bf16 = None;
    let e = errors(&toml::to_string(&no_bf16).unwrap());
    assert!(e.iter().any(|d| d.path == "fitted" && d.message.contains("bf16")), "{e:?}");
    // Coefficients the lookups could not read (a curve out of order) are refused, not read.
    let mut unsorted = written;
    unsorted.fitted.as_mut().unwrap().fp32.bandwidth.reverse();
    let e = errors(&toml::to_string(&unsorted).unwrap());
    assert!(e.iter().any(|d| d.path == "fitted.fp32" && d.message.contains("bandwidth")), "{e:?}");
    let e = errors(&MINIMAL.replace("version = 1", "version = 3"));
    assert!(e.iter().any(|d| d.path == "version"), "{e:?}");
}

#[test]
fn a_convolution_class_with_its_channel_counts_out_of_order_or_a_share_not_above_0_is_refused() {
    use crate::predict::conv_classes::{ChannelShare, ConvClass, ConvClassRate};
    let v = ProfileValidator::new().unwrap();
    let written = load::as_written(v.check_bytes("cal.toml", CALIBRATED.as_bytes()).unwrap());
    let at = |channels, forward| ChannelShare { channels, forward, backward: forward / 2.0 };
    let class = ConvClass { kernel: 1, stride: 1, transposed: false };
    let one = ConvClassRate { class, forward: 0.5, backward: 0.25, by_channels: vec![at(8.0, 0.2), at(128.0, 1.0)] };
    let with = |by_channels: Vec<ChannelShare>| {
        let mut p = written.clone();
        p.fitted.as_mut().unwrap().fp32.conv_classes = vec![ConvClassRate { by_channels, ..one.clone() }];
        v.check_bytes("t.toml", toml::to_string(&p).unwrap().as_bytes())
    };
    assert!(with(one.by_channels.clone()).is_ok());
    for bad in [vec![at(128.0, 1.0), at(8.0, 0.2)], vec![at(8.0, 0.0)], vec![at(0.0, 0.2)]] {
        let e = with(bad.clone()).unwrap_err();
        assert!(e.iter().any(|d| d.path == "fitted.fp32" && d.message.contains("convolution class")), "{bad:?}: {e:?}");
    }
}
