// trainbench-backend-tch NCCL engine: a small C API over c10d's ProcessGroupNCCL, rendezvoused through a TCPStore
// (NCCL's unique id travels through the store). Compiled by build.rs only when the linked libtorch has CUDA and
// the CUDA and NCCL headers are found; crates/trainbench-backend-tch/src/nccl.rs is its only caller. Every function catches C++
// exceptions into a message buffer, so no exception ever crosses into Rust, and refuses null handles and
// tensors that are not on the group's CUDA device.
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {
void copy_text(const std::string& what, char* buf, size_t len) {
  if (buf == nullptr || len == 0) return;
  std::strncpy(buf, what.c_str(), len - 1);
  buf[len - 1] = '\0';
}

// One rank's membership of a group: the store it rendezvoused through, the process group, its device.
struct Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> pg;
  int device;
  std::chrono::milliseconds timeout;
};

at::Tensor& checked(Group* g, void* tensor) {
  if (g == nullptr) throw std::invalid_argument("the NCCL group is closed (null handle)");
  if (tensor == nullptr) throw std::invalid_argument("no tensor (null pointer)");
  auto& t = *static_cast<at::Tensor*>(tensor);
  if (!t.defined()) throw std::invalid_argument("undefined tensor");
  if (!t.is_cuda() || t.get_device() != g->device)
    throw std::invalid_argument("the tensor is on " + t.device().str() + ", the group on cuda:" +
                                std::to_string(g->device));
  if (!t.is_contiguous()) throw std::invalid_argument("the tensor is not contiguous");
  return t;
}

// Wait for a collective and for the device (Work::wait only makes the current stream wait; the caller reads a
// host timer next).
void finish(Group* g, const c10::intrusive_ptr<c10d::Work>& work) {
  work->wait(g->timeout);
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(g->device));
  c10::cuda::device_synchronize();
}
// Make `group`'s process group of `size` ranks over its store, this one `rank`, on its device and timeout, and
// check it with one all-reduce of one value (what NCCL refuses, two ranks on one GPU or a peer that never came,
// fails here rather than in the first collective).
void start(Group* group, int rank, int size) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(group->device));
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = group->timeout;
  group->pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(group->store, rank, size, options);
  std::vector<at::Tensor> one{
      at::ones({1}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, group->device))};
  finish(group, group->pg->allreduce(one));
}
}  // namespace

#define TB_NCCL_GUARD(body)                                    \
  try {                                                        \
    body;                                                      \
    return 0;                                                  \
  } catch (const std::exception& e) {                          \
    copy_text(e.what(), err, err_len);                         \
    return -1;                                                 \
  } catch (...) {                                              \
    copy_text("unknown C++ exception", err, err_len);          \
    return -1;                                                 \
  }

extern "C" {

// Join the group of `world` ranks whose rank 0 listens (TCPStore server) on addr:port, as `rank`, on CUDA
// device `device`; `timeout_ms` bounds the rendezvous and every collective. One all-reduce of one value on
// success, so what NCCL refuses (two ranks on one GPU, a peer that never came) fails here. Null on error.
void* tb_nccl_open(const char* addr, int port, int rank, int world, int device, int64_t timeout_ms, char* err,
                   size_t err_len) {
  try {
    if (addr == nullptr) throw std::invalid_argument("no master address");
    if (port <= 0 || port > 65535) throw std::invalid_argument("master port " + std::to_string(port) + " is not a TCP port");
    if (world < 1 || rank < 0 || rank >= world)
      throw std::invalid_argument("rank " + std::to_string(rank) + " of a world of " + std::to_string(world));
    if (timeout_ms <= 0) throw std::invalid_argument("timeout " + std::to_string(timeout_ms) + " ms");
    int devices = static_cast<int>(c10::cuda::device_count());
    if (devices == 0) throw std::runtime_error("no CUDA device is visible to this process");
    if (device < 0 || device >= devices)
      throw std::invalid_argument("CUDA device " + std::to_string(device) + " does not exist here (" +
                                  std::to_string(devices) + " device(s))");
    auto timeout = std::chrono::milliseconds(timeout_ms);
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<std::uint16_t>(port);
    opts.isServer = rank == 0;
    opts.numWorkers = static_cast<std::size_t>(world);
    opts.waitWorkers = true;
    opts.timeout = timeout;
    auto group = std::make_unique<Group>();
    group->store = c10::make_intrusive<c10d::TCPStore>(std::string(addr), opts);
    group->device = device;
    group->timeout = timeout;
    start(group.get(), rank, world);
    return group.release();
  } catch (const std::exception& e) {
    copy_text(e.what(), err, err_len);
  } catch (...) {
    copy_text("unknown C++ exception", err, err_len);
  }
  return nullptr;
}

// A new group of `size` of the parent's ranks, this one its rank `rank`, on the parent's device and timeout: one
// mesh dimension's group. Its members rendezvous through the parent's store under `name` (unique to the group:
// the caller names it by the parent's split count and the group's color), so each group's NCCL communicator is
// its own; every member calls it with the same name. One all-reduce of one value on success, as at open. The
// new group keeps the store alive: it outlives its parent. Null on error.
void* tb_nccl_split(void* parent, const char* name, int rank, int size, char* err, size_t err_len) {
  try {
    auto* p = static_cast<Group*>(parent);
    if (p == nullptr) throw std::invalid_argument("the NCCL group is closed (null handle)");
    if (name == nullptr || name[0] == '\0') throw std::invalid_argument("no name for the new group");
    if (size < 1 || rank < 0 || rank >= size)
      throw std::invalid_argument("rank " + std::to_string(rank) + " of a group of " + std::to_string(size));
    if (size > p->pg->getSize())
      throw std::invalid_argument("a group of " + std::to_string(size) + " split from one of " +
                                  std::to_string(p->pg->getSize()));
    auto group = std::make_unique<Group>();
    group->store = c10::make_intrusive<c10d::PrefixStore>(std::string(name), p->store);
    group->device = p->device;
    group->timeout = p->timeout;
    start(group.get(), rank, size);
    return group.release();
  } catch (const std::exception& e) {
    copy_text(e.what(), err, err_len);
  } catch (...) {
    copy_text("unknown C++ exception", err, err_len);
  }
  return nullptr;
}

// Element-wise sum over every rank, in place, on a contiguous tensor on the group's device.
int tb_nccl_all_reduce_sum(void* handle, void* tensor, char* err, size_t err_len) {
  TB_NCCL_GUARD({
    auto* g = static_cast<Group*>(handle);
    std::vector<at::Tensor> ts{checked(g, tensor)};
    finish(g, g->pg->allreduce(ts));
  })
}

// Element-wise sum over every rank of `input` (world equal blocks), block `rank` into `output` (one block), on
// contiguous tensors on the group's device (c10d's reduce_scatter_tensor).
int tb_nccl_reduce_scatter_sum(void* handle, void* output, void* input, char* err, size_t err_len) {
  TB_NCCL_GUARD({
    auto* g = static_cast<Group*>(handle);
    auto& out = checked(g, output);
    auto& in = checked(g, input);
    if (in.numel() != out.numel() * g->pg->getSize())
      throw std::invalid_argument("reduce-scatter of " + std::to_string(in.numel()) + " values into blocks of " +
                                  std::to_string(out.numel()));
    c10d::ReduceScatterOptions opts;
    opts.reduceOp = c10d::ReduceOp::SUM;
    finish(g, g->pg->_reduce_scatter_base(out, in, opts));
  })
}

// Every rank's `input` (all of one length) concatenated in rank order into `output`, on contiguous tensors on
// the group's device (c10d's all_gather_into_tensor).
int tb_nccl_all_gather(void* handle, void* output, void* input, char* err, size_t err_len) {
  TB_NCCL_GUARD({
    auto* g = static_cast<Group*>(handle);
    auto& out = checked(g, output);
    auto& in = checked(g, input);
    if (out.numel() != in.numel() * g->pg->getSize())
      throw std::invalid_argument("all-gather of blocks of " + std::to_string(in.numel()) + " values into " +
                                  std::to_string(out.numel()));
    finish(g, g->pg->_allgather_base(out, in, c10d::AllgatherOptions()));
  })
}

// `root`'s tensor on every rank, in place (every rank passes a tensor of the same size).
int tb_nccl_broadcast(void* handle, void* tensor, int root, char* err, size_t err_len) {
  TB_NCCL_GUARD({
    auto* g = static_cast<Group*>(handle);
    std::vector<at::Tensor> ts{checked(g, tensor)};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    finish(g, g->pg->broadcast(ts, opts));
  })
}

// Send the tensor to rank `peer` (NCCL matches point-to-point messages by peer and order; the tag is kept for
// the record).
int tb_nccl_send(void* handle, void* tensor, int peer, int tag, char* err, size_t err_len) {
  TB_NCCL_GUARD({
    auto* g = static_cast<Group*>(handle);
    std::vector<at::Tensor> ts{checked(g, tensor)};
    finish(g, g->pg->send(ts, peer, tag));
  })
}

// Receive into the tensor from rank `peer` (its size is what the sender sends).
int tb_nccl_recv(void* handle, void* tensor, int peer, int tag, char* err, size_t err_len) {
  TB_NCCL_GUARD({
    auto* g = static_cast<Group*>(handle);
    std::vector<at::Tensor> ts{checked(g, tensor)};
    finish(g, g->pg->recv(ts, peer, tag));
  })
}

// Variable all-to-all: `counts` holds `2 * ranks` values, the values sent to each rank then the values received
// from each rank, in rank order. ProcessGroupNCCL runs it as one group of ncclSend/ncclRecv pairs.
int tb_nccl_all_to_all(void* handle, void* output, void* input, const int64_t* counts, int ranks, char* err,
                       size_t err_len) {
  TB_NCCL_GUARD({
    auto* g = static_cast<Group*>(handle);
    auto& out = checked(g, output);
    auto& in = checked(g, input);
    if (counts == nullptr || ranks != g->pg->getSize())
      throw std::invalid_argument("all-to-all counts for " + std::to_string(ranks) + " ranks in a group of " +
                                  std::to_string(g->pg->getSize()));
    std::vector<int64_t> send(counts, counts + ranks);
    std::vector<int64_t> recv(counts + ranks, counts + 2 * ranks);
    int64_t sent = 0;
    int64_t received = 0;
    for (int r = 0; r < ranks; ++r) {
      sent += send[r];
      received += recv[r];
    }
    if (sent != in.numel() || received != out.numel())
      throw std::invalid_argument("all-to-all of " + std::to_string(sent) + " values sent and " +
                                  std::to_string(received) + " received with buffers of " +
                                  std::to_string(in.numel()) + " and " + std::to_string(out.numel()));
    finish(g, g->pg->alltoall_base(out, in, recv, send, c10d::AllToAllOptions()));
  })
}

// Wait until every rank is here (an all-reduce of one value on the group's device: ProcessGroupNCCL's own
// barrier guesses the device from the rank).
int tb_nccl_barrier(void* handle, char* err, size_t err_len) {
  TB_NCCL_GUARD({
    auto* g = static_cast<Group*>(handle);
    if (g == nullptr) throw std::invalid_argument("the NCCL group is closed (null handle)");
    std::vector<at::Tensor> one{at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, g->device))};
    finish(g, g->pg->allreduce(one));
  })
}

// Abort the group's communicators (a rank failed: collectives in flight return instead of waiting forever).
int tb_nccl_abort(void* handle, char* err, size_t err_len) {
  TB_NCCL_GUARD({
    auto* g = static_cast<Group*>(handle);
    if (g == nullptr) throw std::invalid_argument("the NCCL group is closed (null handle)");
    g->pg->abort();
  })
}

// Shut the group down and free it; null is ignored.
void tb_nccl_destroy(void* handle) {
  auto* g = static_cast<Group*>(handle);
  if (g == nullptr) return;
  try {
    g->pg->shutdown();
  } catch (...) {
    // Nothing to report to: the group is being freed either way.
  }
  try {
    delete g;
  } catch (...) {
  }
}

// The NCCL library's version as libtorch reports it ("2.29.7").
int tb_nccl_version(char* out, size_t out_len, char* err, size_t err_len) {
  TB_NCCL_GUARD({ copy_text(c10d::getNcclVersion(), out, out_len); })
}

}  // extern "C"
