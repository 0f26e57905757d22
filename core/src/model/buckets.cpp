#include "vitsim/core/model/buckets.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim {

const char* bucket_rule_name(BucketRule r) {
  switch (r) {
    case BucketRule::Vitsim:
      return "vitsim";
    case BucketRule::DdpReducer:
      return "ddp";
    case BucketRule::DeepSpeedIpg:
      return "deepspeed-ipg";
    case BucketRule::DeepSpeedAllreduce:
      return "deepspeed-allreduce";
    case BucketRule::DeepSpeedFlat:
      return "deepspeed-flat";
  }
  return "?";
}

std::vector<GradBucket> bucket_layout(const std::vector<double>& tensors, double cap_bytes, double elem_bytes,
                                      BucketRule rule) {
  if (!(cap_bytes > 0)) throw Error(fmt::format("bucket cap must be positive, got {} bytes", cap_bytes));
  if (!(elem_bytes > 0)) throw Error(fmt::format("element size must be positive, got {} bytes", elem_bytes));
  std::vector<GradBucket> out;
  GradBucket open;
  auto close = [&](int end) {
    open.end = end;
    open.bytes = open.elements * elem_bytes;
    out.push_back(open);
    open = GradBucket{end, end, 0, 0};
  };
  // DeepSpeed counts elements (reduce_bucket_size); the scenario holds the cap in bytes of the
  // communication dtype, so cap_bytes / elem_bytes gives the elements back.
  const double cap_elements = cap_bytes / elem_bytes;
  for (int i = 0; i < static_cast<int>(tensors.size()); ++i) {
    const double n = tensors[i];
    switch (rule) {
      case BucketRule::Vitsim:
      case BucketRule::DdpReducer: {
        open.elements += n;
        // Limits {_DEFAULT_FIRST_BUCKET_BYTES, bucket_bytes_cap}: the first bucket closes at 1 MiB
        // whatever the cap (also when bucket_cap_mb is smaller), every later one at the cap.
        // vitsim's trainer passes the one limit {cap}.
        const double limit = out.empty() && rule == BucketRule::DdpReducer ? kDdpFirstBucketBytes : cap_bytes;
        if (open.elements * elem_bytes >= limit) close(i + 1);
        break;
      }
      case BucketRule::DeepSpeedIpg:
        if (open.elements > 0 && open.elements + n > cap_elements) close(i);
        open.elements += n;
        break;
      case BucketRule::DeepSpeedAllreduce:
        open.elements += n;
        if (open.elements > cap_elements) close(i + 1);
        break;
      case BucketRule::DeepSpeedFlat:
        open.elements += n;
        break;
    }
  }
  if (open.end < static_cast<int>(tensors.size()) && !tensors.empty())
    close(static_cast<int>(tensors.size()));
  return out;
}

std::vector<double> gradient_ready_tensors(const ViTConfig& m) {
  std::vector<double> t = parameter_tensors(m);
  // The trainer's registration order (real/src/model/model.cpp; LibTorch's parameters() yields a module's own
  // parameters before its children's): class token, position embedding, then the patch convolution's
  // weight and bias - parameter_tensors() lists the convolution first. All four belong to patch_embed.
  std::rotate(t.begin(), t.begin() + 2, t.begin() + 4);
  std::reverse(t.begin(), t.end());
  return t;
}

int tensor_layer(const ViTConfig& m, int forward_index) {
  // parameter_tensors(): 4 patch-embedding tensors, then per block 6 attention tensors (LN1 weight and
  // bias, QKV weight and bias, out-projection weight and bias) and 6 MLP tensors (LN2, fc1, fc2), then 4
  // head tensors (final LN, head weight and bias). Workload layers: patch_embed, 2 per block, head.
  if (forward_index < 4) return 0;
  const int in_blocks = forward_index - 4;
  if (in_blocks < 12 * m.depth) return 1 + in_blocks / 6;
  return 1 + 2 * m.depth;
}

BucketRule bucket_rule(Framework f, int zero_stage, Precision training) {
  if (f == Framework::Vitsim) return BucketRule::Vitsim;
  if (f == Framework::Ddp) return BucketRule::DdpReducer;
  if (zero_stage >= 1) return BucketRule::DeepSpeedIpg;
  return deepspeed_path(training, zero_stage) == DeepSpeedPath::Bf16Optimizer
             ? BucketRule::DeepSpeedFlat
             : BucketRule::DeepSpeedAllreduce;
}

Precision gradient_comm_dtype(std::optional<Precision> comm_dtype, HalfCast cast, Precision training) {
  if (comm_dtype) return *comm_dtype;
  return cast == HalfCast::Module ? training : Precision::FP32;
}

std::vector<GradBucket> gradient_buckets(const ViTConfig& m, double cap_bytes, Precision comm_dtype,
                                         BucketRule rule) {
  return bucket_layout(gradient_ready_tensors(m), cap_bytes, precision_bytes(comm_dtype), rule);
}

std::string describe_buckets(const std::vector<GradBucket>& b, BucketRule rule, Precision dtype) {
  std::string out = fmt::format("{} gradient bucket{} ({} rule, {}):", b.size(), b.size() == 1 ? "" : "s",
                                bucket_rule_name(rule), precision_name(dtype));
  for (size_t k = 0; k < b.size(); ++k)
    out += fmt::format("{} [{},{}) {:.0f} B", k ? "," : "", b[k].begin, b[k].end, b[k].bytes);
  return out;
}

}  // namespace vitsim
