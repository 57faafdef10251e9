// trainbench-backend-tch shim, differentiable operations computed by Rust: a node of libtorch's autograd graph whose
// forward and backward call back into Rust (a collective over a group of ranks: tensor, sequence and expert
// parallelism communicate inside the graph, which tch cannot express). Rust owns the operation's state; the node
// holds it and releases it when the graph is freed, whether or not a backward ran. No exception crosses into Rust.
#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>

extern "C" {
// Rust's side: apply `op` in `direction` (0 forward, 1 backward) to `input`; on success `*output` is a new tensor
// handle the caller owns; on failure a message in `err` and a non-zero return.
typedef int (*tb_diff_fn)(void* op, int direction, at::Tensor* input, at::Tensor** output, char* err, size_t err_len);
// Rust's side: release `op` (the graph that held it is gone).
typedef void (*tb_diff_drop_fn)(void* op);
}

namespace {
// The Rust operation, owned by the autograd context; released with it.
struct TbDiffHolder : torch::CustomClassHolder {
  void* op;
  tb_diff_fn fn;
  tb_diff_drop_fn drop;
  TbDiffHolder(void* o, tb_diff_fn f, tb_diff_drop_fn d) : op(o), fn(f), drop(d) {}
  ~TbDiffHolder() override {
    if (op != nullptr) drop(op);
  }
  at::Tensor call(int direction, const at::Tensor& input) const {
    char err[1024] = {0};
    at::Tensor in = input;
    at::Tensor* out = nullptr;
    if (fn(op, direction, &in, &out, err, sizeof err) != 0 || out == nullptr) {
      throw std::runtime_error(std::string(err));
    }
    at::Tensor result = *out;
    delete out;
    return result;
  }
};

struct TbDiffOp : public torch::autograd::Function<TbDiffOp> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            c10::intrusive_ptr<TbDiffHolder> holder) {
    at::Tensor y = holder->call(0, x);
    ctx->saved_data["op"] = c10::IValue::make_capsule(holder);
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto capsule = ctx->saved_data["op"].toCapsule();  // keeps the holder alive through the call
    const auto* holder = static_cast<const TbDiffHolder*>(capsule.get());
    at::Tensor g = grads.at(0);
    at::Tensor dx = g.defined() ? holder->call(1, g) : at::Tensor();
    return {dx, at::Tensor()};
  }
};
}  // namespace

extern "C" {
// `op` applied to `x` as a node of the autograd graph (recorded when grad mode is on and `x` requires grad).
// `op` is handed over: released through `drop` with the graph, or at once when nothing recorded it (also on
// failure).
int tb_diff_apply(at::Tensor* x, void* op, tb_diff_fn fn, tb_diff_drop_fn drop, at::Tensor** out, char* err,
                  size_t err_len) {
  auto holder = c10::make_intrusive<TbDiffHolder>(op, fn, drop);
  try {
    *out = new at::Tensor(TbDiffOp::apply(*x, holder));
    return 0;
  } catch (const std::exception& e) {
    std::strncpy(err, e.what(), err_len - 1);
    err[err_len - 1] = '\0';
    return -1;
  } catch (...) {
    std::strncpy(err, "unknown C++ exception", err_len - 1);
    err[err_len - 1] = '\0';
    return -1;
  }
}
}
