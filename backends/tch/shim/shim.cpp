// trainbench-tch shim: the few libtorch APIs tch does not expose (caching-allocator statistics, autocast for a
// given device type and dtype, library versions, CUDA device properties through the driver API). Every function catches C++
// exceptions and reports them through a message buffer, so no exception ever crosses into Rust.
#include <ATen/Version.h>
#include <ATen/autocast_mode.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DeviceType.h>
#include <torch/headeronly/version.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <string>

#include <dlfcn.h>

namespace {
void copy_message(const char* what, char* buf, size_t len) {
  if (buf == nullptr || len == 0) return;
  std::strncpy(buf, what, len - 1);
  buf[len - 1] = '\0';
}
}  // namespace

#define TB_GUARD(body)                       \
  try {                                      \
    body;                                    \
    return 0;                                \
  } catch (const std::exception& e) {        \
    copy_message(e.what(), err, err_len);    \
    return -1;                               \
  } catch (...) {                            \
    copy_message("unknown C++ exception", err, err_len); \
    return -1;                               \
  }

extern "C" {

// libtorch version the shim was compiled against ("2.13.0").
const char* tb_torch_version() { return TORCH_VERSION; }

// The CPU kernel level ATen dispatches to here ("AVX512", "AVX2", "DEFAULT"; ATEN_CPU_CAPABILITY can lower it).
int tb_cpu_capability(char* out, size_t out_len, char* err, size_t err_len) {
  TB_GUARD({ copy_message(at::get_cpu_capability().c_str(), out, out_len); })
}

// CUDA runtime and cuDNN versions as libtorch reports them (0 where unavailable).
int tb_cuda_versions(long* cudart, long* cudnn, char* err, size_t err_len) {
  TB_GUARD({
    const auto& hooks = at::detail::getCUDAHooks();
    *cudart = hooks.hasCUDART() ? hooks.versionCUDART() : 0;
    *cudnn = hooks.hasCuDNN() ? hooks.versionCuDNN() : 0;
  })
}

// Caching-allocator statistics of a CUDA device: out = {allocated current, allocated peak,
// reserved current, reserved peak}, aggregated over pools.
int tb_cuda_memory_stats(int device, int64_t* out, char* err, size_t err_len) {
  TB_GUARD({
    auto* alloc = c10::getDeviceAllocator(c10::DeviceType::CUDA);
    const auto stats = alloc->getDeviceStats(static_cast<c10::DeviceIndex>(device));
    const auto agg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    out[0] = stats.allocated_bytes[agg].current;
    out[1] = stats.allocated_bytes[agg].peak;
    out[2] = stats.reserved_bytes[agg].current;
    out[3] = stats.reserved_bytes[agg].peak;
  })
}

// Reset the peak statistics of a CUDA device.
int tb_cuda_reset_peak(int device, char* err, size_t err_len) {
  TB_GUARD({ c10::getDeviceAllocator(c10::DeviceType::CUDA)->resetPeakStats(static_cast<c10::DeviceIndex>(device)); })
}

// Return cached, unused blocks of the CUDA caching allocator to the driver.
int tb_cuda_empty_cache(char* err, size_t err_len) {
  TB_GUARD({ c10::getDeviceAllocator(c10::DeviceType::CUDA)->emptyCache(); })
}

// Free and total bytes of a CUDA device.
int tb_cuda_mem_info(int device, uint64_t* free_bytes, uint64_t* total_bytes, char* err, size_t err_len) {
  TB_GUARD({
    const auto info = c10::getDeviceAllocator(c10::DeviceType::CUDA)->getMemoryInfo(static_cast<c10::DeviceIndex>(device));
    *free_bytes = info.first;
    *total_bytes = info.second;
  })
}

// Name, compute capability, multiprocessor count and total memory of a CUDA device, from the CUDA driver API
// loaded at run time (libcuda.so.1 is part of the driver; no CUDA headers or link-time dependency needed).
int tb_cuda_device_properties(int device, char* name, size_t name_len, int* major, int* minor, int* sms,
                              uint64_t* total_mem, char* err, size_t err_len) {
  using init_t = int (*)(unsigned int);
  using get_t = int (*)(int*, int);
  using name_t = int (*)(char*, int, int);
  using mem_t = int (*)(size_t*, int);
  using attr_t = int (*)(int*, int, int);
  void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (lib == nullptr) {
    copy_message("cannot load libcuda.so.1 (no NVIDIA driver)", err, err_len);
    return -1;
  }
  auto cu_init = reinterpret_cast<init_t>(dlsym(lib, "cuInit"));
  auto cu_get = reinterpret_cast<get_t>(dlsym(lib, "cuDeviceGet"));
  auto cu_name = reinterpret_cast<name_t>(dlsym(lib, "cuDeviceGetName"));
  auto cu_mem = reinterpret_cast<mem_t>(dlsym(lib, "cuDeviceTotalMem_v2"));
  auto cu_attr = reinterpret_cast<attr_t>(dlsym(lib, "cuDeviceGetAttribute"));
  if (!cu_init || !cu_get || !cu_name || !cu_mem || !cu_attr) {
    copy_message("libcuda.so.1 lacks the device query functions", err, err_len);
    return -1;
  }
  int dev = 0;
  size_t mem = 0;
  // Attributes: 16 = multiprocessor count, 75/76 = compute capability major/minor.
  if (cu_init(0) != 0 || cu_get(&dev, device) != 0 || cu_name(name, static_cast<int>(name_len), dev) != 0 ||
      cu_mem(&mem, dev) != 0 || cu_attr(sms, 16, dev) != 0 || cu_attr(major, 75, dev) != 0 ||
      cu_attr(minor, 76, dev) != 0) {
    copy_message("a CUDA driver device query failed", err, err_len);
    return -1;
  }
  *total_mem = mem;
  return 0;
}

// Enter an autocast region on a device type (0 = CPU, 1 = CUDA) with a lower-precision dtype
// (0 = float16, 1 = bfloat16); `prev_enabled` / `prev_dtype` receive the state to restore on exit.
int tb_autocast_enter(int device_cuda, int dtype_bf16, int* prev_enabled, int* prev_dtype, char* err, size_t err_len) {
  TB_GUARD({
    const auto dev = device_cuda ? c10::DeviceType::CUDA : c10::DeviceType::CPU;
    *prev_enabled = at::autocast::is_autocast_enabled(dev) ? 1 : 0;
    *prev_dtype = static_cast<int>(at::autocast::get_autocast_dtype(dev));
    at::autocast::set_autocast_dtype(dev, dtype_bf16 ? at::kBFloat16 : at::kHalf);
    at::autocast::set_autocast_enabled(dev, true);
    at::autocast::increment_nesting();
  })
}

// Leave an autocast region entered with tb_autocast_enter, restoring the previous state.
int tb_autocast_exit(int device_cuda, int prev_enabled, int prev_dtype, char* err, size_t err_len) {
  TB_GUARD({
    const auto dev = device_cuda ? c10::DeviceType::CUDA : c10::DeviceType::CPU;
    if (at::autocast::decrement_nesting() == 0) {
      at::autocast::clear_cache();
    }
    at::autocast::set_autocast_enabled(dev, prev_enabled != 0);
    at::autocast::set_autocast_dtype(dev, static_cast<at::ScalarType>(prev_dtype));
  })
}

}  // extern "C"
