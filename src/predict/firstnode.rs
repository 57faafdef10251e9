//! What the first node of a kind costs in a training step beyond the same node repeated: its code, its
//! dispatch tables and its branch history are cold when it starts, where the nodes of its kind after it find them
//! warm. A step of a small model on a CPU pays this once per kind in each phase, and it is most of what a kind run
//! once per step costs (an embedding, a loss, a pooling before the classifier: 10-45 us each on the development
//! machine against 1-5 us for the same node repeated).
//!
//! Measured through the backend for each element-wise class at its smallest measured size: the class's micro-graph
//! (`elementwise::graph_after`) with one and with [`elementwise::STACK`] copies, each against the graph without
//! the operation. With `t1` the phase time one copy adds and `tS` what `S` copies add, a repeated node costs
//! `(tS - t1) / (S - 1)` and the first `t1` less that. A pass over 4 MiB of other data runs just before the
//! operations, so that they start as they would in a step that moves more than the caches hold.

use trainbench_workload::{Backend, DeviceSelector};

use super::elementwise::{self, STACK};
use crate::hardware::wire::NodePoint;

/// The name under which the first-node cost of `class` is recorded (`calibration.node`).
pub fn point_class(class: &str) -> String {
    format!("first-{class}")
}

/// The classes measured: every element-wise class but cross-entropy (a step has one loss).
pub fn classes() -> impl Iterator<Item = &'static str> {
    elementwise::CLASSES.into_iter().filter(|c| *c != "cross_entropy")
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
    for class in classes() {
        let graphs = (
            elementwise::graph_after(class, 0, true),
            elementwise::graph_after(class, 1, true),
            elementwise::graph_after(class, STACK, true),
        );
        let (base, one, many) = match graphs {
            (Ok(b), Ok(o), Ok(m)) => (b, o, m),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                skipped.push((class.to_string(), e));
                continue;
            }
        };
        let plan = elementwise::plan(device, cpu_threads, elementwise::batches(class)[0]);
        let measured =
            super::stepcost::per_added_node(backend, &plan, (&base, &one), 1.0, cpu_clock).and_then(|first| {
                super::stepcost::per_added_node(backend, &plan, (&base, &many), STACK as f64, cpu_clock)
                    .map(|mean| (first, mean))
            });
        match measured {
            Ok((first, mean)) => {
                let s = STACK as f64;
                // S x mean = first + (S - 1) x repeated.
                let extra = |first: f64, mean: f64| (first - (s * mean - first) / (s - 1.0)).max(0.0);
                points.push(NodePoint {
                    class: point_class(class),
                    forward_s: extra(first.forward, mean.forward),
                    backward_s: extra(first.backward, mean.backward),
                });
            }
            Err(e) => skipped.push((class.to_string(), e)),
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
        for class in classes() {
            let g = elementwise::graph_after(class, 1, true).unwrap();
            let flush = g.nodes.iter().position(|n| n.name == "flush").unwrap();
            let op = g.nodes.iter().position(|n| elementwise::class_of(&n.op).is_some()).unwrap();
            assert!(flush < op, "{class}: the flushing pass runs first");
        }
        let mut mock = trainbench_workload::mock::MockBackend::new(Default::default());
        let (points, skipped) = measure(&mut mock, DeviceSelector::Cpu, None, false);
        assert!(skipped.is_empty(), "{skipped:?}");
        let names: Vec<String> = points.iter().map(|p| p.class.clone()).collect();
        assert_eq!(names, classes().map(point_class).collect::<Vec<_>>());
        assert!(points.iter().all(|p| p.forward_s >= 0.0 && p.backward_s >= 0.0));
    }
}
