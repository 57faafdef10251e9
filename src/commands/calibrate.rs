//! The `calibrate` subcommand: measures the device it runs on through a backend (`Backend::calibrate`) and
//! writes a hardware profile (`hardware/this-machine.toml` by convention) whose peaks, memory bandwidth and
//! efficiency curves are what this machine reached, with how they were measured.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use trainbench_contract::DeviceSelector;
use trainbench_contract::calibrate::{Measurement, default_request};
use trainbench_contract::mock::MockConfig;
use trainbench_graph::Precision;

use super::args::parse_precision;
use super::{CommandError, Outcome};

mod merge;
mod ranks;
use crate::backend_registry;
use crate::calibrate::machine_load::{self, LoadLimits, LoadMonitor, LoadReading};
use crate::hardware::ProfileValidator;
use crate::hardware::wire::{
    BandwidthPoint, Calibration, ConvShapePoint, DeviceKind, DeviceProfile, FreshMemoryPoint, GemmShapePoint,
    HardwareFile, KernelPoint, Link, LinkKind, PeakTflops, ProfileKind,
};
use crate::spec::wire::BackendChoice;

/// Arguments of `trainbench calibrate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to write the profile (e.g. `hardware/this-machine.toml`).
    #[arg(long)]
    pub out: PathBuf,
    /// Device to measure.
    #[arg(long, default_value = "cpu")]
    pub device: DeviceSelector,
    /// Backend that runs the kernels (`auto`: tch when built in).
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// Precisions of the matrix products and convolutions [default: fp32 and bf16 on the CPU; fp32, fp16 and
    /// bf16 on CUDA].
    #[arg(long = "precision", value_parser = parse_precision)]
    pub precisions: Vec<Precision>,
    /// Largest square GEMM measured (sizes 32, 64, ... up to this).
    #[arg(long, default_value_t = 1024)]
    pub max_gemm: usize,
    /// Timed calls per kernel (the median is kept).
    #[arg(long, default_value_t = 7)]
    pub repeats: u32,
    /// Intra-op CPU threads while measuring (as `run.cpu_threads`); unset keeps the library's default.
    #[arg(long)]
    pub cpu_threads: Option<u32>,
    /// Time CPU kernels with the process's CPU clock instead of the wall clock: on a shared machine, what the
    /// work costs with a core to itself (use with `--cpu-threads 1`; more threads add their waiting).
    #[arg(long)]
    pub cpu_clock: bool,
    /// Profile name written into the file.
    #[arg(long, default_value = "this-machine")]
    pub name: String,
    /// Replace an existing file at `--out`.
    #[arg(long)]
    pub overwrite: bool,
    /// Also measure the link between two local ranks (CPU): two all-reduce training runs of 2 ranks through
    /// `trainbench run` (the MPI engine, started by `mpirun`), a small and a large model, solved for the
    /// exchange's latency and bandwidth; recorded as the profile's intra-node link.
    #[arg(long)]
    pub link: bool,
    /// Complete calibrations to run one after the other; every figure of the profile is their median (on a
    /// shared machine one calibration can catch a busy minute and price everything 10-40% high).
    #[arg(long, default_value_t = 1)]
    pub rounds: u32,
    /// Store a calibration taken on a loaded machine (other work's load, steal or a probe kernel's spread over
    /// their limits), marked as loaded in the profile (`calibration.load`), instead of refusing it (exit 3).
    #[arg(long)]
    pub allow_loaded: bool,
    /// A load reading (JSON, `crate::calibrate::machine_load::LoadReading`) to judge instead of the host's:
    /// for tests, which must not pass or fail by the host they run on.
    #[arg(long, hide = true)]
    pub load_reading: Option<PathBuf>,
}

/// The profile a measurement describes: peaks are the best rates reached, memory bandwidth the add's, the host
/// link the measured copy (CUDA); no intra-node link or network is measured yet (multi-process runs come later).
pub fn profile_of(m: &Measurement, name: &str, backend: &str, selector: &str, measured_at: String) -> HardwareFile {
    let best = |p: Precision| {
        m.kernels
            .iter()
            .filter(|k| k.precision == p && k.seconds > 0.0)
            .map(|k| k.flops / k.seconds / 1e12)
            .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))))
    };
    let points = |kind: &str| {
        m.kernels
            .iter()
            .filter(|k| k.kind == kind)
            .map(|k| KernelPoint {
                precision: k.precision,
                shape: k.shape.clone(),
                flops: k.flops,
                seconds: k.seconds,
                source: None,
            })
            .collect()
    };
    let is_cpu = m.device.kind == "cpu";
    HardwareFile {
        version: 1,
        kind: ProfileKind::Hardware,
        name: name.to_string(),
        description: format!("{} measured by trainbench calibrate ({backend}, {selector})", m.device.name),
        device: DeviceProfile {
            name: m.device.name.clone(),
            kind: if is_cpu { DeviceKind::Cpu } else { DeviceKind::Gpu },
            peak_tflops: PeakTflops {
                fp32: best(Precision::Fp32).unwrap_or(0.0),
                tf32: None,
                fp16: best(Precision::Fp16),
                bf16: best(Precision::Bf16),
                fp8: None,
            },
            memory_bandwidth_gbs: m.triad_bytes_per_s / 1e9,
            memory_gib: m.device.memory_bytes.map_or(0.0, |b| b as f64 / f64::from(1u32 << 30)),
        },
        host_link: m.host_to_device_bytes_per_s.map(|b| Link {
            kind: LinkKind::Pcie,
            name: "host-to-device copy (measured)".into(),
            generation: None,
            lanes: None,
            bandwidth_gbs: b / 1e9,
            latency_us: 0.0,
        }),
        intra_node: None,
        network: None,
        alternatives: Default::default(),
        calibration: Some(Calibration {
            method: m.method.clone(),
            measured_at,
            backend: backend.to_string(),
            device: selector.to_string(),
            op_overhead_us: m.op_overhead_s * 1e6,
            triad_gbs: m.triad_bytes_per_s / 1e9,
            host_to_device_gbs: m.host_to_device_bytes_per_s.map(|b| b / 1e9),
            gemm: points("gemm"),
            conv: points("conv"),
            conv_backward: points("conv_backward"),
            bandwidth: Vec::new(),
            elementwise: Vec::new(),
            node: Vec::new(),
            optimizer: Vec::new(),
            gemm_shapes: m
                .gemm_shapes
                .iter()
                .map(|g| GemmShapePoint {
                    precision: g.precision,
                    m: g.dims[0] as u64,
                    k: g.dims[1] as u64,
                    n: g.dims[2] as u64,
                    seconds: g.seconds,
                })
                .collect(),
            conv_shapes: m
                .conv_grid
                .iter()
                .map(|c| ConvShapePoint {
                    precision: c.precision,
                    channels: c.shape.c as u64,
                    pixels: (c.shape.n * c.shape.output_side() * c.shape.output_side()) as u64,
                    batch: Some(c.shape.n as u64),
                    kernel: c.shape.r as u64,
                    stride: c.shape.stride as u64,
                    transposed: c.shape.transposed,
                    forward_s: c.forward_s,
                    backward_s: c.backward_s,
                })
                .collect(),
            load: None,
            attention: Vec::new(),
            fresh_memory: m.fresh_memory.as_ref().map(|f| FreshMemoryPoint {
                reused_up_to_bytes: f.reused_up_to_bytes,
                seconds_per_byte: f.seconds_per_byte,
                cycled: f
                    .cycled
                    .iter()
                    .map(|c| crate::predict::fresh_rates::CycledFreshPoint {
                        bytes: c.bytes,
                        period_s: c.period_s,
                        extra_seconds_per_byte: c.extra_seconds_per_byte,
                    })
                    .collect(),
            }),
            zero_sqrt_s_per_element: m.zero_sqrt_s_per_element,
        }),
        fitted: None,
    }
}

/// The `#:schema` line for a profile written at `out`, when the schema is where a checkout keeps it.
fn schema_line(out: &Path) -> String {
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if dir.join("../schema/hardware.schema.json").is_file() {
        "#:schema ../schema/hardware.schema.json\n".into()
    } else {
        String::new()
    }
}

/// Elements of each vector of the smaller adds that measure bandwidth by working set (3 vectors of 4 bytes: 48 KiB,
/// 384 KiB, 3 MiB and 24 MiB moved per call, from inside a core's caches to about a last-level cache), beside the
/// request's own, past every cache.
const BANDWIDTH_ELEMENTS: [usize; 4] = [4 << 10, 32 << 10, 256 << 10, 2 << 20];

/// The bandwidth curve: the backend's add timed at each of [`BANDWIDTH_ELEMENTS`] (a request with no kernels) and
/// at the main request's size, as (bytes moved, seconds per call) points.
fn bandwidth_curve(
    backend: &mut dyn trainbench_contract::Backend,
    request: &trainbench_contract::calibrate::CalibrationRequest,
    main: &Measurement,
) -> Result<Vec<BandwidthPoint>, CommandError> {
    let point = |elements: usize, bytes_per_s: f64| {
        let bytes = 12.0 * elements as f64;
        BandwidthPoint { bytes, seconds: if bytes_per_s > 0.0 { bytes / bytes_per_s } else { 0.0 }, source: None }
    };
    let mut points = Vec::new();
    for elements in BANDWIDTH_ELEMENTS.into_iter().filter(|e| *e < request.triad_elements) {
        let small = trainbench_contract::calibrate::CalibrationRequest {
            gemm_sizes: Vec::new(),
            gemm_shapes: Vec::new(),
            conv_grid: Vec::new(),
            conv_shapes: Vec::new(),
            triad_elements: elements,
            fresh_memory: false,
            ..request.clone()
        };
        let m = backend.calibrate(&small)?;
        points.push(point(elements, m.triad_bytes_per_s));
    }
    points.push(point(request.triad_elements, main.triad_bytes_per_s));
    Ok(points)
}

/// Carry out `trainbench calibrate`.
pub fn execute(args: &Args) -> Result<Outcome, CommandError> {
    if args.out.exists() && !args.overwrite {
        return Err(CommandError::Input(format!(
            "{} exists; pass --overwrite to replace it (or write elsewhere with --out)",
            args.out.display()
        )));
    }
    let kind = backend_registry::resolve(args.backend, args.device);
    if let Some(e) = backend_registry::not_built(kind) {
        return Err(CommandError::Input(e.to_string()));
    }
    let precisions = if args.precisions.is_empty() {
        match args.device {
            DeviceSelector::Cpu => vec![Precision::Fp32, Precision::Bf16],
            _ => vec![Precision::Fp32, Precision::Fp16, Precision::Bf16],
        }
    } else {
        args.precisions.clone()
    };
    let mut request = default_request(args.device, precisions, args.max_gemm);
    request.repeats = args.repeats.max(1);
    request.cpu_threads = args.cpu_threads;
    request.cpu_clock = args.cpu_clock;
    // The machine's load: checked before the first suite and between the suites (a synthetic reading with
    // --load-reading; none for the mock backend, which measures nothing of the machine).
    let limits = LoadLimits::default();
    let synthetic = match &args.load_reading {
        Some(path) => Some(read_load_reading(path)?),
        None => None,
    };
    let mut monitor = (synthetic.is_none() && kind.name() != "mock").then(|| {
        LoadMonitor::start(args.cpu_threads.map_or_else(crate::metrics::cpu::available_cores, |t| t as usize))
    });
    let reading =
        |monitor: &Option<LoadMonitor>| synthetic.clone().or_else(|| monitor.as_ref().map(LoadMonitor::reading));
    if let Some(r) = reading(&monitor)
        && let Err(e) = machine_load::check(&r, &limits, args.allow_loaded, "before calibrating")
    {
        eprintln!("error: {e}");
        return Ok(Outcome::Inconclusive);
    }
    eprintln!("calibrating {} with {} (takes a minute on a busy CPU)...", args.device, kind.name());
    let rounds = args.rounds.max(1);
    let mut profiles = Vec::with_capacity(rounds as usize);
    for round in 1..=rounds {
        if rounds > 1 {
            eprintln!("round {round} of {rounds}...");
        }
        profiles.push(measure_profile(args, kind, &request, monitor.as_mut())?);
    }
    let load = reading(&monitor);
    if let Some(r) = &load
        && let Err(e) = machine_load::check(r, &limits, args.allow_loaded, "while calibrating")
    {
        eprintln!("error: {e}; nothing was written");
        return Ok(Outcome::Inconclusive);
    }
    let measured_at =
        profiles.first().and_then(|p| p.calibration.as_ref()).map(|c| c.measured_at.clone()).unwrap_or_default();
    let profile = if rounds > 1 {
        let mut merged = merge::median(&profiles).map_err(|e| CommandError::Internal(format!("{e} (a bug)")))?;
        if let Some(c) = merged.calibration.as_mut() {
            c.method.push_str(&format!(
                "; every figure the median over {rounds} complete calibrations one after the other"
            ));
        }
        merged
    } else {
        profiles.remove(0)
    };
    let mut profile = profile;
    if let Some(c) = profile.calibration.as_mut() {
        match &load {
            Some(r) => {
                let mark = r.mark(&limits, args.allow_loaded);
                c.method.push_str(&format!(
                    "; the machine's load checked before and between the suites ({} probe timings{}): {}",
                    r.probes,
                    r.probe_drift.map_or_else(String::new, |d| format!(", the machine's drift {d:.3}")),
                    if mark.loaded { "LOADED, stored with --allow-loaded" } else { "quiet" }
                ));
                if let Some(w) = mark.warning() {
                    eprintln!("warning: {w}");
                }
                c.load = Some(mark);
            }
            None => c.method.push_str("; the machine's load not checked (the mock backend measures nothing of it)"),
        }
    }
    // Format v2: the coefficients the model reads, fitted once here and stored beside the points.
    let profile = crate::hardware::load::as_written(profile);
    let body = toml::to_string(&profile)?;
    let text = format!(
        "{}# Written by `trainbench calibrate` at {measured_at}: what this machine reached, not datasheet figures.\n{body}",
        schema_line(&args.out)
    );
    // What is written must read back as a valid profile.
    let validator = ProfileValidator::new()?;
    if let Err(d) = validator.check_bytes(&args.out.display().to_string(), text.as_bytes()) {
        return Err(CommandError::Internal(format!(
            "the measured profile does not validate (a bug):\n{}",
            crate::spec::diagnostics::render_text(&d)
        )));
    }
    if let Some(dir) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| CommandError::Io { path: dir.display().to_string(), source: e })?;
    }
    std::fs::write(&args.out, &text)
        .map_err(|e| CommandError::Io { path: args.out.display().to_string(), source: e })?;
    let p = &profile.device.peak_tflops;
    outln!(
        "wrote {}: fp32 {:.3} TFLOP/s{}{}, memory {:.1} GB/s, {:.1} us per operation{}{}",
        args.out.display(),
        p.fp32,
        p.bf16.map(|x| format!(", bf16 {x:.3} TFLOP/s")).unwrap_or_default(),
        p.fp16.map(|x| format!(", fp16 {x:.3} TFLOP/s")).unwrap_or_default(),
        profile.device.memory_bandwidth_gbs,
        profile.calibration.as_ref().map_or(0.0, |c| c.op_overhead_us),
        profile
            .calibration
            .as_ref()
            .and_then(|c| c.host_to_device_gbs)
            .map(|b| format!(", host-to-device {b:.1} GB/s"))
            .unwrap_or_default(),
        profile
            .calibration
            .as_ref()
            .and_then(|c| c.fresh_memory.as_ref())
            .map(|f| format!(
                ", allocations above {:.1} MiB fresh at {:.3} ns per byte{}",
                f.reused_up_to_bytes / f64::from(1u32 << 20),
                f.seconds_per_byte * 1e9,
                f.cycled
                    .iter()
                    .max_by(|a, b| (a.bytes, a.period_s).partial_cmp(&(b.bytes, b.period_s)).unwrap_or(Ordering::Equal))
                    .map(|c| format!(
                        " (+{:.3} ns per byte cycling {:.1} GiB every {:.1} s)",
                        c.extra_seconds_per_byte * 1e9,
                        c.bytes / f64::from(1u32 << 30),
                        c.period_s
                    ))
                    .unwrap_or_default()
            ))
            .unwrap_or_default()
    );
    Ok(Outcome::Success)
}

/// One complete calibration: the backend's kernels, the bandwidth curve, the training step's micro-graphs and,
/// with `--link`, the local link, as a profile.
fn measure_profile(
    args: &Args,
    kind: trainbench_contract::BackendKind,
    request: &trainbench_contract::calibrate::CalibrationRequest,
    mut monitor: Option<&mut LoadMonitor>,
) -> Result<HardwareFile, CommandError> {
    // The link first, before this process starts the backend and leaves its library's threads behind: the two
    // ranks get the machine's cores as a run gets them.
    let link = if args.link { Some(ranks::measure(args.cpu_threads)) } else { None };
    if args.link
        && let Some(m) = monitor.as_deref_mut()
    {
        m.link_ended(2);
    }
    // Between two suites: the load average and the probe kernel, interleaved with the measurements; and each
    // suite's wall time, said at the end (what a device's time limit must allow for).
    let mut suites: Vec<(&str, f64)> = Vec::new();
    let mut since = std::time::Instant::now();
    let mut checkpoint = |suite: &'static str| {
        suites.push((suite, since.elapsed().as_secs_f64()));
        if let Some(m) = monitor.as_deref_mut() {
            m.checkpoint();
        }
        since = std::time::Instant::now();
    };
    let mut backend = backend_registry::create(kind, &MockConfig::default());
    checkpoint("start");
    let m = backend.calibrate(request)?;
    checkpoint("kernels");
    let bandwidth = bandwidth_curve(backend.as_mut(), request, &m)?;
    checkpoint("bandwidth");
    // On a GPU the element-wise classes at fp32 and at one half precision (bf16 where asked for; fp16 reads its
    // points, the same bytes moved): their kernels move half the bytes there.
    let half = [Precision::Bf16, Precision::Fp16].into_iter().find(|p| request.precisions.contains(p));
    let elementwise_precisions: Vec<Precision> =
        std::iter::once(Precision::Fp32).chain(half.filter(|_| request.grids_at_every_precision)).collect();
    let (elementwise, skipped) = crate::calibrate::elementwise::measure(
        backend.as_mut(),
        args.device,
        &elementwise_precisions,
        args.cpu_threads,
        args.cpu_clock,
    );
    checkpoint("element-wise");
    let (first_nodes, first_skipped) =
        crate::calibrate::firstnode::measure(backend.as_mut(), args.device, args.cpu_threads, args.cpu_clock);
    checkpoint("first nodes");
    let step_costs =
        crate::calibrate::stepcost::measure_nodes(backend.as_mut(), args.device, args.cpu_threads, args.cpu_clock)
            .and_then(|mut nodes| {
                let layers = crate::calibrate::stepcost::measure_layers(
                    backend.as_mut(),
                    args.device,
                    args.cpu_threads,
                    args.cpu_clock,
                )?;
                nodes.extend(layers);
                Ok(nodes)
            })
            .and_then(|nodes| {
                crate::calibrate::stepcost::measure_optimizers(
                    backend.as_mut(),
                    args.device,
                    args.cpu_threads,
                    args.cpu_clock,
                )
                .map(|opt| (nodes, opt))
            });
    checkpoint("step costs");
    let took: Vec<String> = suites.iter().map(|(suite, s)| format!("{suite} {s:.1} s")).collect();
    eprintln!("calibrate: {} element-wise points; {}", elementwise.len(), took.join(", "));
    let measured_at = crate::manifest::rfc3339(SystemTime::now());
    let mut profile = profile_of(&m, &args.name, kind.name(), &args.device.to_string(), measured_at.clone());
    if let Some(c) = profile.calibration.as_mut() {
        c.bandwidth = bandwidth;
        c.elementwise = elementwise;
        c.method.push_str(&format!(
            "; element-wise operations at {}: a micro-graph (input -> linear -> {} x the operation -> MSE) \
             trained with and without the operation, the difference of the mean forward and backward phases per \
             operation, median of 3 rounds, {}; cross-entropy: input [1, 64] -> linear 1024 -> cross-entropy \
             against the same graph ending in the logits' mean and an MSE on it; max pooling: input -> conv 1x1 -> \
             6 x max pool 3x3 stride 1 -> MSE",
            elementwise_precisions.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(" and "),
            crate::calibrate::elementwise::ELEMENTWISE_STACK,
            crate::calibrate::micro_shapes::describe(args.device),
        ));
        match step_costs {
            Ok((nodes, optimizers)) => {
                c.node = nodes;
                c.node.extend(first_nodes);
                c.optimizer = optimizers;
                c.method.push_str(&format!(
                    "; per node: {n} ReLUs or {n} linear layers (8 features, batch 1) trained beside the graph \
                     without them (input -> linear -> MSE), the difference of the mean forward and backward \
                     phases per node, median of 3 rounds (step: that graph less its linear layer and loss); layers \
                     in the step: 4 convolutions 16 -> 16 3x3 on 16 x 16 pixels or 4 linear layers 256 -> 256 on \
                     16 rows per sample at batch 64, and 4 convolutions 4 -> 4 3x3 on 4 x 4 pixels at batch 1, \
                     against the graph without them, per layer; optimizer: the \
                     optimizer phase of SGD, SGD with momentum, with momentum and weight decay 5e-4, and Adam over \
                     32 linear layers of 8 x 8 and one linear layer of 8 x 8, 1024 x 1024, 2048 x 2048 and 4096 x \
                     4096, median of 3 \
                     rounds; the first node of a kind (`first-<kind>`): each element-wise class's micro-graph at \
                     its smallest size, and input [16, 64] -> linear -> linear layers 64 -> 64 or adds of a tensor \
                     to itself -> MSE at batch 1, with one and with {s} nodes after a pass over 4 MiB of other \
                     data, the first node's cost less a repeated one's, median of 5 rounds",
                    n = crate::calibrate::stepcost::NODE_STACK,
                    s = crate::calibrate::elementwise::ELEMENTWISE_STACK
                ));
            }
            Err(why) => c.method.push_str(&format!("; per-node and optimizer costs not measured: {why}")),
        }
        match &link {
            Some(Ok(l)) => c.method.push_str(&format!("; intra-node link: {}", l.method)),
            Some(Err(why)) => c.method.push_str(&format!("; intra-node link not measured: {why}")),
            None => {}
        }
        for (class, why) in skipped {
            c.method.push_str(&format!("; element-wise {class} not measured: {why}"));
        }
        for (class, why) in first_skipped {
            c.method.push_str(&format!("; the first {class} of a step not measured: {why}"));
        }
        c.method.push_str(&format!(
            "; bandwidth by working set: the same add over 3 x {} fp32 elements",
            BANDWIDTH_ELEMENTS.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", ")
        ));
    }
    if let Some(Ok(l)) = link {
        profile.intra_node = Some(l.link);
    }
    Ok(profile)
}

/// A synthetic load reading (`--load-reading`, JSON).
fn read_load_reading(path: &Path) -> Result<LoadReading, CommandError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| CommandError::Io { path: path.display().to_string(), source: e })?;
    serde_json::from_str(&text).map_err(|e| CommandError::Input(format!("{}: not a load reading: {e}", path.display())))
}
