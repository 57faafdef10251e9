//! The model reads a profile's stored coefficients: every what-if row prices the one analysis of the graph with
//! them and fits nothing; a calibrated profile that was never fitted is refused.

use trainbench_comm::{DataParallel, Interconnect, Topology};
use trainbench_graph::graph::{InputKind, LossKind};
use trainbench_graph::{GraphBuilder, OptimizerSpec, Precision};

use super::error::PredictError;
use super::terms::Terms;
use super::whatif::what_if;
use super::{AnalyzedGraph, Setting, predict};
use crate::hardware::ProfileValidator;
use crate::hardware::wire::HardwareFile;

/// x [1000] -> linear 1000 -> MSE.
fn graph() -> trainbench_graph::Graph {
    let mut b = GraphBuilder::new("stored");
    let x = b.input("x", &[1000], InputKind::Dense).unwrap();
    let y = b.linear("fc", x, 1000, true).unwrap();
    let t = b.input("t", &[1000], InputKind::Dense).unwrap();
    b.loss("loss", LossKind::Mse, &[y, t]).unwrap();
    b.finish(1, "samples").unwrap()
}

/// Parameter servers over Ethernet, 8 machines of one device.
fn setting(strategy: DataParallel) -> Setting {
    Setting {
        batch: 800,
        precision: Precision::Fp32,
        optimizer: OptimizerSpec::default(),
        topology: Topology {
            nodes: 8,
            devices_per_node: 1,
            interconnect: Interconnect::Ethernet,
            ..Topology::on_one_node(strategy, 1)
        },
        schedule: Default::default(),
        numerics: Default::default(),
        pipeline_layers: Vec::new(),
        steps_run: None,
    }
}

#[test]
fn what_if_rows_price_the_stored_coefficients_and_fit_nothing() {
    let g = graph();
    let stored: HardwareFile = ProfileValidator::new().unwrap().resolve("pai-assumed").unwrap().file;
    assert!(stored.fitted.is_some(), "the loader fits a version 1 profile");
    // Half the stored peak: the profile's `fitted` table is what every row prices with.
    let mut slow = stored.clone();
    slow.fitted.as_mut().unwrap().fp32.peak_flop_s /= 2.0;
    let s = setting(DataParallel::ParameterServer { servers: 1 });
    let (base, slow_base) = (predict(&g, &s, &stored).unwrap(), predict(&g, &s, &slow).unwrap());
    assert!(slow_base.phases.forward_s > 1.9 * base.phases.forward_s, "{slow_base:?}");
    let rows = what_if(&AnalyzedGraph::new(&g), &s, &slow, &slow_base, &[], &Terms::all());
    let row = rows.iter().find(|r| r.change.starts_with("strategy: all-reduce")).unwrap();
    let all_reduce = setting(DataParallel::AllReduce);
    assert_eq!(row.step_time_s, Some(predict(&g, &all_reduce, &slow).unwrap().step_time_s));
    assert_ne!(row.step_time_s, Some(predict(&g, &all_reduce, &stored).unwrap().step_time_s));
}

#[test]
fn a_calibrated_profile_that_was_never_fitted_is_refused() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hardware/tch-cpu.toml")).unwrap();
    let unfitted: HardwareFile = toml::from_str(&text).unwrap();
    let s = Setting { topology: Topology::single(), batch: 8, ..setting(DataParallel::Single) };
    let e = predict(&graph(), &s, &unfitted).unwrap_err();
    assert!(matches!(e, PredictError::NotFitted { .. }), "{e}");
    assert!(predict(&graph(), &s, &crate::hardware::load::with_fitted(unfitted)).is_ok());
}
