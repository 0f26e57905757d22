// The bytes of dataset files (data_file.hpp).
#include "data_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "vitsim/core/base/error.hpp"

namespace vitsim::real {
namespace fs = std::filesystem;

namespace {

// zlib's message without the "PATH: " it prefixes, which the error already names.
std::string gz_reason(const std::string& path, const char* msg) {
  std::string m = msg ? msg : "unknown error";
  if (m.rfind(path + ": ", 0) == 0) m.erase(0, path.size() + 2);
  return m;
}

}  // namespace

void need_regular_file(const std::string& path, const char* what) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st))
    throw Error(fmt::format("{}: not a regular file ({} must be one)", path, what));
}

BoundedGzip::BoundedGzip(std::string path) : path_(std::move(path)) {
  need_regular_file(path_);
  std::error_code ec;
  const auto size = fs::file_size(path_, ec);
  file_size_ = ec ? 0 : size;
  f_ = gzopen(path_.c_str(), "rb");
  if (!f_) throw Error(fmt::format("{}: cannot open: {}", path_, std::strerror(errno)));
}

size_t BoundedGzip::read(std::vector<uint8_t>& out, uint64_t n) {
  size_t total = 0;
  while (n > 0) {
    const unsigned ask = static_cast<unsigned>(std::min<uint64_t>(n, 1u << 20));
    const size_t at = out.size();
    out.resize(at + ask);
    const int got = gzread(f_, out.data() + at, ask);
    if (got < 0) fail();
    out.resize(at + static_cast<size_t>(got));
    total += static_cast<size_t>(got);
    n -= static_cast<uint64_t>(got);
    if (got == 0) break;
  }
  // zlib reports a gzip stream cut short only through gzerror after the last read.
  int code = 0;
  gzerror(f_, &code);
  if (code != Z_OK && code != Z_STREAM_END) fail();
  return total;
}

void BoundedGzip::fail() {
  int code = 0;
  std::string msg = gz_reason(path_, gzerror(f_, &code));
  throw Error(fmt::format("{}: corrupt or truncated gzip data: {}", path_, msg));
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& data, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (!f) throw Error(fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
    if (!data.empty() &&
        gzwrite(f, data.data(), static_cast<unsigned>(data.size())) != static_cast<int>(data.size())) {
      gzclose(f);
      throw Error(fmt::format("{}: write failed", path));
    }
    if (gzclose(f) != Z_OK) throw Error(fmt::format("{}: write failed", path));
    return;
  }
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!f) throw Error(fmt::format("{}: write failed", path));
}

}  // namespace vitsim::real
