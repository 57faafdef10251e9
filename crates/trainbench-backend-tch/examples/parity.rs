//! Parity benchmark, trainbench side: trains a model through `TchBackend` (the path `trainbench run` uses) and
//! prints its steady-state step time, for `scripts/parity.sh` to compare with PyTorch eager
//! (`scripts/parity/pytorch_eager.py` builds the same models).
//!
//! Usage: `parity <resnet18-cifar|transformer> [--batch N] [--warmup N] [--iters N] [--threads N] [--seed N]
//! [--manifest FILE] [--dropout P]` (transformer dropout, 0.1 by default); `--manifest` also writes every declared tensor (name, shape, initialiser) and graph
//! input, so the PyTorch side can start from the very same weights and data (`--init-from FILE`).
//! Output: one line `RESULT impl=trainbench model=.. batch=.. params=.. threads=.. median_s=.. mean_s=..
//! cpu_s_per_step=.. items_per_s=.. loss_first=.. loss_last=..` (step times of the measured iterations; CPU
//! seconds of the whole process per measured step).

use std::process::ExitCode;

use trainbench_backend_tch::TchBackend;
use trainbench_contract::{Backend, PhaseTimes, Probe, RunPlan};
use trainbench_graph::graph::{Activation, Graph, InputKind, LossKind};
use trainbench_graph::model::{ModelSpec, ResnetSpec, ResnetStem};
use trainbench_graph::params::parameters;
use trainbench_graph::{GraphBuilder, OptimizerSpec, ShapeError, zoo};

/// CPU time consumed by this process (all threads), in seconds.
fn process_cpu_s() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer for clock_gettime.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Process CPU time at the end of the last warm-up iteration and of the last measured one: CPU seconds per
/// step are robust to other processes competing for the cores (wall time is not), at one thread at least.
#[derive(Default)]
struct CpuClock {
    start: Option<f64>,
    end: Option<f64>,
}

impl Probe for CpuClock {
    fn step(&mut self, _index: u64, measured: bool, _phases: &PhaseTimes) {
        if measured {
            self.end = Some(process_cpu_s());
        } else {
            self.start = Some(process_cpu_s());
        }
    }
}

/// CIFAR ResNet-18 from the zoo (torchvision's resnet18 with a 3x3/1 stem and no max-pool), 10 classes, 32x32.
fn resnet18_cifar() -> Result<Graph, String> {
    let spec = ResnetSpec { depth: 18, width: 64, classes: 10, image_size: 32, stem: ResnetStem::Cifar };
    zoo::build(&ModelSpec::Resnet(spec)).map_err(|e| e.to_string())
}

/// Small Transformer encoder language model (built here: the zoo's Transformer is the encoder-decoder of
/// Vaswani et al., which `pytorch_eager.py` would have to re-implement layer by layer): vocab 1000, 64 tokens, width 256, 4 heads, FFN 1024, 2 post-norm
/// layers (PyTorch's `TransformerEncoderLayer` structure, ReLU, dropout 0.1), per-token classifier.
fn transformer(dropout: f64) -> Result<Graph, ShapeError> {
    let (vocab, seq, e, heads, ffn, layers) = (1000, 64, 256, 4, 1024, 2);
    let mut b = GraphBuilder::new("transformer-small");
    let t = b.input("tokens", &[seq], InputKind::Tokens { vocab })?;
    let y = b.input("targets", &[seq], InputKind::Labels { classes: vocab })?;
    let mut x = b.embedding("embed", t, vocab, e)?;
    for l in 0..layers {
        b.push(format!("layers.{l}"));
        let a = b.attention("self_attn", x, x, heads, false)?;
        let a = b.dropout("dropout1", a, dropout)?;
        let r = b.add_nodes("res1", &[x, a])?;
        let n = b.layer_norm("norm1", r, 1e-5)?;
        let h = b.linear("linear1", n, ffn, true)?;
        let h = b.act("relu", h, Activation::Relu)?;
        let h = b.dropout("dropout", h, dropout)?;
        let h = b.linear("linear2", h, e, true)?;
        let h = b.dropout("dropout2", h, dropout)?;
        let r = b.add_nodes("res2", &[n, h])?;
        x = b.layer_norm("norm2", r, 1e-5)?;
        b.pop();
    }
    let o = b.linear("head", x, vocab, true)?;
    b.loss("loss", LossKind::CrossEntropy, &[o, y])?;
    b.finish(seq as u64, "tokens")
}

/// Declared tensors (name, shape, initialiser) and graph inputs (name, shape, kind) of `graph`, as JSON.
fn manifest(graph: &Graph, seed: u64) -> serde_json::Value {
    let tensors: Vec<_> =
        (0..graph.nodes.len()).flat_map(|id| trainbench_graph::params::node_tensors(graph, id)).collect();
    let inputs: Vec<_> = graph
        .inputs()
        .map(|(_, n)| {
            let kind = match n.op.input_kind() {
                Some(kind) => serde_json::to_value(kind).unwrap_or_default(),
                None => serde_json::Value::Null,
            };
            serde_json::json!({ "name": n.name, "shape": n.shape.0, "kind": kind })
        })
        .collect();
    serde_json::json!({ "seed": seed, "tensors": tensors, "inputs": inputs })
}

struct Opts {
    model: String,
    batch: usize,
    warmup: u64,
    iters: u64,
    threads: Option<i32>,
    seed: u64,
    manifest: Option<String>,
    dropout: f64,
}

fn parse() -> Result<Opts, String> {
    let mut args = std::env::args().skip(1);
    let model = args
        .next()
        .ok_or("usage: parity <resnet18-cifar|transformer> [--batch N] [--warmup N] [--iters N] [--threads N]")?;
    let mut o = Opts { model, batch: 32, warmup: 10, iters: 30, threads: None, seed: 0, manifest: None, dropout: 0.1 };
    while let Some(flag) = args.next() {
        let v = args.next().ok_or(format!("{flag} needs a value"))?;
        let bad = |_: std::num::ParseIntError| format!("{flag}: `{v}` is not a number");
        match flag.as_str() {
            "--batch" => o.batch = v.parse().map_err(bad)?,
            "--warmup" => o.warmup = v.parse().map_err(bad)?,
            "--iters" => o.iters = v.parse().map_err(bad)?,
            "--threads" => o.threads = Some(v.parse().map_err(bad)?),
            "--seed" => o.seed = v.parse().map_err(bad)?,
            "--manifest" => o.manifest = Some(v),
            "--dropout" => o.dropout = v.parse().map_err(|_| format!("--dropout: `{v}` is not a number"))?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if let Some(n) = o.threads {
        tch::set_num_threads(n);
    }
    let (graph, optimizer) = match o.model.as_str() {
        "resnet18-cifar" => {
            (resnet18_cifar(), OptimizerSpec::Sgd { lr: 0.01, momentum: 0.9, weight_decay: 5e-4, nesterov: false })
        }
        "transformer" => (
            transformer(o.dropout).map_err(|e| e.to_string()),
            OptimizerSpec::Adam { lr: 1e-4, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 },
        ),
        other => {
            eprintln!("unknown model `{other}` (resnet18-cifar, transformer)");
            return ExitCode::from(2);
        }
    };
    let graph = match graph {
        Ok(g) => g,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    if let Some(path) = &o.manifest {
        if let Err(e) = std::fs::write(path, manifest(&graph, o.seed).to_string()) {
            eprintln!("cannot write {path}: {e}");
            return ExitCode::from(1);
        }
    }
    let plan = RunPlan {
        batch_size: o.batch,
        warmup: o.warmup,
        seed: o.seed,
        optimizer,
        phase_timing: false,
        ..RunPlan::for_tests(&format!("parity.{}.b{}", o.model, o.batch), o.iters)
    };
    let mut clock = CpuClock::default();
    let raw = match TchBackend::new().run(&plan, &graph, &mut clock) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let mut times: Vec<f64> = raw.steps.phases().iter().map(|s| s.total_s).collect();
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    let params: u64 = graph.nodes.iter().flat_map(parameters).map(|p| p.numel()).sum();
    let items = (o.batch as u64 * graph.items_per_sample) as f64;
    let cpu = match (clock.start, clock.end) {
        (Some(a), Some(b)) => (b - a) / times.len() as f64,
        _ => f64::NAN,
    };
    println!(
        "RESULT impl=trainbench model={} batch={} params={} threads={} median_s={:.6} mean_s={:.6} cpu_s_per_step={:.6} items_per_s={:.2} loss_first={:.4} loss_last={:.4}",
        o.model,
        o.batch,
        params,
        tch::get_num_threads(),
        median,
        mean,
        cpu,
        items / median,
        raw.steps.losses().first.unwrap_or(f64::NAN),
        raw.steps.losses().last.unwrap_or(f64::NAN),
    );
    ExitCode::SUCCESS
}
