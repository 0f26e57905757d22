// IDX files (MNIST, Fashion-MNIST): read_idx and write_idx (vitsim/real/data.hpp).
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/data_file.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/real/data.hpp"

namespace vitsim::real {

namespace {

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}
void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

}  // namespace

// IDX: big-endian magic 0x0000 08 <ndims>, then ndims 32-bit sizes, then the bytes. Reads the header,
// then exactly the bytes it states (bounded: a file larger than its header says is an error, and is
// not decompressed beyond the stated size + 1 byte).
namespace {
struct IdxFile {
  std::vector<uint8_t> bytes;  // header and data
  std::vector<uint64_t> dims;
};
IdxFile read_idx_file(const std::string& path, uint32_t magic, const char* kind) {
  const size_t ndims = magic & 0xff, header = 4 + 4 * ndims;
  BoundedGzip in(path);
  IdxFile f;
  in.read(f.bytes, 4);
  if (f.bytes.size() >= 4 && be32(f.bytes.data()) != magic)
    throw Error(fmt::format("{}: not an IDX {} file: magic 0x{:08x}, expected 0x{:08x} (ubyte, {} dim{})",
                            path, kind, be32(f.bytes.data()), magic, ndims, ndims == 1 ? "" : "s"));
  in.read(f.bytes, header - f.bytes.size());
  if (f.bytes.size() < header)
    throw Error(fmt::format("{}: truncated IDX header: {} bytes, expected at least {}", path, f.bytes.size(),
                            header));
  for (size_t d = 0; d < ndims; ++d) f.dims.push_back(be32(f.bytes.data() + 4 + 4 * d));
  for (size_t d = 1; d < ndims; ++d)
    if (f.dims[d] == 0 || f.dims[d] > 65536)
      throw Error(fmt::format("{}: implausible image size {}x{}", path, f.dims[1], f.dims[2]));
  uint64_t data = 1;  // below 2^32 x 2^16 x 2^16: no overflow
  for (uint64_t d : f.dims) data *= d;
  const uint64_t want = header + data;
  const std::string stated =
      ndims == 3 ? fmt::format("{} header + {} images of {}x{}", header, f.dims[0], f.dims[1], f.dims[2])
                 : fmt::format("{} header + {} labels", header, f.dims[0]);
  // A header may state anything; the file's own size bounds what it can hold.
  if (want > in.capacity()) {
    if (!in.compressed())
      throw Error(fmt::format("{}: truncated or oversized: {} bytes, expected {} ({})", path, in.file_size(),
                              want, stated));
    throw Error(fmt::format(
        "{}: header states {} bytes ({}), more than a {}-byte gzip file can hold (deflate expands at "
        "most {}:1): a corrupt header",
        path, want, stated, in.file_size(), kMaxDeflateRatio));
  }
  in.read(f.bytes, want - f.bytes.size());
  const bool larger = f.bytes.size() == want && in.more();
  if (f.bytes.size() != want || larger) {
    if (!in.compressed())
      throw Error(fmt::format("{}: truncated or oversized: {} bytes, expected {} ({})", path, in.file_size(),
                              want, stated));
    if (larger)
      throw Error(
          fmt::format("{}: larger than its header states: more than {} bytes decompressed, expected {} ({}); "
                      "stopped reading there",
                      path, want, want, stated));
    throw Error(fmt::format("{}: truncated: decompresses to {} bytes, expected {} ({})", path, f.bytes.size(),
                            want, stated));
  }
  return f;
}
}  // namespace

MemorySource read_idx(const std::string& images_path, const std::string& labels_path, int classes) {
  // The image file is read first (its errors come first), then the labels against its count.
  IdxFile img = read_idx_file(images_path, 0x00000803, "image");
  const size_t n = img.dims[0], h = img.dims[1], w = img.dims[2];
  IdxFile lab = read_idx_file(labels_path, 0x00000801, "label");
  const size_t nl = lab.dims[0];
  if (n != nl)
    throw Error(fmt::format("{}: {} labels but {} has {} images", labels_path, nl, images_path, n));
  const auto& labs = lab.bytes;
  std::vector<int32_t> labels(n);
  for (size_t i = 0; i < n; ++i) {
    labels[i] = labs[8 + i];
    if (labels[i] >= classes)
      throw Error(fmt::format("{}: label {} of sample {} is out of range (expected 0 .. {})", labels_path,
                              labels[i], i, classes - 1));
  }
  std::vector<uint8_t> pixels(img.bytes.begin() + 16, img.bytes.end());
  return MemorySource(images_path, 1, static_cast<int>(h), static_cast<int>(w), classes, std::move(pixels),
                      std::move(labels));
}

void write_idx(const std::string& images_path, const std::string& labels_path, const MemorySource& set,
               bool gzip) {
  if (set.channels() != 1) throw Error("write_idx: IDX image files hold one channel");
  std::vector<uint8_t> img, lab;
  put_be32(img, 0x00000803);
  put_be32(img, static_cast<uint32_t>(set.size()));
  put_be32(img, static_cast<uint32_t>(set.height()));
  put_be32(img, static_cast<uint32_t>(set.width()));
  img.insert(img.end(), set.pixels().begin(), set.pixels().end());
  put_be32(lab, 0x00000801);
  put_be32(lab, static_cast<uint32_t>(set.size()));
  for (int32_t l : set.labels()) lab.push_back(static_cast<uint8_t>(l));
  write_bytes(images_path, img, gzip);
  write_bytes(labels_path, lab, gzip);
}

}  // namespace vitsim::real
