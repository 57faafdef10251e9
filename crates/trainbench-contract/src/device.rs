//! Device selectors (`cpu`, `cuda`, `cuda:N`, `wgpu`, `wgpu:N`, `wgpu:discrete|integrated|cpu`): the one
//! place they are parsed. A spec's `topology.device` is parsed here when the spec is validated; every later
//! stage (plan, runner, collectors, backends) holds the typed [`DeviceSelector`] and each backend maps it to
//! its own device in one function.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The allowed selector forms, for messages.
pub const SELECTOR_FORMS: &str =
    "`cpu`, `cuda`, `cuda:N`, `wgpu`, `wgpu:N`, `wgpu:discrete`, `wgpu:integrated` or `wgpu:cpu`";

/// A parsed device selector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceSelector {
    /// The host CPU (through tch).
    Cpu,
    /// A CUDA device: the default one, or the one with this index.
    Cuda(Option<usize>),
    /// A wgpu adapter.
    Wgpu(WgpuAdapter),
}

/// Which wgpu adapter a `wgpu...` selector picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WgpuAdapter {
    /// wgpu's default (high-performance) adapter.
    Default,
    /// The adapter with this index in wgpu's enumeration.
    Index(usize),
    /// The first discrete GPU.
    Discrete,
    /// The first integrated GPU.
    Integrated,
    /// A software (CPU) adapter, e.g. lavapipe.
    Cpu,
}

/// The family of a device, deciding which backend can drive it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceFamily {
    /// CPU through libtorch.
    Cpu,
    /// CUDA through libtorch.
    Cuda,
    /// Any wgpu adapter.
    Wgpu,
}

impl DeviceSelector {
    /// The CUDA ordinal this selector names (`cuda` is device 0); `None` for other families.
    pub fn cuda_ordinal(self) -> Option<usize> {
        match self {
            DeviceSelector::Cuda(i) => Some(i.unwrap_or(0)),
            _ => None,
        }
    }

    /// The selector with defaults made explicit (`cuda` is `cuda:0`), for comparing two selectors of one device.
    pub fn canonical(self) -> Self {
        match self {
            DeviceSelector::Cuda(None) => DeviceSelector::Cuda(Some(0)),
            other => other,
        }
    }

    /// The family of this device.
    pub fn family(self) -> DeviceFamily {
        match self {
            DeviceSelector::Cpu => DeviceFamily::Cpu,
            DeviceSelector::Cuda(_) => DeviceFamily::Cuda,
            DeviceSelector::Wgpu(_) => DeviceFamily::Wgpu,
        }
    }
}

impl fmt::Display for DeviceFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceFamily::Cpu => "cpu",
            DeviceFamily::Cuda => "cuda",
            DeviceFamily::Wgpu => "wgpu",
        })
    }
}

/// Why a selector does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid device `{selector}`: {reason}")]
pub struct DeviceParseError {
    /// The selector as written.
    pub selector: String,
    /// What is wrong with it.
    pub reason: String,
}

impl FromStr for DeviceSelector {
    type Err = DeviceParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| DeviceParseError { selector: s.to_string(), reason: reason.to_string() };
        let (head, tail) = match s.split_once(':') {
            Some((h, t)) => (h, Some(t)),
            None => (s, None),
        };
        let index = |t: &str| -> Result<usize, DeviceParseError> {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) || t.len() > 4 {
                return Err(err("the index after `:` must be a device number such as `0`"));
            }
            t.parse().map_err(|_| err("the device number is too large"))
        };
        match (head, tail) {
            ("cpu", None) => Ok(DeviceSelector::Cpu),
            ("cpu", Some(_)) => Err(err("`cpu` takes no index")),
            ("cuda", None) => Ok(DeviceSelector::Cuda(None)),
            ("cuda", Some(t)) => Ok(DeviceSelector::Cuda(Some(index(t)?))),
            ("wgpu", None) => Ok(DeviceSelector::Wgpu(WgpuAdapter::Default)),
            ("wgpu", Some("discrete")) => Ok(DeviceSelector::Wgpu(WgpuAdapter::Discrete)),
            ("wgpu", Some("integrated")) => Ok(DeviceSelector::Wgpu(WgpuAdapter::Integrated)),
            ("wgpu", Some("cpu")) => Ok(DeviceSelector::Wgpu(WgpuAdapter::Cpu)),
            ("wgpu", Some(t)) => {
                if t.bytes().all(|b| b.is_ascii_digit()) {
                    Ok(DeviceSelector::Wgpu(WgpuAdapter::Index(index(t)?)))
                } else {
                    Err(err("after `wgpu:` write an adapter number, `discrete`, `integrated` or `cpu`"))
                }
            }
            _ => Err(err("unknown device kind")),
        }
    }
}

impl fmt::Display for DeviceSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSelector::Cpu => f.write_str("cpu"),
            DeviceSelector::Cuda(None) => f.write_str("cuda"),
            DeviceSelector::Cuda(Some(i)) => write!(f, "cuda:{i}"),
            DeviceSelector::Wgpu(WgpuAdapter::Default) => f.write_str("wgpu"),
            DeviceSelector::Wgpu(WgpuAdapter::Index(i)) => write!(f, "wgpu:{i}"),
            DeviceSelector::Wgpu(WgpuAdapter::Discrete) => f.write_str("wgpu:discrete"),
            DeviceSelector::Wgpu(WgpuAdapter::Integrated) => f.write_str("wgpu:integrated"),
            DeviceSelector::Wgpu(WgpuAdapter::Cpu) => f.write_str("wgpu:cpu"),
        }
    }
}

impl Serialize for DeviceSelector {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DeviceSelector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Cow::<str>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for DeviceSelector {
    fn schema_name() -> Cow<'static, str> {
        "DeviceSelector".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "Device selector: `cpu`, `cuda`, `cuda:N`, `wgpu`, `wgpu:N`, `wgpu:discrete`, \
                            `wgpu:integrated` or `wgpu:cpu`.",
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_form_round_trips() {
        for s in ["cpu", "cuda", "cuda:0", "cuda:7", "wgpu", "wgpu:1", "wgpu:discrete", "wgpu:integrated", "wgpu:cpu"] {
            let d: DeviceSelector = s.parse().unwrap();
            assert_eq!(d.to_string(), s);
        }
    }

    #[test]
    fn serde_uses_the_written_form() {
        let d: DeviceSelector = serde_json::from_str("\"cuda:3\"").unwrap();
        assert_eq!(d, DeviceSelector::Cuda(Some(3)));
        assert_eq!(d.cuda_ordinal(), Some(3));
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"cuda:3\"");
        assert!(serde_json::from_str::<DeviceSelector>("\"gpu\"").is_err());
        assert_eq!(DeviceSelector::Cuda(None).cuda_ordinal(), Some(0));
        assert_eq!(DeviceSelector::Cpu.cuda_ordinal(), None);
        assert_eq!(DeviceSelector::Cuda(None).canonical(), DeviceSelector::Cuda(Some(0)));
        assert_eq!(DeviceSelector::Cpu.canonical(), DeviceSelector::Cpu);
    }

    #[test]
    fn bad_forms_are_rejected() {
        for s in ["", "gpu", "cuda:", "cuda:x", "cuda:-1", "cpu:0", "wgpu:fast", "CUDA", "cuda:99999", "cuda:0:1"] {
            assert!(s.parse::<DeviceSelector>().is_err(), "{s} parsed");
        }
    }
}
