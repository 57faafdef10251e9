//! What each backend can run, as static data every stage reads: the devices it drives, the precisions per
//! device, the largest world size, the layers it never runs and the layers that need a CPU feature. It exists
//! whether or not the backend is compiled in, and points at what its lowering refuses ([`crate::lowering`]:
//! shapes, graph structure), so a spec is checked the same way in every build and in every process, linked to
//! the backend or not ([`Capabilities::refusal`], which the backends' own `supports` answer with).

pub use crate::backend_kind::BackendKind;
use crate::cpu::{CpuFeatures, CpuIsa};
use crate::device::DeviceFamily;
use crate::error::BackendError;
use crate::plan::RunPlan;
use trainbench_graph::graph::Graph;
use trainbench_graph::training::Precision;

impl BackendKind {
    /// What this backend can run.
    pub fn capabilities(self) -> &'static Capabilities {
        match self {
            BackendKind::Tch => &TCH,
            BackendKind::Wgpu => &WGPU,
            BackendKind::Mock => &MOCK,
        }
    }
}

/// A layer kind a backend never runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefusedOp {
    /// The operation kind (`Op::kind_name`).
    pub op: &'static str,
    /// Why, and what to do instead.
    pub reason: &'static str,
}

/// A layer kind that needs a CPU feature at some precision on the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuRequirement {
    /// The operation kind (`Op::kind_name`).
    pub op: &'static str,
    /// The precision at which the need arises.
    pub precision: Precision,
    /// The instruction-set level it needs.
    pub needs: CpuIsa,
    /// Which library path needs it, and what to do instead.
    pub why: &'static str,
}

/// Everything a backend declares about what it can run.
#[derive(Debug, Clone, Copy)]
pub struct Capabilities {
    /// Backend name.
    pub name: &'static str,
    /// Cargo feature that builds it (`None`: always built).
    pub feature: Option<&'static str>,
    /// Device families it drives, the first being where `auto` puts a spec written for another family.
    pub devices: &'static [DeviceFamily],
    /// Precisions it trains in, per device family.
    pub precisions: &'static [(DeviceFamily, &'static [Precision])],
    /// Why some precisions are missing, and what to do instead (for messages).
    pub precision_hint: &'static str,
    /// Largest data-parallel world size it runs.
    pub max_world_size: usize,
    /// Layer kinds it never runs.
    pub refused_ops: &'static [RefusedOp],
    /// Layer kinds that need a CPU feature on the CPU.
    pub cpu_requirements: &'static [CpuRequirement],
    /// What its lowering refuses beyond the declarations above ([`crate::lowering`]): pure, so a process that
    /// does not link the backend answers it too.
    pub lowering: fn(&RunPlan, &Graph) -> Result<(), BackendError>,
}

const ALL_PRECISIONS: &[Precision] = &[Precision::Fp32, Precision::Fp16, Precision::Bf16];

/// libtorch: fp16 autocast with loss scaling is CUDA-only; bf16 LSTMs on the CPU go through oneDNN.
pub const TCH: Capabilities = Capabilities {
    name: BackendKind::Tch.name(),
    feature: Some("tch"),
    devices: &[DeviceFamily::Cpu, DeviceFamily::Cuda],
    precisions: &[(DeviceFamily::Cpu, &[Precision::Fp32, Precision::Bf16]), (DeviceFamily::Cuda, ALL_PRECISIONS)],
    precision_hint: "tch's fp16 autocast with loss scaling runs only on CUDA; use `bf16` on the CPU, or a `cuda` device",
    max_world_size: usize::MAX,
    refused_ops: &[],
    cpu_requirements: &[CpuRequirement {
        op: "lstm",
        precision: Precision::Bf16,
        needs: CpuIsa::Avx512Core,
        why: "libtorch runs bf16 LSTMs on the CPU through oneDNN, whose bf16 LSTM primitive exists only for \
              AVX-512 and up; use precision = \"fp32\" on this CPU, or a CUDA device",
    }],
    lowering: crate::lowering::tch::supports_lowering,
};

/// burn's wgpu backend: fp32 only, no second-order gradients, no RoIAlign.
pub const WGPU: Capabilities = Capabilities {
    name: BackendKind::Wgpu.name(),
    feature: Some("wgpu"),
    devices: &[DeviceFamily::Wgpu],
    precisions: &[(DeviceFamily::Wgpu, &[Precision::Fp32])],
    precision_hint: "the wgpu backend trains in fp32 only for now (burn has no autocast or loss scaling); use `fp32`, \
                     or a `cuda` device with tch",
    max_world_size: 1,
    refused_ops: &[
        RefusedOp { op: "roi_align", reason: "RoIAlign has no implementation in burn 0.22" },
        RefusedOp {
            op: "lora",
            reason: "LoRA fine-tuning (`[training.lora]`) is not implemented on wgpu: its lowering has no adapter \
                     layer and does not freeze the base weights; use the tch backend",
        },
        RefusedOp {
            op: "moe",
            reason: "mixture-of-experts layers (`[model.moe]`) are not implemented on wgpu: its lowering has no \
                     router, top-k dispatch or per-expert products; use the tch backend",
        },
        RefusedOp {
            op: "critic_batch",
            reason: "WGAN-GP's critic batch feeds a gradient penalty (second-order gradients), which burn's \
                     autodiff does not provide",
        },
    ],
    cpu_requirements: &[],
    lowering: crate::lowering::wgpu::supports_lowering,
};

/// The mock backend accepts everything (it computes nothing).
pub const MOCK: Capabilities = Capabilities {
    name: BackendKind::Mock.name(),
    feature: None,
    devices: &[DeviceFamily::Cpu, DeviceFamily::Cuda, DeviceFamily::Wgpu],
    precisions: &[
        (DeviceFamily::Cpu, ALL_PRECISIONS),
        (DeviceFamily::Cuda, ALL_PRECISIONS),
        (DeviceFamily::Wgpu, ALL_PRECISIONS),
    ],
    precision_hint: "",
    max_world_size: usize::MAX,
    refused_ops: &[],
    cpu_requirements: &[],
    lowering: crate::lowering::mock,
};

impl Capabilities {
    /// Whether it drives devices of `family`.
    pub fn drives(&self, family: DeviceFamily) -> bool {
        self.devices.contains(&family)
    }

    /// The precisions it trains in on `family` (empty when it does not drive that family).
    pub fn precisions_on(&self, family: DeviceFamily) -> &'static [Precision] {
        self.precisions.iter().find(|(f, _)| *f == family).map_or(&[], |(_, p)| p)
    }

    /// The precisions it trains in on `family`, for messages: `` `fp32` or `bf16` ``.
    pub fn precision_list(&self, family: DeviceFamily) -> String {
        let names: Vec<String> = self.precisions_on(family).iter().map(|p| format!("`{}`", p.as_str())).collect();
        match names.split_last() {
            None => "nothing".into(),
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        }
    }

    /// Refuse a world size above [`Capabilities::max_world_size`] (asked just before a run: a sweep may mix
    /// topologies this backend runs with ones it does not).
    pub fn check_world_size(&self, plan: &RunPlan, graph: &Graph) -> Result<(), BackendError> {
        if plan.topology.world_size() <= self.max_world_size {
            return Ok(());
        }
        Err(BackendError::Unsupported {
            backend: self.name,
            layer: graph.name.clone(),
            op: "data_parallel".into(),
            reason: format!(
                "world size {} is more than the {} backend runs ({}); data-parallel training is not implemented \
                 yet, run one device per process",
                plan.topology.world_size(),
                self.name,
                self.max_world_size
            ),
        })
    }

    /// The first refusal of `plan` on `graph` this declaration implies on a host with `cpu`: a device family
    /// it does not drive, a precision it lacks there, a layer it never runs, a layer whose CPU need this host
    /// does not meet. World sizes are left to the runner (a sweep may mix topologies).
    pub fn refusal(&self, plan: &RunPlan, graph: &Graph, cpu: &CpuFeatures) -> Option<BackendError> {
        self.declared_refusal(plan, graph, cpu).or_else(|| (self.lowering)(plan, graph).err())
    }

    /// [`Capabilities::refusal`] from the declared fields alone, before the lowering is asked.
    fn declared_refusal(&self, plan: &RunPlan, graph: &Graph, cpu: &CpuFeatures) -> Option<BackendError> {
        let unsupported = |layer: &str, op: &str, reason: String| BackendError::Unsupported {
            backend: self.name,
            layer: layer.to_string(),
            op: op.to_string(),
            reason,
        };
        let family = plan.device.family();
        if !self.drives(family) {
            return Some(BackendError::Device {
                selector: plan.device.to_string(),
                reason: format!("the {} backend does not drive {family} devices", self.name),
            });
        }
        if !self.precisions_on(family).contains(&plan.precision) {
            return Some(unsupported(
                &graph.name,
                &format!("precision {}", plan.precision.as_str()),
                format!(
                    "precision {} does not run on {family} devices (this backend runs {} there): {}",
                    plan.precision.as_str(),
                    self.precision_list(family),
                    self.precision_hint
                ),
            ));
        }
        for node in &graph.nodes {
            let kind = node.op.kind_name();
            if let Some(r) = self.refused_ops.iter().find(|r| r.op == kind) {
                return Some(unsupported(&node.name, kind, r.reason.to_string()));
            }
            if family != DeviceFamily::Cpu {
                continue;
            }
            for req in self.cpu_requirements.iter().filter(|r| r.op == kind && r.precision == plan.precision) {
                if let Err(missing) = cpu.supports(req.needs) {
                    return Some(unsupported(
                        &node.name,
                        kind,
                        format!(
                            "{} at precision {} on the CPU needs {}, and {missing}: {}",
                            kind,
                            plan.precision.as_str(),
                            req.needs.label(),
                            req.why
                        ),
                    ));
                }
            }
        }
        None
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::device::DeviceSelector;
    use trainbench_graph::model::ModelSpec;

    fn lstm_graph() -> Graph {
        let spec: ModelSpec = serde_json::from_value(serde_json::json!({
            "family": "seq2seq", "src_vocab": 50, "tgt_vocab": 40, "hidden": 16, "layers": 1, "seq_len": 4
        }))
        .unwrap();
        trainbench_graph::zoo::build(&spec).unwrap()
    }

    fn plan(device: DeviceSelector, precision: Precision) -> RunPlan {
        RunPlan { device, precision, ..RunPlan::for_tests("cap", 2) }
    }

    #[test]
    fn bf16_lstm_on_an_avx2_cpu_is_refused_naming_layer_precision_and_feature() {
        let avx2 = CpuFeatures::new(["avx2", "fma"], None);
        let e = TCH.refusal(&plan(DeviceSelector::Cpu, Precision::Bf16), &lstm_graph(), &avx2).unwrap();
        let text = e.to_string();
        assert!(matches!(&e, BackendError::Unsupported { op, .. } if op == "lstm"), "{text}");
        assert!(text.contains("bf16") && text.contains("AVX-512") && text.contains("avx512f"), "{text}");
        let avx512 = CpuFeatures::new(["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"], None);
        assert_eq!(TCH.refusal(&plan(DeviceSelector::Cpu, Precision::Bf16), &lstm_graph(), &avx512), None);
        // Not on CUDA, not in fp32.
        assert_eq!(TCH.refusal(&plan(DeviceSelector::Cuda(None), Precision::Bf16), &lstm_graph(), &avx2), None);
        assert_eq!(TCH.refusal(&plan(DeviceSelector::Cpu, Precision::Fp32), &lstm_graph(), &avx2), None);
    }

    #[test]
    fn precisions_and_devices_come_from_the_table() {
        let cpu = CpuFeatures::default();
        let g = lstm_graph();
        let e = TCH.refusal(&plan(DeviceSelector::Cpu, Precision::Fp16), &g, &cpu).unwrap();
        assert!(e.to_string().contains("this backend runs `fp32` or `bf16` there"), "{e}");
        let e = WGPU.refusal(&plan(DeviceSelector::Cpu, Precision::Fp32), &g, &cpu).unwrap();
        assert!(matches!(e, BackendError::Device { .. }), "{e}");
        assert!(MOCK.refusal(&plan(DeviceSelector::Cuda(Some(1)), Precision::Fp16), &g, &cpu).is_none());
        assert_eq!(BackendKind::Wgpu.capabilities().precisions_on(DeviceFamily::Wgpu), &[Precision::Fp32]);
        assert_eq!(BackendKind::Tch.name(), "tch");
    }
}
