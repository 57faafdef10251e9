//! Deterministic, seeded values: initial weights and synthetic input batches, identical on every backend.
//!
//! Values depend only on the seed, the tensor's name and (for data) the step, never on the backend or
//! thread count, so two backends start from the same weights and see the same data.

use crate::graph::{Graph, InputKind, LossKind, Node, NodeId, Op};
use crate::params::{Init, ParamDecl};
use crate::rng::SplitMix64;

/// A small, fast, well-mixed generator ([`SplitMix64`]) seeded per stream; ample for initialisation and
/// synthetic data.
#[derive(Debug, Clone)]
pub struct SeededRng(SplitMix64);

impl SeededRng {
    /// A generator for `seed` and a stream name (tensor or input name).
    pub fn new(seed: u64, stream: &str) -> Self {
        // FNV-1a of the stream name, mixed with the seed.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in stream.as_bytes() {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        let mut rng = SeededRng(SplitMix64::new(h ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
        rng.next_u64();
        rng
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// The generator `draws` outputs of [`SeededRng::next_u64`] further on, without drawing them.
    pub fn skip(&mut self, draws: u64) {
        self.0.skip(draws);
    }

    /// Uniform in `[0, 1)` with 24 bits of precision (exact in f32).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f32 {
        let u1 = (self.uniform() as f64).max(1e-12);
        let u2 = self.uniform() as f64;
        ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
    }

    /// Uniform integer in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// The initial values of a declared tensor for a seed, row-major in `decl.shape`.
pub fn initial_values(decl: &ParamDecl, seed: u64) -> Vec<f32> {
    let n = decl.numel() as usize;
    match decl.init {
        Init::Zeros => vec![0.0; n],
        Init::Ones => vec![1.0; n],
        Init::Uniform { bound } => {
            draw(&SeededRng::new(seed, &decl.name), n, 1, |rng| (rng.uniform() * 2.0 - 1.0) * bound)
        }
        Init::Normal { std } => draw(&SeededRng::new(seed, &decl.name), n, 2, |rng| rng.normal() * std),
    }
}

/// One input tensor of a batch on the host, synthetic ([`synthetic_input`]) or read from a dataset
/// ([`crate::data::BatchSource`]).
#[derive(Debug, Clone, PartialEq)]
pub enum HostTensor {
    /// Real values, shape `[batch, ..per-sample shape]`.
    Dense(Vec<f32>),
    /// Integer ids or labels, shape `[batch, ..per-sample shape]`.
    Ids(Vec<i64>),
}

/// Ids of the classes a label input must avoid: CTC reserves class 0 for the blank.
fn label_floor(graph: &Graph, input: NodeId) -> u64 {
    let ctc = graph
        .nodes
        .iter()
        .any(|n| matches!(n.op, Op::Loss { loss: LossKind::Ctc, .. }) && n.inputs.get(1) == Some(&input));
    u64::from(ctc)
}

/// Whether graph input `input` is the target of a binary cross-entropy loss (its values must be 0 or 1).
fn binary_target(graph: &Graph, input: NodeId) -> bool {
    graph
        .nodes
        .iter()
        .any(|n| matches!(n.op, Op::Loss { loss: LossKind::BceWithLogits, .. }) && n.inputs.get(1) == Some(&input))
}

/// The synthetic values of graph input `input` for a batch at `step` (data cycles every `samples` steps when set).
pub fn synthetic_input(graph: &Graph, input: NodeId, batch: usize, seed: u64, step: u64) -> HostTensor {
    let node: &Node = &graph.nodes[input];
    let n = batch * node.shape.numel() as usize;
    let rng = SeededRng::new(seed ^ step.wrapping_mul(0x2545_f491_4f6c_dd1d), &node.name);
    match node.op.input_kind() {
        Some(InputKind::Tokens { vocab }) => {
            let vocab = *vocab as u64;
            HostTensor::Ids(draw(&rng, n, 1, |rng| rng.below(vocab) as i64))
        }
        Some(InputKind::Labels { classes }) => {
            let floor = label_floor(graph, input);
            let span = (*classes as u64).saturating_sub(floor).max(1);
            HostTensor::Ids(draw(&rng, n, 1, |rng| (floor + rng.below(span)) as i64))
        }
        Some(InputKind::Dense) | None if binary_target(graph, input) => {
            HostTensor::Dense(draw(&rng, n, 1, |rng| if rng.below(2) == 1 { 1.0 } else { 0.0 }))
        }
        Some(InputKind::Dense) | None => HostTensor::Dense(draw(&rng, n, 2, SeededRng::normal)),
    }
}

/// Values a tensor holds at or above which [`draw`] spreads the work over the machine's cores (4 Mi: a batch of
/// ImageNet images at 224 x 224 from 28 images, a 2,048 x 2,048 weight).
const PARALLEL_FROM: usize = 1 << 22;

/// `n` values of `value`, each taking `draws_per_value` outputs of `rng` in turn, as one loop over a clone of
/// `rng` would give them; on several threads where `n` reaches [`PARALLEL_FROM`] (each thread starts its share
/// with the generator skipped to its first value), so the values never depend on the thread count.
fn draw<T: Copy + Default + Send>(
    rng: &SeededRng,
    n: usize,
    draws_per_value: u64,
    value: impl Fn(&mut SeededRng) -> T + Sync,
) -> Vec<T> {
    let threads = if n < PARALLEL_FROM { 1 } else { std::thread::available_parallelism().map_or(1, |c| c.get()) };
    draw_on(rng, n, draws_per_value, &value, threads.min(32))
}

/// [`draw`] on `threads` threads (one: on this one).
fn draw_on<T: Copy + Default + Send>(
    rng: &SeededRng,
    n: usize,
    draws_per_value: u64,
    value: &(impl Fn(&mut SeededRng) -> T + Sync),
    threads: usize,
) -> Vec<T> {
    if threads <= 1 || n < 2 {
        let mut rng = rng.clone();
        return (0..n).map(|_| value(&mut rng)).collect();
    }
    let mut out = vec![T::default(); n];
    let share = n.div_ceil(threads);
    std::thread::scope(|scope| {
        for (i, part) in out.chunks_mut(share).enumerate() {
            let mut own = rng.clone();
            own.skip((i * share) as u64 * draws_per_value);
            scope.spawn(move || part.iter_mut().for_each(|v| *v = value(&mut own)));
        }
    });
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::params::ParamRole;

    #[test]
    fn values_depend_on_seed_and_name_only() {
        let d = ParamDecl {
            name: "fc.weight".into(),
            local: "weight".into(),
            shape: vec![4, 3],
            init: Init::Uniform { bound: 0.5 },
            role: ParamRole::Weight,
        };
        let a = initial_values(&d, 1);
        assert_eq!(a, initial_values(&d, 1));
        assert_ne!(a, initial_values(&d, 2));
        assert!(a.iter().all(|v| v.abs() <= 0.5));
        let mut rng = SeededRng::new(7, "x");
        let xs: Vec<f32> = (0..20000).map(|_| rng.normal()).collect();
        let mean = xs.iter().sum::<f32>() / xs.len() as f32;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / xs.len() as f32;
        assert!(mean.abs() < 0.03 && (var - 1.0).abs() < 0.05, "mean {mean} var {var}");
    }

    #[test]
    fn values_drawn_on_several_threads_are_the_values_of_one_loop() {
        // Every kind of value, each with its count of draws, on 1 to 5 threads over sizes that do and do not
        // divide evenly: the same values as one generator drawing them in turn.
        let rng = SeededRng::new(11, "images");
        for n in [0, 1, 2, 7, 1000, 1001] {
            let one = draw_on(&rng, n, 2, &SeededRng::normal, 1);
            let mut reference = rng.clone();
            assert_eq!(one, (0..n).map(|_| reference.normal()).collect::<Vec<_>>());
            for threads in 2..=5 {
                assert_eq!(draw_on(&rng, n, 2, &SeededRng::normal, threads), one, "{n} normals, {threads} threads");
                let ids = |r: &mut SeededRng| r.below(50) as i64;
                assert_eq!(draw_on(&rng, n, 1, &ids, threads), draw_on(&rng, n, 1, &ids, 1), "{n} ids");
                let u = |r: &mut SeededRng| r.uniform();
                assert_eq!(draw_on(&rng, n, 1, &u, threads), draw_on(&rng, n, 1, &u, 1), "{n} uniforms");
            }
        }
    }

    #[test]
    fn binary_cross_entropy_targets_are_zero_or_one() {
        let s = crate::model::NcfSpec { users: 100, items: 50, factors: 8, mlp_layers: vec![16, 8] };
        let g = crate::zoo::build(&crate::model::ModelSpec::Ncf(s)).unwrap();
        let target = g.inputs().map(|(i, _)| i).find(|&i| binary_target(&g, i)).unwrap();
        let HostTensor::Dense(v) = synthetic_input(&g, target, 64, 3, 0) else { panic!("dense target") };
        assert!(v.iter().all(|&x| x == 0.0 || x == 1.0));
        assert!(v.contains(&0.0) && v.contains(&1.0));
    }
}
