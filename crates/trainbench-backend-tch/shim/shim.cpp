// trainbench-backend-tch shim: the few libtorch APIs tch does not expose (caching-allocator statistics, autocast for a
// given device type and dtype, library versions, CUDA device properties and PCI bus ids through the driver API,
// the TF32 switches, CUDA events, pinning without a device argument, the fused optimizers and the list-wide AMP
// unscale). Every function catches C++ exceptions and reports them through a message buffer, so no exception
// ever crosses into Rust. Tensors cross as tch's handles (`at::Tensor*`).
#include <ATen/Context.h>
#include <ATen/Functions.h>
#include <ATen/Version.h>
#include <ATen/autocast_mode.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/core/Generator.h>
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DeviceType.h>
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/headeronly/version.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <cstdint>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>

#include <dlfcn.h>

namespace {
void copy_message(const char* what, char* buf, size_t len) {
  if (buf == nullptr || len == 0) return;
  std::strncpy(buf, what, len - 1);
  buf[len - 1] = '\0';
}

// The CUDA driver library, loaded once (nullptr without a driver).
void* cuda_driver() {
  static void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  return lib;
}

// A tensor list from tch's handles.
std::vector<at::Tensor> list(at::Tensor** ts, int n) {
  std::vector<at::Tensor> v;
  v.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v.push_back(*ts[i]);
  return v;
}

// An optional tensor from a handle that may be null.
std::optional<at::Tensor> opt(at::Tensor* t) {
  return t == nullptr ? std::nullopt : std::optional<at::Tensor>(*t);
}
}  // namespace

// Run a body (variadic: commas inside braces do not split it) and turn any C++ exception into -1 and a message.
// Counts the CPU allocator's live bytes as libtorch reports them to a memory profiler (allocations made
// while it is installed, minus their frees): the CPU's counterpart of the CUDA allocator's statistics.
struct CpuMemoryTracker : c10::MemoryReportingInfoBase {
  std::atomic<int64_t> live{0};
  void reportMemoryUsage(void*, int64_t alloc_size, size_t, size_t, c10::Device device) override {
    if (device.is_cpu()) live.fetch_add(alloc_size, std::memory_order_relaxed);
  }
  bool memoryProfilingEnabled() const override { return true; }
};

thread_local std::shared_ptr<CpuMemoryTracker> cpu_tracker;

#define TB_GUARD(...)                                      \
  try {                                                    \
    __VA_ARGS__;                                           \
    return 0;                                              \
  } catch (const std::exception& e) {                      \
    copy_message(e.what(), err, err_len);                  \
    return -1;                                             \
  } catch (...) {                                          \
    copy_message("unknown C++ exception", err, err_len);   \
    return -1;                                             \
  }

extern "C" {

// libtorch version the shim was compiled against ("2.13.0").
const char* tb_torch_version() { return TORCH_VERSION; }

// The libtorch this process loaded, asked at run time rather than from the headers: its version (the
// TORCH_VERSION= of its build settings, at::show_config) and the file it was loaded from (dladdr).
int tb_linked_torch(char* version, size_t version_len, char* path, size_t path_len, char* err, size_t err_len) {
  TB_GUARD({
    const std::string config = at::show_config();
    const std::string key = "TORCH_VERSION=";
    const size_t at = config.find(key);
    if (at == std::string::npos) throw std::runtime_error("libtorch's build settings name no TORCH_VERSION");
    const size_t from = at + key.size();
    const size_t to = config.find_first_of(", \n", from);
    copy_message(config.substr(from, to == std::string::npos ? std::string::npos : to - from).c_str(), version,
                 version_len);
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&at::show_config), &info) == 0 || info.dli_fname == nullptr)
      throw std::runtime_error("dladdr does not know which library holds libtorch");
    copy_message(info.dli_fname, path, path_len);
  })
}

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
// The CUDA driver library with the driver initialised and `*dev` the handle of CUDA device `device`; nullptr
// with the reason in `err` when there is no driver or no such device. The device queries below start here.
static void* cuda_driver_device(int device, int* dev, char* err, size_t err_len) {
  using init_t = int (*)(unsigned int);
  using get_t = int (*)(int*, int);
  void* lib = cuda_driver();
  if (lib == nullptr) {
    copy_message("cannot load libcuda.so.1 (no NVIDIA driver)", err, err_len);
    return nullptr;
  }
  auto cu_init = reinterpret_cast<init_t>(dlsym(lib, "cuInit"));
  auto cu_get = reinterpret_cast<get_t>(dlsym(lib, "cuDeviceGet"));
  if (!cu_init || !cu_get || cu_init(0) != 0 || cu_get(dev, device) != 0) {
    copy_message("the CUDA driver could not start or has no such device", err, err_len);
    return nullptr;
  }
  return lib;
}

int tb_cuda_device_properties(int device, char* name, size_t name_len, int* major, int* minor, int* sms,
                              uint64_t* total_mem, char* err, size_t err_len) {
  using name_t = int (*)(char*, int, int);
  using mem_t = int (*)(size_t*, int);
  using attr_t = int (*)(int*, int, int);
  int dev = 0;
  void* lib = cuda_driver_device(device, &dev, err, err_len);
  if (lib == nullptr) return -1;
  auto cu_name = reinterpret_cast<name_t>(dlsym(lib, "cuDeviceGetName"));
  auto cu_mem = reinterpret_cast<mem_t>(dlsym(lib, "cuDeviceTotalMem_v2"));
  auto cu_attr = reinterpret_cast<attr_t>(dlsym(lib, "cuDeviceGetAttribute"));
  if (!cu_name || !cu_mem || !cu_attr) {
    copy_message("libcuda.so.1 lacks the device query functions", err, err_len);
    return -1;
  }
  size_t mem = 0;
  // Attributes: 16 = multiprocessor count, 75/76 = compute capability major/minor.
  if (cu_name(name, static_cast<int>(name_len), dev) != 0 || cu_mem(&mem, dev) != 0 || cu_attr(sms, 16, dev) != 0 ||
      cu_attr(major, 75, dev) != 0 || cu_attr(minor, 76, dev) != 0) {
    copy_message("a CUDA driver device query failed", err, err_len);
    return -1;
  }
  *total_mem = mem;
  return 0;
}

// The CUDA version the installed driver supports (cuDriverGetVersion: 1000 * major + 10 * minor, e.g. 13000),
// 0 without a driver. Needs no cuInit, so it answers even when the driver cannot start a context.
int tb_cuda_driver_version(int* version, char* err, size_t err_len) {
  using ver_t = int (*)(int*);
  *version = 0;
  void* lib = cuda_driver();
  if (lib == nullptr) return 0;
  auto cu_ver = reinterpret_cast<ver_t>(dlsym(lib, "cuDriverGetVersion"));
  if (cu_ver == nullptr || cu_ver(version) != 0) {
    copy_message("cuDriverGetVersion failed", err, err_len);
    return -1;
  }
  return 0;
}

// The PCI bus id (`0000:17:00.0`) of CUDA device `device`, as the CUDA driver numbers devices (the same order
// and CUDA_VISIBLE_DEVICES filtering as libtorch's ordinals). A MIG instance answers with its parent GPU's id.
int tb_cuda_pci_bus_id(int device, char* out, size_t out_len, char* err, size_t err_len) {
  using bus_t = int (*)(char*, int, int);
  int dev = 0;
  void* lib = cuda_driver_device(device, &dev, err, err_len);
  if (lib == nullptr) return -1;
  auto cu_bus = reinterpret_cast<bus_t>(dlsym(lib, "cuDeviceGetPCIBusId"));
  if (!cu_bus || cu_bus(out, static_cast<int>(out_len), dev) != 0) {
    copy_message("cuDeviceGetPCIBusId failed", err, err_len);
    return -1;
  }
  return 0;
}

// Set the TF32 switches of fp32 work on CUDA (cuBLAS matmuls; cuDNN convolutions and recurrent layers), then
// read back what libtorch will use (1 = TF32, 0 = IEEE fp32) through the getters the cuBLAS and cuDNN call sites
// consult. libtorch 2.13 keeps a legacy setting beside the per-operation ones and refuses, at every matmul, a
// legacy matmul precision that disagrees with the per-operation one: setting only the per-operation matmul
// switch made every cuBLAS matmul throw. The legacy setters keep both in step.
int tb_set_tf32(int matmul, int cudnn, int* got_matmul, int* got_cudnn, char* err, size_t err_len) {
  TB_GUARD({
    auto& ctx = at::globalContext();
    ctx.setFloat32MatmulPrecision(matmul ? "high" : "highest");
    ctx.setAllowTF32CuDNN(cudnn != 0);
    *got_matmul = ctx.allowTF32CuBLAS() ? 1 : 0;
    const bool conv = ctx.allowTF32CuDNN(at::Float32Op::CONV);
    const bool rnn = ctx.allowTF32CuDNN(at::Float32Op::RNN);
    *got_cudnn = (conv && rnn) ? 1 : 0;
  })
}

// A timing CUDA event on device `device` (not yet recorded).
int tb_event_new(int device, void** out, char* err, size_t err_len) {
  TB_GUARD({
    (void)device;
    *out = new c10::Event(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
  })
}

// Record `event` on the current stream of CUDA device `device` (returns at once; the GPU marks it when the
// stream's earlier work is done).
int tb_event_record(void* event, int device, char* err, size_t err_len) {
  TB_GUARD({
    c10::impl::VirtualGuardImpl impl(c10::DeviceType::CUDA);
    const auto stream = impl.getStream(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device)));
    static_cast<c10::Event*>(event)->record(stream);
  })
}

// Wait on the host until `event` is marked.
int tb_event_synchronize(void* event, char* err, size_t err_len) {
  TB_GUARD({ static_cast<c10::Event*>(event)->synchronize(); })
}

// Milliseconds of device time from `start` to `end` (both recorded and marked).
int tb_event_elapsed_ms(void* start, void* end, double* ms, char* err, size_t err_len) {
  TB_GUARD({ *ms = static_cast<c10::Event*>(start)->elapsedTime(*static_cast<c10::Event*>(end)); })
}

// Free an event made by tb_event_new.
void tb_event_free(void* event) { delete static_cast<c10::Event*>(event); }

// A pinned (page-locked) host copy of a CPU tensor, for the current accelerator (`Tensor::pin_memory()` without
// the deprecated device argument, which warned once per call).
int tb_pin_memory(at::Tensor* t, at::Tensor** out, char* err, size_t err_len) {
  TB_GUARD({ *out = new at::Tensor(t->pin_memory()); })
}

// `F.leaky_relu(x, slope)`: tch's `leaky_relu` has no slope argument (it is fixed at 0.01). One kernel whose
// backward (`leaky_relu_backward`) is one pass and differentiable again in one pass, as PyTorch's.
int tb_leaky_relu(at::Tensor* x, double slope, at::Tensor** out, char* err, size_t err_len) {
  TB_GUARD({ *out = new at::Tensor(at::leaky_relu(*x, slope)); })
}

// One fused Adam or AdamW step (`adamw` != 0) over `n` parameters with their gradients, first and second
// moments, and step counts (fp32 tensors already incremented for this step; the same tensor may repeat). With
// `grad_scale` and `found_inf` (either may be null), gradients are divided by the scale inside the kernel and the
// whole step is skipped on the device when found_inf is non-zero: no host synchronisation.
int tb_fused_adam(int adamw, at::Tensor** params, at::Tensor** grads, at::Tensor** exp_avg, at::Tensor** exp_avg_sq,
                  at::Tensor** steps, int n, double lr, double beta1, double beta2, double weight_decay, double eps,
                  at::Tensor* grad_scale, at::Tensor* found_inf, char* err, size_t err_len) {
  TB_GUARD({
    const auto p = list(params, n), g = list(grads, n), m = list(exp_avg, n), v = list(exp_avg_sq, n),
               s = list(steps, n);
    const std::vector<at::Tensor> max_sq;
    if (adamw) {
      at::_fused_adamw_(p, g, m, v, max_sq, s, lr, beta1, beta2, weight_decay, eps, false, false, opt(grad_scale),
                        opt(found_inf));
    } else {
      at::_fused_adam_(p, g, m, v, max_sq, s, lr, beta1, beta2, weight_decay, eps, false, false, opt(grad_scale),
                       opt(found_inf));
    }
  })
}

// One fused SGD step over `n` parameters; `momentum_buf` holds `n` buffers when momentum is non-zero (set to
// the gradient on the first step, as PyTorch's SGD does), else is ignored. Scale and found_inf as tb_fused_adam.
int tb_fused_sgd(at::Tensor** params, at::Tensor** grads, at::Tensor** momentum_buf, int n, double weight_decay,
                 double momentum, double lr, int nesterov, int first_step, at::Tensor* grad_scale,
                 at::Tensor* found_inf, char* err, size_t err_len) {
  TB_GUARD({
    const auto p = list(params, n), g = list(grads, n);
    const auto b = momentum != 0.0 ? list(momentum_buf, n) : std::vector<at::Tensor>();
    at::_fused_sgd_(p, g, b, weight_decay, momentum, lr, 0.0, nesterov != 0, false, first_step != 0,
                    opt(grad_scale), opt(found_inf));
  })
}

// Check `n` gradients for infinities and NaNs in one list-wide kernel, setting `found_inf` (a one-element fp32
// tensor) to 1 if any, and multiply them by `inv_scale` (pass 1 to check only).
int tb_amp_unscale(at::Tensor** grads, int n, at::Tensor* found_inf, at::Tensor* inv_scale, char* err,
                   size_t err_len) {
  TB_GUARD({ at::_amp_foreach_non_finite_check_and_unscale_(list(grads, n), *found_inf, *inv_scale); })
}

// `list[i] += alpha * other` for every tensor (`other` a one-element tensor), or `list[i] += alpha` when
// `other` is null, in one list-wide kernel.
int tb_foreach_add(at::Tensor** ts, int n, at::Tensor* other, double alpha, char* err, size_t err_len) {
  TB_GUARD({
    if (other == nullptr) {
      at::_foreach_add_(list(ts, n), at::Scalar(alpha));
    } else {
      at::_foreach_add_(list(ts, n), *other, at::Scalar(alpha));
    }
  })
}

// Drop the gradients of `n` tensors (PyTorch's `zero_grad(set_to_none=True)`).
int tb_grads_to_none(at::Tensor** ts, int n, char* err, size_t err_len) {
  TB_GUARD({
    for (int i = 0; i < n; ++i) ts[i]->mutable_grad().reset();
  })
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

// Backpropagate `grad` from `out` (as `out.backward(grad)`): gradients accumulate into the leaves' `.grad`.
int tb_backward_with_grad(at::Tensor* out, at::Tensor* grad, int keep_graph, char* err, size_t err_len) {
  TB_GUARD({ out->backward(*grad, keep_graph != 0, false); })
}

// Called after a leaf's gradient has been accumulated into its `.grad` (with the leaf's index given at
// registration): data-parallel overlap hands each gradient bucket to the exchange as soon as it is complete.
typedef void (*tb_grad_ready_fn)(void* ctx, int64_t index);

namespace {
struct TbGradReady : torch::autograd::PostAccumulateGradHook {
  tb_grad_ready_fn fn;
  void* ctx;
  int64_t index;
  TbGradReady(tb_grad_ready_fn f, void* c, int64_t i) : fn(f), ctx(c), index(i) {}
  void operator()(const torch::autograd::Variable&) override { fn(ctx, index); }
};
}  // namespace

// Set (fn non-null) or clear (fn null) the post-accumulate-grad hook of leaf tensor `t` (one per tensor).
int tb_set_grad_ready_hook(at::Tensor* t, tb_grad_ready_fn fn, void* ctx, int64_t index, char* err, size_t err_len) {
  TB_GUARD({
    if (t == nullptr || !t->defined()) throw std::invalid_argument("no tensor");
    if (fn == nullptr) {
      torch::autograd::impl::set_post_acc_grad_hooks(*t, nullptr);
    } else {
      if (!t->is_leaf() || !t->requires_grad()) throw std::invalid_argument("not a leaf that requires grad");
      torch::autograd::impl::set_post_acc_grad_hooks(*t, std::make_unique<TbGradReady>(fn, ctx, index));
    }
  })
}

// The state of the default random generator of a device (0 = CPU, 1 = CUDA device `index`), as a new tensor.
int tb_rng_get_state(int device_cuda, int index, at::Tensor** out, char* err, size_t err_len) {
  TB_GUARD({
    const auto dev = device_cuda ? c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index))
                                 : c10::Device(c10::DeviceType::CPU);
    auto gen = at::globalContext().defaultGenerator(dev);
    std::lock_guard<std::mutex> lock(gen.mutex());
    *out = new at::Tensor(gen.get_state());
  })
}

// Restore a state read by tb_rng_get_state.
int tb_rng_set_state(int device_cuda, int index, at::Tensor* state, char* err, size_t err_len) {
  TB_GUARD({
    const auto dev = device_cuda ? c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index))
                                 : c10::Device(c10::DeviceType::CPU);
    auto gen = at::globalContext().defaultGenerator(dev);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(*state);
  })
}

// Start (`on` != 0) or stop counting this thread's CPU allocations (CpuMemoryTracker).
int tb_cpu_memory_tracking(int on, char* err, size_t err_len) {
  TB_GUARD({
    if (on && !cpu_tracker) {
      cpu_tracker = std::make_shared<CpuMemoryTracker>();
      c10::ThreadLocalDebugInfo::_push(c10::DebugInfoKind::PROFILER_STATE, cpu_tracker);
    } else if (!on && cpu_tracker) {
      c10::ThreadLocalDebugInfo::_pop(c10::DebugInfoKind::PROFILER_STATE);
      cpu_tracker.reset();
    }
  })
}

// Live CPU bytes counted since tracking started on this thread (-1 when it is not on).
int64_t tb_cpu_allocated() {
  if (!cpu_tracker) return -1;
  const int64_t live = cpu_tracker->live.load(std::memory_order_relaxed);
  return live < 0 ? 0 : live;
}

}  // extern "C"
