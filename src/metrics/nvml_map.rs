//! Which NVML device a CUDA device is. NVML numbers GPUs in PCI order; CUDA numbers them fastest-first unless
//! `CUDA_DEVICE_ORDER=PCI_BUS_ID`, and only among `CUDA_VISIBLE_DEVICES` (indices, `GPU-…` UUIDs or `MIG-…`
//! instances). The PCI bus id names the same GPU to both, so it decides whenever the backend reports one; the
//! other rules apply only where they are exact, and otherwise the mapping is refused rather than guessed.

/// One GPU as NVML lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmlEntry {
    /// NVML index (PCI order).
    pub index: u32,
    /// PCI bus id as NVML writes it (`00000000:17:00.0`).
    pub pci_bus_id: String,
    /// UUID (`GPU-…`).
    pub uuid: String,
}

/// A PCI address (domain, bus, device, function), parsed from either NVML's form (`00000000:17:00.0`, 8-digit
/// domain) or CUDA's (`0000:17:00.0`), case-insensitively; `None` when malformed.
pub fn parse_pci(s: &str) -> Option<(u32, u32, u32, u32)> {
    let mut parts = s.trim().split(':');
    let (domain, bus, rest) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let (device, function) = rest.split_once('.')?;
    let hex = |x: &str| u32::from_str_radix(x, 16).ok();
    Some((hex(domain)?, hex(bus)?, hex(device)?, hex(function)?))
}

/// Why the NVML device of a CUDA device cannot be told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NvmlMapError {
    /// The backend's PCI bus id does not parse.
    #[error("the backend's PCI bus id `{0}` is malformed")]
    MalformedBusId(String),
    /// No GPU NVML lists sits at the backend's PCI bus id.
    #[error("NVML lists no GPU at PCI {0}")]
    NoGpuAtBus(String),
    /// NVML has no device of that index.
    #[error("NVML has no device {index} ({listed} listed)")]
    NoSuchIndex {
        /// The index looked for.
        index: u32,
        /// Devices NVML lists.
        listed: usize,
    },
    /// `CUDA_VISIBLE_DEVICES` is shorter than the ordinal.
    #[error("CUDA_VISIBLE_DEVICES={visible} has no entry for cuda:{ordinal}")]
    NotVisible {
        /// The variable's value.
        visible: String,
        /// The CUDA ordinal.
        ordinal: u32,
    },
    /// No GPU NVML lists has the UUID `CUDA_VISIBLE_DEVICES` names.
    #[error("NVML lists no GPU with UUID {0}")]
    NoSuchUuid(String),
    /// `CUDA_VISIBLE_DEVICES` names a MIG instance, which only a PCI bus id maps.
    #[error("CUDA_VISIBLE_DEVICES entry `{0}` is a MIG instance, which only the backend's PCI bus id maps to its GPU")]
    MigInstance(String),
    /// A `CUDA_VISIBLE_DEVICES` entry that is neither an index nor a UUID.
    #[error("cannot map CUDA_VISIBLE_DEVICES entry `{0}` to an NVML device")]
    UnknownEntry(String),
    /// Several GPUs, CUDA's fastest-first order and no PCI bus id: the mapping would be a guess.
    #[error(
        "CUDA numbers the {0} GPUs fastest-first and NVML in PCI order, and the backend reported no PCI bus id: \
         set CUDA_DEVICE_ORDER=PCI_BUS_ID to sample the right one"
    )]
    Unordered(usize),
}

/// The NVML index of the GPU a CUDA device is, and how it was found; an error says why it cannot be told.
///
/// Rules, in order: the backend's PCI bus id (exact); else entry `ordinal` of `CUDA_VISIBLE_DEVICES` when it is
/// a `GPU-` UUID (exact), or an index with `CUDA_DEVICE_ORDER=PCI_BUS_ID` (exact: both sides count in PCI
/// order); else, without `CUDA_VISIBLE_DEVICES`, the ordinal itself with PCI order or when NVML sees one GPU.
/// MIG instances (`MIG-…`) and CUDA's fastest-first order on a machine with several GPUs are refused.
pub fn map(
    ordinal: u32,
    pci_bus_id: Option<&str>,
    inventory: &[NvmlEntry],
    visible: Option<&str>,
    pci_order: bool,
) -> Result<(u32, &'static str), NvmlMapError> {
    if let Some(bus) = pci_bus_id {
        let want = parse_pci(bus).ok_or_else(|| NvmlMapError::MalformedBusId(bus.to_string()))?;
        return inventory
            .iter()
            .find(|e| parse_pci(&e.pci_bus_id) == Some(want))
            .map(|e| (e.index, "pci bus id"))
            .ok_or_else(|| NvmlMapError::NoGpuAtBus(bus.to_string()));
    }
    let by_index = |i: u32, how: &'static str| {
        inventory
            .iter()
            .find(|e| e.index == i)
            .map(|e| (e.index, how))
            .ok_or(NvmlMapError::NoSuchIndex { index: i, listed: inventory.len() })
    };
    let visible = visible.map(str::trim).filter(|v| !v.is_empty());
    if let Some(visible) = visible {
        let entry = visible
            .split(',')
            .map(str::trim)
            .nth(ordinal as usize)
            .ok_or_else(|| NvmlMapError::NotVisible { visible: visible.to_string(), ordinal })?;
        if entry.starts_with("GPU-") {
            return inventory
                .iter()
                .find(|e| e.uuid.eq_ignore_ascii_case(entry) || e.uuid.starts_with(entry))
                .map(|e| (e.index, "CUDA_VISIBLE_DEVICES uuid"))
                .ok_or_else(|| NvmlMapError::NoSuchUuid(entry.to_string()));
        }
        if entry.starts_with("MIG-") {
            return Err(NvmlMapError::MigInstance(entry.to_string()));
        }
        return match entry.parse::<u32>() {
            Ok(i) if pci_order || inventory.len() == 1 => by_index(i, "CUDA_VISIBLE_DEVICES index (PCI order)"),
            Ok(_) => Err(NvmlMapError::Unordered(inventory.len())),
            Err(_) => Err(NvmlMapError::UnknownEntry(entry.to_string())),
        };
    }
    if pci_order || inventory.len() == 1 {
        by_index(ordinal, "ordinal (PCI order)")
    } else {
        Err(NvmlMapError::Unordered(inventory.len()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A machine with three GPUs in PCI order.
    fn inventory() -> Vec<NvmlEntry> {
        [(0, "00000000:17:00.0", "GPU-aaaa"), (1, "00000000:65:00.0", "GPU-bbbb"), (2, "00000000:B3:00.0", "GPU-cccc")]
            .into_iter()
            .map(|(index, bus, uuid)| NvmlEntry { index, pci_bus_id: bus.into(), uuid: uuid.into() })
            .collect()
    }

    #[test]
    fn pci_ids_parse_in_both_forms() {
        assert_eq!(parse_pci("0000:b3:00.0"), parse_pci("00000000:B3:00.0"));
        assert_eq!(parse_pci("0001:17:02.1"), Some((1, 0x17, 2, 1)));
        assert_eq!(parse_pci("17:00.0"), None);
        assert_eq!(parse_pci("0000:zz:00.0"), None);
    }

    #[test]
    fn the_pci_bus_id_decides_whatever_the_order() {
        let inv = inventory();
        // CUDA's fastest-first cuda:0 may be NVML's index 2: only the bus id tells.
        assert_eq!(map(0, Some("0000:b3:00.0"), &inv, Some("1,0"), false), Ok((2, "pci bus id")));
        assert!(map(0, Some("0000:01:00.0"), &inv, None, false).unwrap_err().to_string().contains("no GPU at PCI"));
        assert!(map(0, Some("nonsense"), &inv, None, false).unwrap_err().to_string().contains("malformed"));
    }

    #[test]
    fn visible_devices_map_only_where_exact() {
        let inv = inventory();
        assert_eq!(map(1, None, &inv, Some("GPU-cccc,GPU-aaaa"), false), Ok((0, "CUDA_VISIBLE_DEVICES uuid")));
        assert_eq!(map(0, None, &inv, Some("2,0"), true).unwrap().0, 2);
        // An index under CUDA's default order on a machine of three GPUs could be any of them.
        assert!(
            map(0, None, &inv, Some("2,0"), false).unwrap_err().to_string().contains("CUDA_DEVICE_ORDER=PCI_BUS_ID")
        );
        assert!(map(0, None, &inv, Some("MIG-1234"), true).unwrap_err().to_string().contains("MIG instance"));
        assert!(map(3, None, &inv, Some("0,1"), true).unwrap_err().to_string().contains("no entry for cuda:3"));
        assert!(map(0, None, &inv, Some("GPU-dddd"), true).unwrap_err().to_string().contains("no GPU with UUID"));
    }

    #[test]
    fn ordinals_map_with_pci_order_or_one_gpu() {
        let inv = inventory();
        assert_eq!(map(1, None, &inv, None, true), Ok((1, "ordinal (PCI order)")));
        assert!(map(1, None, &inv, None, false).is_err());
        assert_eq!(map(0, None, &inv[..1], None, false).unwrap().0, 0);
        assert!(map(5, None, &inv, None, true).unwrap_err().to_string().contains("no device 5"));
    }
}
