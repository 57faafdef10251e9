//! What the first node of a kind costs in a training step beyond the same node repeated: its code, its
//! dispatch tables and its branch history are cold when it starts, where the nodes of its kind after it find them
//! warm. A step of a small model on a CPU pays this once per kind in each phase, and it is most of what a kind run
//! once per step costs (an embedding, a loss, a pooling before the classifier), several times what the same node
//! costs repeated.
//!
//! Measured through the backend for each element-wise class at its smallest measured size, and for two kinds
//! without a class that stand for the others (`linear`: a linear layer, 64 -> 64; `add`: a plain element-wise
//! kernel, a tensor added to itself): the micro-graph (`elementwise::graph_after`, input [16, 64] -> linear -> the
//! nodes -> MSE at batch 1) with one and with [`ELEMENTWISE_STACK`] nodes, each against the graph without them,
//! in the same rounds. With `t1` the phase time one copy adds and `tS` what `S` copies add, a repeated node costs
//! `(tS - t1) / (S - 1)` and the first `t1` less that. A pass over 4 MiB of other data runs just before the
//! operations, so that they start as they would in a step that moves more than the caches hold.

use trainbench_contract::{Backend, DeviceSelector};

use super::elementwise::{self, ELEMENTWISE_STACK as STACK};
use crate::hardware::wire::NodePoint;
use crate::predict::price_classes::{ElementwiseClass, FirstKind, NodeClass};

/// Rounds per measurement (the median is kept): more than the other micro-graphs', the cost being the difference
/// of two differences.
const ROUNDS: usize = 5;

/// The class under which the first-node cost of `kind` is recorded (`calibration.node`).
pub fn point_class(kind: FirstKind) -> NodeClass {
    NodeClass::First(kind)
}

/// The kinds measured: every element-wise class but cross-entropy (a step has one loss), then the stand-ins.
pub fn classes() -> impl Iterator<Item = FirstKind> {
    FirstKind::all().filter(|k| *k != FirstKind::Class(ElementwiseClass::CrossEntropy))
}

/// Measure the first-node cost of every class of [`classes`] the backend runs; the classes it refuses are
/// returned as `(class, reason)` beside the points.
pub fn measure(
    backend: &mut dyn Backend,
    device: DeviceSelector,
    cpu_threads: Option<u32>,
    cpu_clock: bool,
) -> (Vec<NodePoint>, Vec<(String, String)>) {
    let (mut points, mut skipped) = (Vec::new(), Vec::new());
    for kind in classes() {
        let class = kind.name();
        let graph = |copies: usize| elementwise::graph_after(kind, copies, true);
        let (base, one, many) = match (graph(0), graph(1), graph(STACK)) {
            (Ok(b), Ok(o), Ok(m)) => (b, o, m),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                skipped.push((class.to_string(), e));
                continue;
            }
        };
        let plan = elementwise::plan(device, cpu_threads, elementwise::batches(kind, device)[0]);
        let withs = [(&one, 1.0), (&many, STACK as f64)];
        let measured = super::harness::per_added_nodes(backend, &plan, &base, &withs, cpu_clock, ROUNDS);
        match measured {
            Ok(per) => {
                let (first, mean) = (per[0], per[1]);
                let s = STACK as f64;
                // S x mean = first + (S - 1) x repeated.
                let extra = |first: f64, mean: f64| (first - (s * mean - first) / (s - 1.0)).max(0.0);
                points.push(NodePoint {
                    class: point_class(kind),
                    forward_s: extra(first.forward, mean.forward),
                    backward_s: extra(first.backward, mean.backward),
                });
            }
            Err(e) => skipped.push((class.to_string(), e.to_string())),
        }
    }
    (points, skipped)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_mock_backend_measures_every_class_after_the_flushing_pass() {
        for kind in classes() {
            let class = kind.name();
            let g = elementwise::graph_after(kind, 1, true).unwrap();
            let flush = g.nodes.iter().position(|n| n.name == "flush").unwrap();
            let op = g.nodes.iter().position(|n| n.name.starts_with(class)).unwrap();
            assert!(flush < op, "{class}: the flushing pass runs first");
            assert_eq!(g.nodes.len(), elementwise::graph_after(kind, 0, true).unwrap().nodes.len() + 1, "{class}");
        }
        let mut mock = trainbench_contract::mock::MockBackend::new(Default::default());
        let (points, skipped) = measure(&mut mock, DeviceSelector::Cpu, None, false);
        assert!(skipped.is_empty(), "{skipped:?}");
        let names: Vec<NodeClass> = points.iter().map(|p| p.class).collect();
        assert_eq!(names, classes().map(point_class).collect::<Vec<_>>());
    }
}
