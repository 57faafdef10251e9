//! Adapter discovery through wgpu: every adapter on every graphics API, device selectors
//! (`wgpu`, `wgpu:N`, `wgpu:discrete|integrated|cpu`, parsed by the contract's `DeviceSelector`) mapped to an
//! adapter in [`select`], and the burn device behind each.
//!
//! Adapters are listed once per process, graphics API by graphics API (Vulkan, Metal, DX12, GL), in
//! wgpu's enumeration order; `wgpu:N` is the N-th entry of that list. The burn device for an adapter is
//! opened with its graphics API pinned and its per-type index, which is how cubecl addresses adapters, so
//! the device that runs is the adapter that was listed.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};

use burn::tensor::wgpu::{WgpuBackend, wgpu};
use burn::tensor::{Device, DeviceKind};
use trainbench_contract::{BackendError, DeviceInfo, DeviceSelector, WgpuAdapter};

/// Graphics APIs in the order adapters are listed (and preferred for the default device).
const APIS: [wgpu::Backend; 4] = [wgpu::Backend::Vulkan, wgpu::Backend::Metal, wgpu::Backend::Dx12, wgpu::Backend::Gl];

/// One adapter seen by wgpu.
#[derive(Debug, Clone)]
pub struct Adapter {
    /// Position in the process-wide list (`wgpu:N`).
    pub index: usize,
    /// Index among the adapters of the same type on the same graphics API (cubecl's addressing).
    pub kind_index: usize,
    /// What the adapter says about itself.
    pub info: wgpu::AdapterInfo,
    /// Its limits.
    pub limits: wgpu::Limits,
    /// Its optional features.
    pub features: wgpu::Features,
}

impl Adapter {
    /// The selector that picks this adapter.
    pub fn selector(&self) -> String {
        format!("wgpu:{}", self.index)
    }

    /// trainbench's device kind for this adapter.
    pub fn kind(&self) -> &'static str {
        match self.info.device_type {
            wgpu::DeviceType::DiscreteGpu => "discrete-gpu",
            wgpu::DeviceType::IntegratedGpu => "integrated-gpu",
            wgpu::DeviceType::VirtualGpu => "virtual-gpu",
            wgpu::DeviceType::Cpu => "software",
            wgpu::DeviceType::Other => "other",
        }
    }

    /// Whether the adapter can time work on the device (timestamp queries).
    pub fn has_timestamps(&self) -> bool {
        self.features.contains(wgpu::Features::TIMESTAMP_QUERY)
    }

    /// Name, vendor, driver, graphics API, type and key limits, as [`DeviceInfo`].
    pub fn device_info(&self) -> DeviceInfo {
        let i = &self.info;
        let l = &self.limits;
        let mut d = BTreeMap::new();
        d.insert("api".to_string(), api_name(i.backend).to_string());
        d.insert("vendor".to_string(), vendor_name(i.vendor));
        d.insert("vendor_id".to_string(), format!("{:#06x}", i.vendor));
        d.insert("device_id".to_string(), format!("{:#06x}", i.device));
        d.insert("device_type".to_string(), format!("{:?}", i.device_type));
        d.insert("driver".to_string(), i.driver.clone());
        d.insert("driver_info".to_string(), i.driver_info.clone());
        if !i.device_pci_bus_id.is_empty() {
            d.insert("pci_bus_id".to_string(), i.device_pci_bus_id.clone());
        }
        d.insert("timestamp_query".to_string(), self.has_timestamps().to_string());
        d.insert("shader_f16".to_string(), self.features.contains(wgpu::Features::SHADER_F16).to_string());
        d.insert("max_buffer_size".to_string(), l.max_buffer_size.to_string());
        d.insert("max_storage_buffer_binding_size".to_string(), l.max_storage_buffer_binding_size.to_string());
        d.insert(
            "max_compute_invocations_per_workgroup".to_string(),
            l.max_compute_invocations_per_workgroup.to_string(),
        );
        d.insert(
            "max_compute_workgroup_size".to_string(),
            format!(
                "{}x{}x{}",
                l.max_compute_workgroup_size_x, l.max_compute_workgroup_size_y, l.max_compute_workgroup_size_z
            ),
        );
        d.insert("max_compute_workgroup_storage_size".to_string(), l.max_compute_workgroup_storage_size.to_string());
        d.insert(
            "max_compute_workgroups_per_dimension".to_string(),
            l.max_compute_workgroups_per_dimension.to_string(),
        );
        d.insert(
            "max_storage_buffers_per_shader_stage".to_string(),
            l.max_storage_buffers_per_shader_stage.to_string(),
        );
        if i.subgroup_max_size > 0 {
            d.insert("subgroup_size".to_string(), format!("{}..{}", i.subgroup_min_size, i.subgroup_max_size));
        }
        DeviceInfo {
            selector: self.selector(),
            name: i.name.clone(),
            kind: self.kind().to_string(),
            memory_bytes: None,
            peak_flops_fp32: None,
            details: d,
        }
    }

    /// burn's name for this adapter: its type and per-type index (`None` for type `Other`, which burn
    /// cannot address).
    fn burn_kind(&self) -> Option<DeviceKind> {
        match self.info.device_type {
            wgpu::DeviceType::DiscreteGpu => Some(DeviceKind::DiscreteGpu(self.kind_index)),
            wgpu::DeviceType::IntegratedGpu => Some(DeviceKind::IntegratedGpu(self.kind_index)),
            wgpu::DeviceType::VirtualGpu => Some(DeviceKind::VirtualGpu(self.kind_index)),
            wgpu::DeviceType::Cpu => Some(DeviceKind::Cpu),
            wgpu::DeviceType::Other => None,
        }
    }

    /// The graphics API as burn names it.
    fn burn_api(&self) -> Option<WgpuBackend> {
        match self.info.backend {
            wgpu::Backend::Vulkan => Some(WgpuBackend::Vulkan),
            wgpu::Backend::Metal => Some(WgpuBackend::Metal),
            wgpu::Backend::Dx12 => Some(WgpuBackend::Dx12),
            wgpu::Backend::Gl => Some(WgpuBackend::Gl),
            _ => None,
        }
    }
}

/// Human-readable name of a graphics API.
pub fn api_name(api: wgpu::Backend) -> &'static str {
    match api {
        wgpu::Backend::Vulkan => "Vulkan",
        wgpu::Backend::Metal => "Metal",
        wgpu::Backend::Dx12 => "DX12",
        wgpu::Backend::Gl => "GL",
        wgpu::Backend::BrowserWebGpu => "WebGPU",
        _ => "none",
    }
}

/// Name of a PCI vendor id (the ones that make GPUs), else the id itself.
fn vendor_name(id: u32) -> String {
    match id {
        0x10de => "NVIDIA".into(),
        0x1002 | 0x1022 => "AMD".into(),
        0x8086 => "Intel".into(),
        0x106b => "Apple".into(),
        0x13b5 => "ARM".into(),
        0x5143 => "Qualcomm".into(),
        0x1414 => "Microsoft".into(),
        0x10005 => "Mesa".into(),
        _ => format!("{id:#06x}"),
    }
}

/// Instances are kept alive with the list: the Vulkan loader misbehaves when instances come and go while
/// other threads create devices.
struct Registry {
    adapters: Vec<Adapter>,
    _instances: Vec<wgpu::Instance>,
}

static REGISTRY: OnceLock<Registry> = OnceLock::new();

fn registry() -> &'static Registry {
    REGISTRY.get_or_init(|| {
        let enabled = wgpu::Instance::enabled_backend_features();
        let mut adapters = Vec::new();
        let mut instances = Vec::new();
        for api in APIS {
            let backends = wgpu::Backends::from(api);
            if !enabled.contains(backends) {
                continue;
            }
            let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
                backends,
                ..wgpu::InstanceDescriptor::new_without_display_handle()
            });
            let found = burn::tensor::try_read_sync(instance.enumerate_adapters(backends)).unwrap_or_default();
            let mut per_type: HashMap<wgpu::DeviceType, usize> = HashMap::new();
            for a in found {
                let info = a.get_info();
                let counter = per_type.entry(info.device_type).or_default();
                let kind_index = *counter;
                *counter += 1;
                adapters.push(Adapter {
                    index: adapters.len(),
                    kind_index,
                    info,
                    limits: a.limits(),
                    features: a.features(),
                });
            }
            instances.push(instance);
        }
        Registry { adapters, _instances: instances }
    })
}

/// Every adapter wgpu sees on this machine, on every graphics API compiled in.
pub fn adapters() -> &'static [Adapter] {
    &registry().adapters
}

/// Rank of an adapter for the default device: real GPUs before software, native APIs before GL.
fn preference(a: &Adapter) -> (u8, u8, usize) {
    let ty = match a.info.device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    };
    let api = u8::from(a.info.backend == wgpu::Backend::Gl);
    (ty, api, a.index)
}

fn device_error(selector: DeviceSelector, reason: impl Into<String>) -> BackendError {
    BackendError::Device { selector: selector.to_string(), reason: reason.into() }
}

fn listing() -> String {
    let list = adapters();
    if list.is_empty() {
        return "wgpu found no adapter (install a Vulkan driver; for software Vulkan: mesa-vulkan-drivers)".into();
    }
    let names: Vec<String> = list
        .iter()
        .map(|a| format!("{} ({}, {}, {})", a.selector(), a.info.name, api_name(a.info.backend), a.kind()))
        .collect();
    format!("available: {}", names.join("; "))
}

/// The adapter a selector names: `wgpu` (the best), `wgpu:N`, `wgpu:discrete`, `wgpu:integrated` or `wgpu:cpu`.
pub fn select(selector: DeviceSelector) -> Result<&'static Adapter, BackendError> {
    let list = adapters();
    let of_type = |ty: wgpu::DeviceType| list.iter().filter(|a| a.info.device_type == ty).min_by_key(|a| preference(a));
    let found = match selector {
        DeviceSelector::Wgpu(WgpuAdapter::Default) => list.iter().min_by_key(|a| preference(a)),
        DeviceSelector::Wgpu(WgpuAdapter::Index(n)) => list.get(n),
        DeviceSelector::Wgpu(WgpuAdapter::Discrete) => of_type(wgpu::DeviceType::DiscreteGpu),
        DeviceSelector::Wgpu(WgpuAdapter::Integrated) => of_type(wgpu::DeviceType::IntegratedGpu),
        DeviceSelector::Wgpu(WgpuAdapter::Cpu) => of_type(wgpu::DeviceType::Cpu),
        DeviceSelector::Cpu | DeviceSelector::Cuda(_) => {
            return Err(device_error(selector, "not a wgpu selector (use `wgpu` or `wgpu:<index|type>`)"));
        }
    };
    found.ok_or_else(|| device_error(selector, format!("no such adapter; {}", listing())))
}

static OPENED: Mutex<Vec<(usize, Device)>> = Mutex::new(Vec::new());

/// The burn device (without autodiff) for an adapter, opened once per process.
pub fn open(adapter: &Adapter, selector: DeviceSelector) -> Result<Device, BackendError> {
    let mut opened = OPENED.lock().map_err(|_| device_error(selector, "device registry poisoned by a panic"))?;
    if let Some((_, d)) = opened.iter().find(|(i, _)| *i == adapter.index) {
        return Ok(d.clone());
    }
    let kind = adapter.burn_kind().ok_or_else(|| {
        device_error(selector, format!("burn cannot address adapter `{}` of type Other", adapter.info.name))
    })?;
    let api = adapter.burn_api().ok_or_else(|| {
        device_error(selector, format!("graphics API {} is not supported by burn", api_name(adapter.info.backend)))
    })?;
    if adapter.info.device_type == wgpu::DeviceType::Cpu && adapter.kind_index > 0 {
        return Err(device_error(
            selector,
            format!("burn reaches only the first software adapter on {}", api_name(adapter.info.backend)),
        ));
    }
    let device = Device::wgpu_options()
        .device_kind(kind)
        .graphics_api(api)
        .init()
        .map_err(|e| device_error(selector, e.to_string()))?;
    opened.push((adapter.index, device.clone()));
    Ok(device)
}
