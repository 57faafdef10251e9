//! Unit tests of what the plots share: the legend's rows and the axis labels.

use super::*;

#[test]
fn legends_wrap_into_rows() {
    let entries: Vec<(String, Mark)> = (0..8).map(|i| (format!("entry number {i}"), Mark::Block(color(i)))).collect();
    let legend = Legend::new(entries, WIDTH);
    let rows: std::collections::BTreeSet<i32> = legend.placed.iter().map(|(_, _, (_, y))| *y).collect();
    assert!(rows.len() >= 3, "{rows:?}");
    assert!(legend.placed.iter().all(|(l, _, (x, _))| x + 24 + text_width(l) <= WIDTH as i32));
    assert_eq!(Legend::new(Vec::new(), WIDTH).height, 0);
}

#[test]
fn ticks_are_short() {
    assert_eq!(tick(0.0), "0");
    assert_eq!(tick(5.0), "5");
    assert_eq!(tick(2.5), "2.5");
    assert_eq!(tick(100_000.0), "100k");
    assert_eq!(tick(12_500.0), "12.5k");
    assert_eq!(tick(2_000_000.0), "2M");
    assert_eq!(tick(0.0012), "0.001");
}

#[test]
fn a_single_value_gets_two_octaves_and_whole_ticks() {
    assert_eq!(log2_range(8.0, 8.0), (4.0, 16.0));
    assert_eq!(log2_range(4.0, 64.0), (4.0 / 1.5, 96.0));
    assert_eq!((count_tick(8.0), count_tick(9.6), count_tick(11.2)), ("8".into(), String::new(), String::new()));
    let one = Segments::of(1);
    assert_eq!(one.range(), 0..2);
    assert!(matches!((one.start(0), one.end(0)), (SegmentValue::Exact(0), SegmentValue::Last)));
    let labels = vec!["8".to_string()];
    let at = |j| one.label(&labels, &SegmentValue::CenterOf(j));
    assert_eq!((at(0), at(1), at(2)), (String::new(), "8".to_string(), String::new()));
    let five = Segments::of(5);
    assert_eq!(five.range(), 0..4);
    assert!(matches!((five.start(2), five.end(2)), (SegmentValue::Exact(2), SegmentValue::Exact(3))));
}

#[test]
fn titles_go_first() {
    let svg = with_title("<svg a=\"1\">\n<rect/></svg>".to_string(), "T & <b>");
    assert!(svg.starts_with("<svg a=\"1\">\n<title>T &amp; &lt;b&gt;</title>"));
}
