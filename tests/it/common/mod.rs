//! Test support: self-consistent synthetic results with controlled step-time distributions, for tests of
//! check, compare, audit and report that need exact control over the samples.
//!
//! A module of the `it` test binary (`crate::common`); the `glob!` test files at `tests/*.rs` include it with
//! `#[path = "it/common/mod.rs"]`.
#![allow(dead_code, missing_docs, clippy::unwrap_used)]

pub mod datasets;
pub mod expert_load;
pub mod spec_run;
pub mod trains_like;

use std::collections::BTreeMap;
use std::path::Path;

use trainbench::digest::sha256_hex;
use trainbench::result::distributed::{DistributedResult, RankPhases};
use trainbench::result::*;
use trainbench::stats::{self, SplitMix64};
use trainbench_comm::{DataParallel, Topology};
use trainbench_contract::{DeviceInfo, PhaseTimes, RunPlan};
use trainbench_graph::{OptimizerSpec, Precision};

/// Install the training engines this build links in the test process, as `trainbench-engine`'s `main` does,
/// for tests that run suites in their own process on tch or wgpu (the library links no backend). Idempotent.
pub fn link_backends() {
    trainbench::backend_registry::install(trainbench_linked::linked());
}

/// insta settings for snapshots in `golden/<subdir>/`, named without the test module's prefix: the one place
/// the integration tests say where their golden files live. Tests whose snapshot files carry no `expression:`
/// header add `set_omit_expression(true)`.
pub fn golden_settings(subdir: &str) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("golden").join(subdir));
    settings.set_prepend_module_to_snapshot(false);
    settings
}

/// What to synthesise.
#[derive(Debug, Clone)]
pub struct Synth {
    pub spec: String,
    pub batch: usize,
    pub precision: Precision,
    pub repeat: u32,
    /// Seed of the sample noise.
    pub seed: u64,
    /// Median step time before the slowdown, seconds.
    pub step_s: f64,
    /// Multiplies every step time.
    pub slowdown: f64,
    /// Relative spread of the step times (uniform, +-spread/2).
    pub spread: f64,
    pub iterations: usize,
    pub backend: String,
    pub device: String,
    pub libtorch: String,
    /// The host's best oneDNN instruction-set level (`environment.cpu.isa`).
    pub cpu_isa: Option<String>,
    /// Record the run as out of memory (no metrics).
    pub oom: bool,
    /// Report NVML GPU utilisation (this percentage) instead of "unavailable".
    pub gpu_percent: Option<f64>,
    /// A data-parallel run (a `distributed` section, the topology in the ids); `None`: one worker.
    pub dp: Option<SynthDp>,
    /// The plan's numerical settings (TF32 switches, cuDNN autotuning, initial loss scale).
    pub numerics: trainbench_contract::Numerics,
}

/// The data parallelism of a synthetic run.
#[derive(Debug, Clone, Copy)]
pub struct SynthDp {
    pub world: usize,
    pub strategy: DataParallel,
    /// Share of each step spent exchanging gradients (the other phases shrink to make room).
    pub comm_share: f64,
}

impl Synth {
    pub fn new(spec: &str, batch: usize, repeat: u32, seed: u64) -> Self {
        Self {
            spec: spec.to_string(),
            batch,
            precision: Precision::Fp32,
            repeat,
            seed,
            step_s: 0.01 * batch as f64 / 8.0 + 0.02,
            slowdown: 1.0,
            spread: 0.06,
            iterations: 40,
            backend: "mock".into(),
            device: "Mock CPU".into(),
            libtorch: "2.13.0".into(),
            cpu_isa: Some("AVX2".into()),
            oom: false,
            gpu_percent: None,
            dp: None,
            numerics: trainbench_contract::Numerics::default(),
        }
    }

    /// The same run on `world` workers with `strategy`, spending `comm_share` of each step exchanging.
    pub fn data_parallel(mut self, world: usize, strategy: DataParallel, comm_share: f64) -> Self {
        self.dp = Some(SynthDp { world, strategy, comm_share });
        self
    }

    pub fn slowdown(mut self, f: f64) -> Self {
        self.slowdown = f;
        self
    }

    pub fn config_id(&self) -> String {
        let topology = match self.dp {
            None => "1x1".to_string(),
            Some(SynthDp { world, strategy: DataParallel::ParameterServer { servers }, .. }) => {
                format!("1x{world}-ps{servers}")
            }
            Some(d) => format!("1x{}", d.world),
        };
        format!("{}.b{}.{}.{topology}", self.spec, self.batch, self.precision.as_str())
    }

    pub fn run_id(&self) -> String {
        format!("{}.r{}", self.config_id(), self.repeat)
    }

    pub fn build(&self) -> RunResult {
        let mut r = self.build_completed();
        if self.oom {
            r.outcome = RunOutcome::OutOfMemory { batch_size: self.batch, message: "simulated".into() };
            r.metrics = None;
        }
        r
    }

    fn build_completed(&self) -> RunResult {
        let mut rng = SplitMix64::new(self.seed);
        let steps: Vec<f64> = (0..self.iterations)
            .map(|i| {
                let warm = if i < 3 { 1.3 } else { 1.0 };
                self.step_s * self.slowdown * warm * (1.0 + self.spread * (rng.next_f64() - 0.5))
            })
            .collect();
        let start = stats::mser5_start(&steps);
        let steady = &steps[start..];
        let s = stats::summarize(steady).unwrap();
        let ci = stats::bootstrap_median_ci(steady, 0.95, 500, self.seed).unwrap();
        let total: f64 = steady.iter().sum();
        let sps = self.batch as f64 * steady.len() as f64 / total;
        let params = 1_000_000u64;
        let flops = 6 * params;
        let act = 40_000 * self.batch as u64;
        let estimate = MemoryEstimate {
            weights_bytes: params * 4,
            gradients_bytes: params * 4,
            optimizer_state_bytes: params * 4,
            activations_bytes: act,
            workspace_bytes: 1 << 16,
            total_bytes: params * 12 + act + (1 << 16),
        };
        let peak = params * 12 + act + act / 10;
        let comm = self.dp.map_or(0.0, |d| d.comm_share);
        let phase = |share: f64| PhaseStat { mean_s: s.mean * share, share };
        let shrunk = |share: f64| phase(share * (1.0 - comm));
        let spec_canonical = format!(
            "version = 1\nname = \"{}\"\n\n[run]\niterations = {}\n\n[sweep]\nbatch_sizes = [{}]\n",
            self.spec, self.iterations, self.batch
        );
        let plan = RunPlan {
            config: self.config_id(),
            batch_size: self.batch,
            precision: self.precision,
            warmup: 5,
            repeat: self.repeat,
            seed: 42 + u64::from(self.repeat),
            optimizer: OptimizerSpec::default(),
            topology: self.dp.map_or(Topology::single(), |d| Topology::on_one_node(d.strategy, d.world)),
            numerics: self.numerics,
            schedule: Default::default(),
            ..RunPlan::for_tests(&self.run_id(), self.iterations as u64)
        };
        let distributed = self.dp.map(|d| {
            let gradient_bytes = params * 4;
            let exchange_s = s.median * d.comm_share;
            let algorithm = (exchange_s > 0.0).then(|| gradient_bytes as f64 / exchange_s / 1e9);
            let all_reduce = d.strategy == DataParallel::AllReduce;
            let ring = 2.0 * (d.world as f64 - 1.0) / d.world as f64;
            let mean = PhaseTimes {
                data_s: s.mean * 0.1 * (1.0 - comm),
                stall_s: s.mean * 0.04 * (1.0 - comm),
                copy_s: s.mean * 0.06 * (1.0 - comm),
                forward_s: s.mean * 0.3 * (1.0 - comm),
                backward_s: s.mean * 0.45 * (1.0 - comm),
                comm_s: s.mean * comm,
                optimizer_s: s.mean * 0.1 * (1.0 - comm),
                total_s: s.mean,
            };
            DistributedResult {
                world_size: d.world,
                strategy: d.strategy.name().into(),
                parameter_servers: d.strategy.servers(),
                engine: "mpi".into(),
                engine_version: "Open MPI v4.1.4".into(),
                launcher: "trainbench".into(),
                hosts: vec!["testhost".into(); d.strategy.processes(d.world)],
                ranks: (0..d.world).map(|rank| RankPhases { rank, mean, memory: None, coords: None }).collect(),
                gradient_bytes,
                bytes_sent_per_step: if all_reduce {
                    2 * (d.world as u64 - 1) * gradient_bytes / d.world as u64
                } else {
                    gradient_bytes
                },
                bytes_by_kind: None,
                algorithm_bandwidth_gb_s: algorithm,
                bus_bandwidth_gb_s: algorithm.filter(|_| all_reduce).map(|a| a * ring),
                comm_share: Some(d.comm_share),
                overlapped: None,
                comm_total_s: None,
                weights_digest: Some("00000000feedbeef".into()),
                weights_identical: Some(true),
                pipeline: None,
                mesh_bytes: Vec::new(),
                expert_parallel: None,
            }
        });
        RunResult {
            format_version: FORMAT_VERSION,
            spec_name: self.spec.clone(),
            run_id: self.run_id(),
            backend: self.backend.clone(),
            plan,
            outcome: RunOutcome::Completed,
            metrics: Some(Metrics {
                throughput: Throughput {
                    samples_per_s: sps,
                    items_per_s: sps,
                    item_unit: "samples".into(),
                    items_per_sample: 1,
                    items_per_s_per_device: None,
                    free_running: None,
                },
                step_time: StepTimeStats {
                    n: s.n,
                    mean_s: s.mean,
                    median_s: s.median,
                    p5_s: s.p5,
                    p95_s: s.p95,
                    p99_s: s.p99,
                    stdev_s: s.stdev,
                    cv: s.cv,
                    min_s: s.min,
                    max_s: s.max,
                    outliers: s.outliers,
                    median_ci95_s: [ci.0, ci.1],
                    percentile_relative_error: None,
                },
                samples_seen: Some(steps.len() as u64),
                samples_kept: Some(steps.len() as u64),
                step_indices: None,
                step_times_s: steps.clone(),
                steady_state: SteadyState {
                    warmup_iterations: 5,
                    method: "mser-5".into(),
                    start_index: start,
                    truncated: start,
                    reached: start < steps.len() / 2,
                },
                phases: PhaseBreakdown {
                    synchronised: true,
                    data: shrunk(0.1),
                    data_stall: shrunk(0.04),
                    data_copy: shrunk(0.06),
                    forward: shrunk(0.3),
                    backward: shrunk(0.45),
                    comm: phase(comm),
                    optimizer: shrunk(0.1),
                    other: shrunk(0.05),
                },
                gpu: match self.gpu_percent {
                    Some(p) => Sampled::Available(GpuUtilization {
                        device_index: 0,
                        samples: 20,
                        utilization_mean_percent: p,
                        utilization_max_percent: p.max(99.0),
                        memory_utilization_mean_percent: p / 2.0,
                        memory_used_max_bytes: 2 << 30,
                        process_memory_max_bytes: Some(1 << 30),
                        sm_clock_mean_mhz: 1755.0,
                        temperature_max_c: 61.0,
                        scope: None,
                    }),
                    None => Sampled::unavailable("CPU run"),
                },
                flops: FlopUtilization {
                    flops_per_sample: Some(flops),
                    achieved_flop_per_s: Some(flops as f64 * sps),
                    peak_flop_per_s: Some(2.6e11),
                    peak_source: Some("measured: fp32 GEMM".into()),
                    peak_precision: None,
                    fraction: Some(flops as f64 * sps / 2.6e11),
                    mfu: None,
                    tf32: None,
                },
                cpu: Sampled::Available(CpuUtilization {
                    cores: 2,
                    utilization: 0.9,
                    busy_cores: 1.8,
                    rss_mean_bytes: 200 << 20,
                    rss_max_bytes: 210 << 20,
                    samples: 10,
                }),
                power: Sampled::unavailable("no NVIDIA driver"),
                memory: MemoryBreakdown {
                    measured: MemoryMeasuredSummary {
                        weights_bytes: params * 4,
                        gradients_bytes: params * 4,
                        optimizer_state_bytes: params * 4,
                        activations_and_workspace_bytes: Some(peak - params * 12),
                        peak_allocated_bytes: Some(peak),
                        reserved_bytes: Some(peak + (1 << 20)),
                        activations_bytes: None,
                        workspace_bytes: None,
                        breakdown_to_peak: None,
                    },
                    estimate: Some(estimate.clone()),
                    estimate_error: None,
                },
                loss: Some(LossSummary { first: Some(2.3), last: Some(2.1), all_finite: true }),
                time_to_target: None,
                expert_load: None,
                gradient_norm: None,
                weight_norms: None,
            }),
            analysis: Some(AnalysisSummary {
                parameters: params,
                trainable_parameters: None,
                active_parameters: None,
                buffers: 0,
                forward_flops_per_sample: 2 * params,
                backward_flops_per_sample: 4 * params,
                train_flops_per_sample: flops,
                model_flops: None,
                hardware_flops_per_sample: None,
                memory: estimate,
                notes: Vec::new(),
                pipeline_stages: Vec::new(),
            }),
            environment: Environment {
                trainbench_version: "0.1.0".into(),
                git_commit: "unknown".into(),
                spec_sha256: sha256_hex(&spec_canonical),
                spec_canonical,
                library_versions: BTreeMap::from([("libtorch".to_string(), self.libtorch.clone())]),
                device: Some(DeviceInfo {
                    selector: "cpu".into(),
                    name: self.device.clone(),
                    kind: "cpu".into(),
                    memory_bytes: None,
                    peak_flops_fp32: Some(2.6e11),
                    details: BTreeMap::new(),
                }),
                gpus: Sampled::unavailable("no NVIDIA driver"),
                cpu: CpuInfo {
                    model: "Test CPU".into(),
                    logical_cores: 2,
                    memory_bytes: Some(24 << 30),
                    features: ["avx", "avx2", "fma", "f16c"].map(String::from).to_vec(),
                    onednn_isa_cap: None,
                    isa: self.cpu_isa.clone(),
                },
                os: OsInfo {
                    family: "linux".into(),
                    distribution: Some("Debian GNU/Linux 12".into()),
                    kernel: Some("6.1.0".into()),
                    arch: "x86_64".into(),
                },
                hostname: "testhost".into(),
                env_vars: BTreeMap::new(),
                seed: 42 + u64::from(self.repeat),
                started_at: "2026-11-30T00:00:00Z".into(),
                finished_at: "2026-11-30T00:00:05Z".into(),
                // Each repeat in a process of its own, as `run.isolation = "process"` does.
                process: Some(ProcessInfo { pid: 1000 + self.repeat, own_process_per_repeat: true }),
                scheduler: None,
            },
            distributed,
            data: None,
            prediction: None,
            mlperf: None,
        }
    }

    /// Write the result as `<dir>/<run id>.json`.
    pub fn write(&self, dir: &Path) -> std::path::PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(format!("{}.json", self.run_id()));
        std::fs::write(&path, serde_json::to_string_pretty(&self.build()).unwrap()).unwrap();
        path
    }
}

/// Write `<dir>/<name>.toml`: the mock MLP 8-8-2 at batch 2 with one warm-up step, `iterations` measured ones
/// and `repeats` repeats (tests of long runs, stops and audits).
pub fn mock_mlp_spec(dir: &std::path::Path, name: &str, iterations: u64, repeats: u32) -> std::path::PathBuf {
    let spec = dir.join(format!("{name}.toml"));
    let text = format!(
        "version = 1\nname = \"{name}\"\n[model]\nfamily = \"mlp\"\ninputs = 8\nhidden = [8]\nclasses = 2\n\
         [topology]\nbackend = \"mock\"\n[sweep]\nbatch_sizes = [2]\n[run]\nwarmup = 1\niterations = {iterations}\n\
         repeats = {repeats}\n"
    );
    std::fs::write(&spec, text).expect("a spec file in the test's folder");
    spec
}
