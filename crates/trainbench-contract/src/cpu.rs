//! The host CPU's instruction-set features that decide which kernels a CPU backend can run, read without
//! loading any backend library: the kernel's `/proc/cpuinfo` flags on Linux (what `grep flags /proc/cpuinfo`
//! shows), the CPU's own feature detection elsewhere, and a cap a user put on oneDNN with
//! `ONEDNN_MAX_CPU_ISA` (or its older name `DNNL_MAX_CPU_ISA`).
//!
//! Why it matters: libtorch 2.13 runs some layers on the CPU through oneDNN primitives that exist only for some
//! instruction sets (a bf16 LSTM needs AVX-512; on an AVX2-only CPU oneDNN fails with "could not create a
//! primitive descriptor"). Backends declare such needs as [`crate::capability::CpuRequirement`]s and the plan
//! refuses the run, naming the missing feature, instead of letting it fail mid-sweep.

use std::sync::OnceLock;

/// Feature flags recorded in results and consulted by requirements, in the kernel's spelling.
pub const RECORDED_FLAGS: &[&str] = &[
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx_vnni",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512dq",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_fp16",
    "neon",
    "asimd",
    "sve",
];

/// An instruction-set level a kernel library needs, in oneDNN's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CpuIsa {
    /// AVX2 with FMA (oneDNN `AVX2`).
    Avx2,
    /// AVX-512 foundation with the BW, VL and DQ extensions (oneDNN `AVX512_CORE`).
    Avx512Core,
    /// AVX-512 with native bf16 instructions (oneDNN `AVX512_CORE_BF16`).
    Avx512Bf16,
    /// Advanced Matrix Extensions with bf16 tiles (oneDNN `AVX512_CORE_AMX`).
    AmxBf16,
}

impl CpuIsa {
    /// The `/proc/cpuinfo` flags this level needs.
    pub fn flags(self) -> &'static [&'static str] {
        match self {
            CpuIsa::Avx2 => &["avx2", "fma"],
            CpuIsa::Avx512Core => &["avx512f", "avx512bw", "avx512vl", "avx512dq"],
            CpuIsa::Avx512Bf16 => &["avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16"],
            CpuIsa::AmxBf16 => &["avx512f", "avx512bw", "avx512vl", "avx512dq", "amx_tile", "amx_bf16"],
        }
    }

    /// oneDNN's name for this level (a value of `ONEDNN_MAX_CPU_ISA`).
    pub fn onednn_name(self) -> &'static str {
        match self {
            CpuIsa::Avx2 => "AVX2",
            CpuIsa::Avx512Core => "AVX512_CORE",
            CpuIsa::Avx512Bf16 => "AVX512_CORE_BF16",
            CpuIsa::AmxBf16 => "AVX512_CORE_AMX",
        }
    }

    /// A short name for people (`AVX-512`).
    pub fn label(self) -> &'static str {
        match self {
            CpuIsa::Avx2 => "AVX2",
            CpuIsa::Avx512Core => "AVX-512 (F, BW, VL, DQ)",
            CpuIsa::Avx512Bf16 => "AVX-512 BF16",
            CpuIsa::AmxBf16 => "AMX-BF16",
        }
    }
}

/// oneDNN's ISA names from lowest to highest; a cap admits every level at or below its own rank.
const ONEDNN_ORDER: &[&str] = &[
    "SSE41",
    "AVX",
    "AVX2",
    "AVX2_VNNI",
    "AVX2_VNNI_2",
    "AVX512_CORE",
    "AVX512_CORE_VNNI",
    "AVX512_CORE_BF16",
    "AVX512_CORE_FP16",
    "AVX10_1_512",
    "AVX512_CORE_AMX",
    "AVX10_1_512_AMX",
    "AVX512_CORE_AMX_FP16",
    "AVX10_1_512_AMX_FP16",
    "AVX10_2_512",
    "AVX10_2_512_AMX_2",
];

/// The host CPU's relevant features and any cap on oneDNN's instruction sets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuFeatures {
    flags: Vec<String>,
    onednn_cap: Option<String>,
}

/// Why oneDNN cannot use an instruction-set level on this CPU.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IsaUnavailable {
    /// The CPU lacks some of the level's flags.
    #[error("this CPU lacks {isa} ({flags})")]
    MissingFlags {
        /// The level's label.
        isa: &'static str,
        /// The flags missing, comma-separated.
        flags: String,
    },
    /// `ONEDNN_MAX_CPU_ISA` caps oneDNN below the level.
    #[error("ONEDNN_MAX_CPU_ISA={cap} caps oneDNN below {isa} ({label})")]
    Capped {
        /// The cap in effect.
        cap: String,
        /// The level's oneDNN name.
        isa: &'static str,
        /// The level's label.
        label: &'static str,
    },
}

impl CpuFeatures {
    /// The features of this machine (read once per process).
    pub fn host() -> &'static CpuFeatures {
        static HOST: OnceLock<CpuFeatures> = OnceLock::new();
        HOST.get_or_init(|| CpuFeatures::new(host_flags(), onednn_cap(|name| std::env::var(name).ok())))
    }

    /// Features from a list of flags (kernel spelling) and an optional `ONEDNN_MAX_CPU_ISA` value; flags
    /// outside [`RECORDED_FLAGS`] are dropped.
    pub fn new<S: AsRef<str>>(flags: impl IntoIterator<Item = S>, onednn_cap: Option<String>) -> Self {
        let present: Vec<String> = flags.into_iter().map(|f| f.as_ref().to_ascii_lowercase()).collect();
        let flags = RECORDED_FLAGS.iter().filter(|f| present.iter().any(|p| p == *f)).map(|f| f.to_string()).collect();
        let onednn_cap = onednn_cap.map(|c| c.trim().to_ascii_uppercase());
        Self { flags, onednn_cap }
    }

    /// The recorded flags this CPU has, in [`RECORDED_FLAGS`] order.
    pub fn flags(&self) -> &[String] {
        &self.flags
    }

    /// The `ONEDNN_MAX_CPU_ISA` cap in effect, if any.
    pub fn onednn_cap(&self) -> Option<&str> {
        self.onednn_cap.as_deref()
    }

    /// Whether oneDNN can use `isa` here; otherwise what is missing, for a message
    /// (`this CPU lacks avx512f, avx512bw`, or the cap that forbids it).
    pub fn supports(&self, isa: CpuIsa) -> Result<(), IsaUnavailable> {
        let missing: Vec<&str> =
            isa.flags().iter().copied().filter(|f| !self.flags.iter().any(|have| have == f)).collect();
        if !missing.is_empty() {
            return Err(IsaUnavailable::MissingFlags { isa: isa.label(), flags: missing.join(", ") });
        }
        if let Some(cap) = &self.onednn_cap {
            let rank = |name: &str| ONEDNN_ORDER.iter().position(|n| *n == name);
            if let (Some(have), Some(need)) = (rank(cap), rank(isa.onednn_name()))
                && have < need
            {
                return Err(IsaUnavailable::Capped { cap: cap.clone(), isa: isa.onednn_name(), label: isa.label() });
            }
        }
        Ok(())
    }

    /// The highest level of [`CpuIsa`] oneDNN can use here, if any (a one-word summary for logs).
    pub fn best(&self) -> Option<CpuIsa> {
        [CpuIsa::AmxBf16, CpuIsa::Avx512Bf16, CpuIsa::Avx512Core, CpuIsa::Avx2]
            .into_iter()
            .find(|isa| self.supports(*isa).is_ok())
    }
}

/// The cap on oneDNN's instruction sets, from the variables `var` reads: `ONEDNN_MAX_CPU_ISA`, else its older
/// name `DNNL_MAX_CPU_ISA`; a blank value is no cap.
fn onednn_cap(var: impl Fn(&str) -> Option<String>) -> Option<String> {
    ["ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"].iter().find_map(|name| var(name).filter(|v| !v.trim().is_empty()))
}

/// The CPU's feature flags: `/proc/cpuinfo` on Linux, the standard library's detection on other x86 systems.
fn host_flags() -> Vec<String> {
    std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|text| cpuinfo_flags(&text)).unwrap_or_else(detected_flags)
}

/// The feature flags of the first CPU in a `/proc/cpuinfo` text: its `flags` line (x86) or `Features` line
/// (ARM); `None` when it has neither.
fn cpuinfo_flags(text: &str) -> Option<Vec<String>> {
    let line = text.lines().find(|l| {
        let key = l.split(':').next().unwrap_or_default().trim();
        key == "flags" || key == "Features"
    })?;
    let (_, flags) = line.split_once(':')?;
    Some(flags.split_whitespace().map(str::to_string).collect())
}

#[cfg(target_arch = "x86_64")]
fn detected_flags() -> Vec<String> {
    let mut out = Vec::new();
    macro_rules! probe {
        ($($feature:tt => $flag:expr),* $(,)?) => {
            $(if std::arch::is_x86_feature_detected!($feature) { out.push($flag.to_string()); })*
        };
    }
    probe!(
        "avx" => "avx", "avx2" => "avx2", "fma" => "fma", "f16c" => "f16c",
        "avx512f" => "avx512f", "avx512bw" => "avx512bw", "avx512vl" => "avx512vl", "avx512dq" => "avx512dq",
        "avx512vnni" => "avx512_vnni", "avx512bf16" => "avx512_bf16", "avx512fp16" => "avx512_fp16",
    );
    out
}

#[cfg(not(target_arch = "x86_64"))]
fn detected_flags() -> Vec<String> {
    Vec::new()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const AVX2_HOST: &[&str] = &["fpu", "sse2", "avx", "avx2", "fma", "f16c"];
    const SAPPHIRE_RAPIDS: &[&str] =
        &["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16", "amx_tile", "amx_bf16"];

    #[test]
    fn an_avx2_cpu_lacks_avx512_and_says_which_flags() {
        let cpu = CpuFeatures::new(AVX2_HOST, None);
        assert_eq!(cpu.flags(), ["avx", "avx2", "fma", "f16c"]);
        assert!(cpu.supports(CpuIsa::Avx2).is_ok());
        let e = cpu.supports(CpuIsa::Avx512Core).unwrap_err().to_string();
        assert_eq!(e, "this CPU lacks AVX-512 (F, BW, VL, DQ) (avx512f, avx512bw, avx512vl, avx512dq)");
        assert_eq!(cpu.best(), Some(CpuIsa::Avx2));
    }

    #[test]
    fn a_onednn_cap_lowers_what_a_capable_cpu_offers() {
        let cpu = CpuFeatures::new(SAPPHIRE_RAPIDS, None);
        assert_eq!(cpu.best(), Some(CpuIsa::AmxBf16));
        let capped = CpuFeatures::new(SAPPHIRE_RAPIDS, Some("avx2".into()));
        let e = capped.supports(CpuIsa::Avx512Core).unwrap_err().to_string();
        assert!(e.contains("ONEDNN_MAX_CPU_ISA=AVX2 caps oneDNN below AVX512_CORE"), "{e}");
        assert_eq!(capped.best(), Some(CpuIsa::Avx2));
        // A cap at or above the level, or one oneDNN does not rank (`ALL`), admits it.
        assert!(CpuFeatures::new(SAPPHIRE_RAPIDS, Some("AVX512_CORE".into())).supports(CpuIsa::Avx512Core).is_ok());
        assert!(CpuFeatures::new(SAPPHIRE_RAPIDS, Some("ALL".into())).supports(CpuIsa::AmxBf16).is_ok());
    }

    /// The start of an x86 `/proc/cpuinfo` (Linux 6.x): `vmx flags` and `bugs` lines follow `flags`.
    const X86_CPUINFO: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n\
        flags\t\t: fpu vme sse2 avx avx2 fma f16c avx512f avx512bw avx512vl avx512dq avx512_bf16 amx_bf16 amx_tile\n\
        vmx flags\t: vnmi preemption_timer invvpid ept_x_only\nbugs\t\t: spectre_v1 spectre_v2\n\n\
        processor\t: 1\nflags\t\t: fpu sse2\n";
    /// An ARM `/proc/cpuinfo` (a Neoverse N1).
    const ARM_CPUINFO: &str = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes crc32 atomics\n\
        CPU implementer\t: 0x41\n";

    #[test]
    fn the_flags_come_from_the_first_cpus_flags_line() {
        let flags = cpuinfo_flags(X86_CPUINFO).unwrap();
        assert_eq!(flags[..3], ["fpu", "vme", "sse2"]);
        assert_eq!(flags.len(), 14, "not the `vmx flags` or the second CPU's line: {flags:?}");
        let cpu = CpuFeatures::new(flags, None);
        assert_eq!(cpu.best(), Some(CpuIsa::AmxBf16));
        assert_eq!(CpuFeatures::new(cpuinfo_flags(ARM_CPUINFO).unwrap(), None).flags(), ["asimd"]);
        assert_eq!(cpuinfo_flags("processor\t: 0\nvmx flags\t: avx2\n"), None);
    }

    #[test]
    fn the_onednn_cap_is_read_from_either_name_and_a_blank_one_is_none() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        assert_eq!(onednn_cap(env(&[])), None);
        assert_eq!(onednn_cap(env(&[("DNNL_MAX_CPU_ISA", "avx2")])).as_deref(), Some("avx2"));
        let both = env(&[("ONEDNN_MAX_CPU_ISA", "AVX512_CORE"), ("DNNL_MAX_CPU_ISA", "avx2")]);
        assert_eq!(onednn_cap(both).as_deref(), Some("AVX512_CORE"));
        assert_eq!(
            onednn_cap(env(&[("ONEDNN_MAX_CPU_ISA", "  "), ("DNNL_MAX_CPU_ISA", "avx2")])).as_deref(),
            Some("avx2")
        );
    }
}
