// The bytes of dataset files (data_file.hpp).
#include "data/data_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "vitsim/core/base/error.hpp"

namespace vitsim::real {
namespace fs = std::filesystem;

void need_regular_file(const std::string& path, const char* what) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st))
    throw Error(fmt::format("{}: not a regular file ({} must be one)", path, what));
}

BoundedGzip::BoundedGzip(std::string path) : path_(std::move(path)), in_(1 << 16) {
  need_regular_file(path_);
  std::error_code ec;
  const auto size = fs::file_size(path_, ec);
  file_size_ = ec ? 0 : size;
  f_.reset(std::fopen(path_.c_str(), "rb"));
  if (!f_) throw Error(fmt::format("{}: cannot open: {}", path_, std::strerror(errno)));
  // gzip's magic 1f 8b starts a gzip file; anything else is read as it is (as gzopen does).
  refill();
  gzip_ = z_.avail_in >= 2 && z_.next_in[0] == 0x1f && z_.next_in[1] == 0x8b;
  if (gzip_) {
    if (inflateInit2(&z_, 15 + 16) != Z_OK) throw Error(fmt::format("{}: zlib: out of memory", path_));
  }
}

BoundedGzip::~BoundedGzip() {
  if (gzip_) inflateEnd(&z_);
}

bool BoundedGzip::refill() {
  if (z_.avail_in > 0) return true;
  const size_t got = std::fread(in_.data(), 1, in_.size(), f_.get());
  if (got == 0 && std::ferror(f_.get())) fail(std::strerror(errno));
  z_.next_in = in_.data();
  z_.avail_in = static_cast<uInt>(got);
  consumed_ += got;
  return got > 0;
}

void BoundedGzip::next_member() {
  const uint64_t end = consumed_ - z_.avail_in;  // the member's last byte + 1
  // Another member needs its magic; look at two bytes (they may straddle a refill).
  uint8_t head[2];
  size_t have = 0;
  while (have < 2 && refill()) {
    head[have++] = *z_.next_in;
    ++z_.next_in;
    --z_.avail_in;
  }
  if (have == 0) {
    done_ = true;
    return;
  }
  if (have == 2 && head[0] == 0x1f && head[1] == 0x8b) {
    // Give the two bytes back to zlib: they are the next member's header.
    std::vector<uint8_t> rest(z_.next_in, z_.next_in + z_.avail_in);
    in_.assign({head[0], head[1]});
    in_.insert(in_.end(), rest.begin(), rest.end());
    in_.resize(std::max<size_t>(in_.size(), 1 << 16));
    z_.next_in = in_.data();
    z_.avail_in = static_cast<uInt>(2 + rest.size());
    inflateReset(&z_);
    return;
  }
  throw Error(fmt::format(
      "{}: {} bytes of trailing data after the gzip stream, from byte offset {} (not a gzip member: a "
      "damaged or appended file)",
      path_, file_size_ > end ? file_size_ - end : have, end));
}

size_t BoundedGzip::read(std::vector<uint8_t>& out, uint64_t n) {
  size_t total = 0;
  while (n > 0 && !done_) {
    const size_t ask = static_cast<size_t>(std::min<uint64_t>(n, 1u << 20));
    const size_t at = out.size();
    out.resize(at + ask);
    size_t got = 0;
    if (!gzip_) {
      // Plain: what refill read first, then the file.
      while (got < ask && refill()) {
        const size_t take = std::min<size_t>(ask - got, z_.avail_in);
        std::memcpy(out.data() + at + got, z_.next_in, take);
        z_.next_in += take;
        z_.avail_in -= static_cast<uInt>(take);
        got += take;
      }
      if (got < ask) done_ = true;
    } else {
      z_.next_out = out.data() + at;
      z_.avail_out = static_cast<uInt>(ask);
      while (z_.avail_out > 0 && !done_) {
        if (!refill()) fail("unexpected end of file");
        const int rc = inflate(&z_, Z_NO_FLUSH);
        if (rc == Z_STREAM_END) {
          next_member();
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
          fail(z_.msg ? z_.msg : "invalid data");
        }
      }
      got = ask - z_.avail_out;
    }
    out.resize(at + got);
    total += got;
    n -= got;
  }
  return total;
}

void BoundedGzip::fail(const std::string& reason) {
  throw Error(fmt::format("{}: corrupt or truncated gzip data: {}", path_, reason));
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
