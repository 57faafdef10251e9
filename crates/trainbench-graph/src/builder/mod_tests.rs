//! Shape-inference tests of the builder.

use super::*;

#[test]
fn conv_and_pool_shapes_follow_pytorch() {
    let mut b = GraphBuilder::new("t");
    let x = b.input("x", &[3, 224, 224], InputKind::Dense).unwrap();
    let c = b.conv("conv1", x, ConvCfg::square(64, 7, 2, 3)).unwrap();
    assert_eq!(b.shape(c).0, vec![64, 112, 112]);
    let p = b.pool("pool", c, PoolKind::Max, 3, 2, 1).unwrap();
    assert_eq!(b.shape(p).0, vec![64, 56, 56]);
    let t = b.conv("up", p, ConvCfg::square(32, 4, 2, 1).transposed()).unwrap();
    assert_eq!(b.shape(t).0, vec![32, 112, 112]);
}

#[test]
fn linear_width_mismatch_names_both_widths() {
    let mut b = GraphBuilder::new("t");
    let x = b.input("x", &[100], InputKind::Dense).unwrap();
    let e = b.linear_checked("fc", x, 128, 10, true).unwrap_err();
    assert!(e.message.contains("128") && e.message.contains("100"), "{e}");
}

#[test]
fn ceil_mode_pool_matches_inception() {
    let mut b = GraphBuilder::new("t");
    let x = b.input("x", &[3, 147, 147], InputKind::Dense).unwrap();
    let p = b.pool_nd("p", x, PoolKind::Max, vec![3, 3], vec![2, 2], vec![0, 0], true).unwrap();
    assert_eq!(b.shape(p).0, vec![3, 73, 73]);
}
