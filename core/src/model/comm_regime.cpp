// The ring's closed form for the gradient reduction's regime (core/model/comm_regime.hpp).
#include "vitsim/core/model/comm_regime.hpp"

#include <fmt/format.h>

#include <cmath>

namespace vitsim {

int ring_steps(int n, bool all_reduce) {
  return n < 2 ? 0 : (all_reduce ? 2 : 1) * (n - 1);
}

double ring_transfer_s(int n, double bytes, double bw, bool all_reduce) {
  return n < 2 || bw <= 0 ? 0 : ring_steps(n, all_reduce) * (bytes / n) / bw;
}

double ring_bucket_for_share(int n, double a, double bw, double share) {
  return share > 0 ? n * a * bw / share : 0;
}

namespace {
struct Rounded {
  double value = 0, scale = 1;
  const char* unit = "KB";
};
Rounded rounded(double bytes) {
  Rounded r;
  if (bytes >= 1e9)
    r.scale = 1e9, r.unit = "GB";
  else if (bytes >= 1e6)
    r.scale = 1e6, r.unit = "MB";
  else
    r.scale = 1e3;
  const double x = bytes / r.scale;
  if (!(x > 0)) return r;
  const double step = std::pow(10.0, std::floor(std::log10(x)) - 1);  // two significant digits
  r.value = std::ceil(x / step - 1e-9) * step;
  return r;
}
}  // namespace

std::string bucket_setting(double bytes) {
  const Rounded r = rounded(bytes);
  return fmt::format("{:g}{}", r.value, r.unit);
}

double bucket_setting_bytes(double bytes) {
  const Rounded r = rounded(bytes);
  return r.value * r.scale;
}

}  // namespace vitsim
