#include "vitsim/core/formats/identity.hpp"

#include <cctype>

#include <fmt/format.h>

#include <array>
#include <cstdint>

#include "vitsim/core/formats/scenario.hpp"

#ifndef VITSIM_VERSION
#define VITSIM_VERSION "unknown"
#endif

namespace vitsim {

const char* vitsim_version() {
  return VITSIM_VERSION;
}

namespace {
constexpr std::array<uint32_t, 64> kRound = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

uint32_t rotr(uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

void compress(std::array<uint32_t, 8>& h, const unsigned char* block) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = uint32_t(block[4 * i]) << 24 | uint32_t(block[4 * i + 1]) << 16 | uint32_t(block[4 * i + 2]) << 8 |
           uint32_t(block[4 * i + 3]);
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; ++i) {
    const uint32_t t1 =
        k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}
}  // namespace

std::string sha256_hex(const std::string& bytes) {
  std::array<uint32_t, 8> h = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size(), i = 0;
  for (; i + 64 <= n; i += 64) compress(h, data + i);
  unsigned char tail[128] = {};
  const size_t rest = n - i;
  for (size_t k = 0; k < rest; ++k) tail[k] = data[i + k];
  tail[rest] = 0x80;
  const size_t tail_len = rest + 9 <= 64 ? 64 : 128;
  const uint64_t bits = static_cast<uint64_t>(n) * 8;
  for (int k = 0; k < 8; ++k) tail[tail_len - 1 - k] = static_cast<unsigned char>(bits >> (8 * k));
  compress(h, tail);
  if (tail_len == 128) compress(h, tail + 64);
  std::string out;
  for (uint32_t x : h) out += fmt::format("{:08x}", x);
  return out;
}

std::string scenario_identity_text(const Scenario& s) {
  // Numbers as %.17g: the same double always prints the same text. Keep the keys in this order:
  // changing the text changes every identity (old reports then name another scenario).
  std::string t;
  auto line = [&t](const char* key, const auto& value) { t += fmt::format("{}={}\n", key, value); };
  auto num = [&t](const char* key, double value) { t += fmt::format("{}={:.17g}\n", key, value); };
  const ViTConfig& m = s.model;
  line("model.image_size", m.image_size);
  line("model.patch", m.patch);
  line("model.channels", m.channels);
  line("model.width", m.width);
  line("model.depth", m.depth);
  line("model.heads", m.heads);
  num("model.mlp_ratio", m.mlp_ratio);
  line("model.classes", m.classes);
  num("model.dropout", m.dropout);
  line("model.attention", attention_path_name(m.attention));
  line("dataset.name", s.dataset.name);
  line("dataset.train_samples", s.dataset.train_samples);
  line("dataset.test_samples", s.dataset.test_samples);
  line("dataset.image_size", s.dataset.image_size);
  line("dataset.channels", s.dataset.channels);
  num("dataset.per_gpu_fraction", s.dataset.per_gpu_fraction);
  line("cluster.nodes", s.cluster.nodes);
  line("cluster.gpus_per_node", s.cluster.gpus_per_node);
  std::string hosts;
  for (const auto& h : s.cluster.hosts) hosts += (hosts.empty() ? "" : ",") + h;
  line("cluster.hosts", hosts);
  line("training.micro_batch", s.training.micro_batch);
  line("training.grad_accum", s.training.grad_accum);
  line("training.precision", precision_name(s.training.precision));
  line("training.optimizer", s.training.optimizer);
  line("training.framework", framework_name(s.training.framework));
  if (m.class_tokens != 1) line("model.class_tokens", m.class_tokens);  // issue 37: only when not 1
  // Issue 15's settings, written only when set so that earlier reports' identities stay valid.
  // Issue 37's: written only when not 1.13's defaults.
  if (s.training.torch_version != "1.13") line("training.torch_version", s.training.torch_version);
  if (s.training.optimizer_impl != "default") line("training.optimizer_impl", s.training.optimizer_impl);
  // Issue 37's training.cast: written only where it is not the framework's own.
  if (half_cast(s) != framework_half_cast(s.training.framework))
    line("training.cast", half_cast_name(half_cast(s)));
  if (s.training.activation_checkpointing) line("training.activation_checkpointing", "true");
  if (s.training.gradient_clipping > 0) num("training.gradient_clipping", s.training.gradient_clipping);
  if (s.training.loss_scale > 0) num("training.loss_scale", s.training.loss_scale);
  line("parallelism.zero", s.parallel.zero);
  line("parallelism.overlap", s.parallel.overlap ? "true" : "false");
  num("parallelism.bucket_bytes", s.parallel.bucket_bytes);
  num("parallelism.allgather_bucket_bytes", s.parallel.allgather_bucket_bytes);
  line("parallelism.collective", s.parallel.collective);
  line("parallelism.comm_dtype", s.parallel.comm_dtype ? precision_name(*s.parallel.comm_dtype) : "default");
  line("parallelism.sequence_parallel", s.parallel.sequence_parallel);
  line("loader.workers", s.loader.workers);
  line("loader.pinned", s.loader.pinned ? "true" : "false");
  line("loader.prefetch", s.loader.prefetch);
  return t;
}

std::string scenario_id(const Scenario& s) {
  return "sha256:" + sha256_hex(scenario_identity_text(s));
}

bool is_sha256_id(const std::string& id) {
  bool hex = id.size() == 7 + 64 && id.rfind("sha256:", 0) == 0;
  for (size_t i = 7; hex && i < id.size(); ++i) hex = std::isxdigit(static_cast<unsigned char>(id[i]));
  return hex;
}

}  // namespace vitsim
