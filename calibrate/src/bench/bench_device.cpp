// The rank's device for LibTorch (open_device), and the host-to-device copy benchmark (measure_copy).
#include <dlfcn.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cstdio>

#include <fmt/format.h>

#include "harness/torch_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/system.hpp"
#include "vitsim/real/device.hpp"
#include "vitsim/real/train.hpp"

namespace vitsim::calibrate {

std::string torch_version() {
  return TORCH_VERSION;
}

DeviceInfo open_device(const Scenario& s, int local_rank, int local_size) {
  DeviceInfo info;
  const real::RankDevice device = real::choose_device(s, local_rank);
  info.device = device.name();
  info.name = "cpu";
  // Threads as the trainer sets them: ranks x threads never exceeds the cores
  // (docs/sources.md "Software and machine facts", threads per rank).
  const real::ThreadPlan plan = real::plan_threads(s.run.threads, local_size);
  info.threads = plan.threads;
  if (!plan.warning.empty()) fmt::print(stderr, "vitsim calibrate: warning: {}\n", plan.warning);
  real::set_threads(info.threads);
  if (device.cuda) {
    // The multiprocessor count (cudaDevAttrMultiProcessorCount = 16) from the CUDA runtime LibTorch loaded.
    using AttrFn = int (*)(int*, int, int);
    if (auto fn = reinterpret_cast<AttrFn>(dlsym(RTLD_DEFAULT, "cudaDeviceGetAttribute"))) {
      int v = 0;
      if (fn(&v, 16, device.index) == 0 && v > 0) info.sm_count = v;
    }
  }
  return info;
}

CopySample measure_copy(const DeviceInfo& info, double bytes, const Repeats& repeats) {
  const torch::Device dev = device_of(info);
  const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
  std::vector<float> host(static_cast<size_t>(n), 1.0f);
  auto pageable = torch::from_blob(host.data(), {n}, torch::kFloat32);
  CopySample out;
  out.bytes = static_cast<double>(n) * sizeof(float);
  out.on_cpu = !dev.is_cuda();
  // On CPU there is no device: the "copy" is a memcpy into a freshly allocated tensor (what moving a
  // batch would cost), and pinned equals pageable. On CUDA, from pageable memory and from a pinned
  // buffer, each timed to the end of the copy.
  torch::Tensor pinned = out.on_cpu ? pageable : pageable.pin_memory();
  auto copy_from = [&](const torch::Tensor& src, bool non_blocking) {
    auto a = mark(dev);
    torch::Tensor dst;
    if (out.on_cpu) {
      dst = torch::empty({n}, torch::kFloat32);
      dst.copy_(src);
    } else {
      dst = src.to(dev, non_blocking);
    }
    auto b = mark(dev);
    return seconds(a, b);
  };
  // Each run: one copy from the pinned buffer, then one from pageable memory.
  const auto [pinned_t, pageable_t] = timed_phases<2>(repeats, [&] {
    const double from_pinned = copy_from(pinned, /*non_blocking=*/true);
    return std::array<double, 2>{from_pinned, copy_from(pageable, /*non_blocking=*/false)};
  });
  out.pinned_s = spread_of(pinned_t);
  out.pageable_s = spread_of(pageable_t);
  return out;
}

}  // namespace vitsim::calibrate
