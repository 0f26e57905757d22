// CIFAR-10/100 binary records: read_cifar and write_cifar (vitsim/real/data.hpp).
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "data/data_file.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/real/data.hpp"

namespace vitsim::real {
namespace fs = std::filesystem;

MemorySource read_cifar(const std::vector<std::string>& files, int label_bytes, int classes) {
  constexpr size_t kPixels = 3 * 32 * 32;
  const size_t record = label_bytes + kPixels;
  std::vector<uint8_t> pixels;
  std::vector<int32_t> labels;
  for (const auto& path : files) {
    need_regular_file(path);
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    std::vector<uint8_t> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (data.empty())
      throw Error(fmt::format("{}: empty file, expected {}-byte CIFAR records", path, record));
    if (data.size() % record != 0)
      throw Error(
          fmt::format("{}: truncated: {} bytes is not a whole number of {}-byte CIFAR records "
                      "({} complete, {} bytes left over)",
                      path, data.size(), record, data.size() / record, data.size() % record));
    for (size_t off = 0; off < data.size(); off += record) {
      int label = data[off + label_bytes - 1];  // CIFAR-100: coarse, fine; the fine label is the class
      if (label >= classes)
        throw Error(
            fmt::format("{}: record {}: label {} is out of range (expected 0 .. {}); not a CIFAR-{} file?",
                        path, off / record, label, classes - 1, classes));
      labels.push_back(label);
      pixels.insert(pixels.end(), data.begin() + off + label_bytes, data.begin() + off + record);
    }
  }
  std::string what = files.size() == 1 ? files[0] : fs::path(files[0]).parent_path().string();
  return MemorySource(what, 3, 32, 32, classes, std::move(pixels), std::move(labels));
}

void write_cifar(const std::string& path, const MemorySource& set, int label_bytes) {
  if (set.channels() != 3 || set.height() != 32 || set.width() != 32)
    throw Error("write_cifar: CIFAR records hold 3x32x32 images");
  std::vector<uint8_t> out;
  const size_t n = 3 * 32 * 32;
  for (size_t i = 0; i < set.size(); ++i) {
    if (label_bytes == 2) out.push_back(static_cast<uint8_t>(set.labels()[i] / 5));  // a coarse label
    out.push_back(static_cast<uint8_t>(set.labels()[i]));
    out.insert(out.end(), set.pixels().begin() + i * n, set.pixels().begin() + (i + 1) * n);
  }
  write_bytes(path, out, false);
}

}  // namespace vitsim::real
