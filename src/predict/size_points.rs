//! A class's cost measured at a few sizes ([`SizePoint`]: elements, forward and backward seconds of one node)
//! and how a node between, below or beyond them is priced ([`along_sizes`]).

/// One measured size of an element-wise class: (elements, forward seconds, backward seconds) of one node, net of
/// what the model prices on its own.
pub type SizePoint = (f64, f64, f64);

/// A node's (forward, backward) seconds at `elements` from measured (elements, forward, backward) points sorted by
/// elements: linear between two measured sizes; at the per-element cost of the largest beyond it; below the
/// smallest, along the line through the two smallest (toward the node's fixed cost, at most the smallest's
/// cost), or, with one point only, its per-element cost.
pub fn along_sizes(points: &[SizePoint], elements: f64) -> (f64, f64) {
    let (Some(&first), Some(&last)) = (points.first(), points.last()) else {
        return (0.0, 0.0);
    };
    let scaled = |p: SizePoint| (p.1 * elements / p.0, p.2 * elements / p.0);
    if elements >= last.0 {
        return scaled(last);
    }
    if elements <= first.0 {
        let Some(&second) = points.get(1) else {
            return scaled(first);
        };
        // Along the line through the two smallest sizes (its intercept is the node's fixed part), never above
        // the smallest's cost nor below zero.
        let toward = |t0: f64, t1: f64| {
            let slope = (t1 - t0) / (second.0 - first.0);
            (t0 + slope * (elements - first.0)).clamp(0.0, t0)
        };
        return (toward(first.1, second.1), toward(first.2, second.2));
    }
    let i = points.partition_point(|p| p.0 <= elements);
    let (a, b) = (points[i - 1], points[i]);
    let t = (elements - a.0) / (b.0 - a.0);
    (a.1 + t * (b.1 - a.1), a.2 + t * (b.2 - a.2))
}
