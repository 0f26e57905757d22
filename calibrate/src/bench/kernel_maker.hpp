#pragma once
// The LibTorch kernel that stands for each op of the op model (core/model/ops.hpp) when `vitsim calibrate`
// times it alone (bench_ops.cpp measure_ops). The kernel is chosen by the op's identity (Op::id, Op::linear),
// never by its printed name: kernel_maker.cpp the device sweep, kernels_matmul.cpp the GEMMs, attention's
// batched matmuls and the patch embedding's convolution, kernels_memory.cpp the data-movement and norm ops.
#include <torch/torch.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "harness/measure.hpp"

namespace vitsim::calibrate {

using Kernel = std::function<void()>;

// The model's sizes at one micro-batch.
struct Dims {
  int64_t b = 0, T = 0, N = 0, K = 0, d = 0, h = 0, H = 0, hd = 0, P = 0, C = 0, R = 0;
};
Dims dims_of(const ViTConfig& m, int b);

class KernelMaker {
 public:
  KernelMaker(const Scenario& s, const torch::Device& dev);

  // The kernel standing for one op, its inputs made here (not timed); `how` names it. Null when no kernel
  // can stand for it (a fused attention op on a LibTorch without scaled_dot_product_attention).
  Kernel make(const OpBenchmark& ob, std::string& how);

 private:
  const ViTConfig& m_;
  torch::Device dev_;
  bool half_;
  at::ScalarType act_ = at::kFloat;

  // Normal random operands. On the CPU, copies of one pool of kPool draws (made once per KernelMaker, from
  // the scenario's seed): the op benchmarks make up to 64 input sets of each op per round to keep operands
  // cold (bench_ops.cpp InputRing), hundreds of MiB per op, and drawing each element was most of
  // calibrate's CPU time (measured on this VM, one thread, 16 Mi elements, freed memory kept as calibrate
  // keeps it: torch::randn 7.7 ns of CPU an element, a copy from the pool 0.65 ns). The kernels'
  // times do not depend on the values; the pool's period (4 MiB of fp32) is far above any row they reduce.
  torch::Tensor rnd(at::IntArrayRef shape, at::ScalarType t);
  torch::Tensor pool_;
  static constexpr int64_t kPool = int64_t{1} << 20;
  torch::Tensor empty(at::IntArrayRef shape, at::ScalarType t) {
    return torch::empty(shape, torch::TensorOptions().dtype(t).device(dev_));
  }

  // Outputs of the family sweeps kept alive, the oldest dropped past kRetainBytes: as in a training
  // pass, where an op's output is a fresh block while the activations before it are still held, each
  // run writes to memory that is not in the cache (a block freed by the previous run and handed back at
  // once would be). Measured on this VM (1 thread, softmax over [64, 197, 197]): 1.09 ns an element with
  // the output block reused, 2.2 ns inside an autograd graph; its backward 0.37 against 1.5 ns.
  struct Retained {
    std::deque<torch::Tensor> outputs;
    double bytes = 0;
    void keep(const torch::Tensor& t) {
      outputs.push_back(t);
      bytes += static_cast<double>(t.numel()) * t.element_size();
      while (bytes > kRetainBytes && outputs.size() > 1) {
        bytes -= static_cast<double>(outputs.front().numel()) * outputs.front().element_size();
        outputs.pop_front();
      }
    }
    static constexpr double kRetainBytes = 256.0 * 1024 * 1024;  // 8x this VM's 32 MiB last-level cache
  };
  std::shared_ptr<Retained> retained_ = std::make_shared<Retained>();

  // The device sweep (kernel_maker.cpp).
  Kernel sweep(const Op& op, std::string& how);
  Kernel kind_sweep(const Op& op, std::string& how);
  // Matmul-shaped ops (kernels_matmul.cpp).
  Kernel conv(const Op& op, const Dims& D, std::string& how);
  Kernel matmul(const Op& op, std::string& how);
  Kernel attention_matmul(const Op& op, std::string& how);
  // Data movement and norm ops (kernels_memory.cpp), one group of ops each.
  Kernel memory(const Op& op, const Dims& D, std::string& how);
  Kernel layer_norm_kernel(const Op& op, const Dims& D, std::string& how);
  Kernel parameter_kernel(const Op& op, const Dims& D, std::string& how);
  Kernel cast_kernel(const Op& op, std::string& how);
  Kernel embedding_kernel(const Op& op, const Dims& D, std::string& how);
  Kernel dropout_kernel(const Op& op, std::string& how);
  Kernel attention_kernel(const Op& op, const Dims& D, std::string& how);
  Kernel block_kernel(const Op& op, const Dims& D, std::string& how);
  Kernel loss_kernel(const Op& op, const Dims& D, std::string& how);
  // The (in, out) features of a linear layer, and the rows it runs on.
  std::pair<int64_t, int64_t> linear_shape(LinearId lin, const Dims& D) const;
  int64_t linear_rows(LinearId lin, const Dims& D) const;
};

}  // namespace vitsim::calibrate
