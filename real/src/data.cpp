#include "vitsim/real/data.hpp"

#include <fmt/format.h>
#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "vitsim/core/dataset.hpp"
#include "vitsim/core/error.hpp"

namespace vitsim::real {
namespace fs = std::filesystem;

namespace {

// splitmix64: a tiny, well-mixed hash; the source of every random decision in the data path.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
uint64_t key(uint64_t seed, uint64_t a, uint64_t b) { return mix(mix(mix(seed) ^ a) ^ b); }

// zlib's message without the "PATH: " it prefixes, which the error already names.
std::string gz_reason(const std::string& path, const char* msg) {
  std::string m = msg ? msg : "unknown error";
  if (m.rfind(path + ": ", 0) == 0) m.erase(0, path.size() + 2);
  return m;
}

// A dataset file must be a regular file: a FIFO would block, /dev/zero would never end.
void need_regular_file(const std::string& path, const char* what = "a dataset file") {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st))
    throw Error(fmt::format("{}: not a regular file ({} must be one)", path, what));
}

// Deflate expands at most 1032:1 (zlib's technical notes: a 258-byte match coded in 2 bits), so a
// gzip file of S bytes cannot hold more than about 1032 x S bytes: a header stating more is corrupt.
constexpr uint64_t kMaxDeflateRatio = 1032;

// Reads a gzipped or plain file through zlib, never more than the caller asks for: the reader of a
// format with a header (IDX) reads the header, works out how many bytes the header states, and reads
// exactly that many plus one byte to tell "larger than stated" apart. A gzip bomb (a small file whose
// data inflates without end) is stopped there instead of running out of memory.
class BoundedGzip {
 public:
  explicit BoundedGzip(std::string path) : path_(std::move(path)) {
    need_regular_file(path_);
    std::error_code ec;
    const auto size = fs::file_size(path_, ec);
    file_size_ = ec ? 0 : size;
    f_ = gzopen(path_.c_str(), "rb");
    if (!f_) throw Error(fmt::format("{}: cannot open: {}", path_, std::strerror(errno)));
  }
  ~BoundedGzip() { gzclose(f_); }
  BoundedGzip(const BoundedGzip&) = delete;
  BoundedGzip& operator=(const BoundedGzip&) = delete;

  // Appends up to n bytes to out; returns how many came (fewer only at the end of the data).
  size_t read(std::vector<uint8_t>& out, uint64_t n) {
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
  // Whether the file holds more data than has been read (reads one byte, at most).
  bool more() {
    std::vector<uint8_t> one;
    return read(one, 1) > 0;
  }
  bool compressed() const { return gzdirect(f_) == 0; }
  // The most data this file can hold: its size when plain, 1032 x its size when gzipped.
  uint64_t capacity() const { return compressed() ? kMaxDeflateRatio * file_size_ + 1024 : file_size_; }
  uint64_t file_size() const { return file_size_; }

 private:
  [[noreturn]] void fail() {
    int code = 0;
    std::string msg = gz_reason(path_, gzerror(f_, &code));
    throw Error(fmt::format("{}: corrupt or truncated gzip data: {}", path_, msg));
  }
  std::string path_;
  gzFile f_ = nullptr;
  uint64_t file_size_ = 0;
};

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}
void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& data, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (!f) throw Error(fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
    if (!data.empty() && gzwrite(f, data.data(), static_cast<unsigned>(data.size())) != static_cast<int>(data.size())) {
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

}  // namespace

MemorySource::MemorySource(std::string what, int channels, int height, int width, int classes,
                           std::vector<uint8_t> pixels, std::vector<int32_t> labels)
    : what_(std::move(what)), channels_(channels), height_(height), width_(width), classes_(classes),
      pixels_(std::move(pixels)), labels_(std::move(labels)) {
  if (pixels_.size() != labels_.size() * channels_ * height_ * width_)
    throw Error(fmt::format("{}: {} pixel bytes for {} images of {}x{}x{}", what_, pixels_.size(), labels_.size(),
                            channels_, height_, width_));
}

void MemorySource::get(size_t index, Image& image, int& label) const {
  const size_t n = static_cast<size_t>(channels_) * height_ * width_;
  image.channels = channels_;
  image.height = height_;
  image.width = width_;
  image.pixels.assign(pixels_.begin() + index * n, pixels_.begin() + (index + 1) * n);
  label = labels_[index];
}

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
    throw Error(fmt::format("{}: not an IDX {} file: magic 0x{:08x}, expected 0x{:08x} (ubyte, {} dim{})", path, kind,
                            be32(f.bytes.data()), magic, ndims, ndims == 1 ? "" : "s"));
  in.read(f.bytes, header - f.bytes.size());
  if (f.bytes.size() < header)
    throw Error(fmt::format("{}: truncated IDX header: {} bytes, expected at least {}", path, f.bytes.size(), header));
  for (size_t d = 0; d < ndims; ++d) f.dims.push_back(be32(f.bytes.data() + 4 + 4 * d));
  for (size_t d = 1; d < ndims; ++d)
    if (f.dims[d] == 0 || f.dims[d] > 65536)
      throw Error(fmt::format("{}: implausible image size {}x{}", path, f.dims[1], f.dims[2]));
  uint64_t data = 1;  // below 2^32 x 2^16 x 2^16: no overflow
  for (uint64_t d : f.dims) data *= d;
  const uint64_t want = header + data;
  const std::string stated = ndims == 3 ? fmt::format("{} header + {} images of {}x{}", header, f.dims[0], f.dims[1], f.dims[2])
                                        : fmt::format("{} header + {} labels", header, f.dims[0]);
  // A header may state anything; the file's own size bounds what it can hold.
  if (want > in.capacity()) {
    if (!in.compressed())
      throw Error(fmt::format("{}: truncated or oversized: {} bytes, expected {} ({})", path, in.file_size(), want, stated));
    throw Error(fmt::format("{}: header states {} bytes ({}), more than a {}-byte gzip file can hold (deflate expands at "
                            "most {}:1): a corrupt header",
                            path, want, stated, in.file_size(), kMaxDeflateRatio));
  }
  in.read(f.bytes, want - f.bytes.size());
  const bool larger = f.bytes.size() == want && in.more();
  if (f.bytes.size() != want || larger) {
    if (!in.compressed())
      throw Error(fmt::format("{}: truncated or oversized: {} bytes, expected {} ({})", path, in.file_size(), want, stated));
    if (larger)
      throw Error(fmt::format("{}: larger than its header states: more than {} bytes decompressed, expected {} ({}); "
                              "stopped reading there",
                              path, want, want, stated));
    throw Error(fmt::format("{}: truncated: decompresses to {} bytes, expected {} ({})", path, f.bytes.size(), want,
                            stated));
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
  if (n != nl) throw Error(fmt::format("{}: {} labels but {} has {} images", labels_path, nl, images_path, n));
  const auto& labs = lab.bytes;
  std::vector<int32_t> labels(n);
  for (size_t i = 0; i < n; ++i) {
    labels[i] = labs[8 + i];
    if (labels[i] >= classes)
      throw Error(fmt::format("{}: label {} of sample {} is out of range (expected 0 .. {})", labels_path, labels[i], i,
                              classes - 1));
  }
  std::vector<uint8_t> pixels(img.bytes.begin() + 16, img.bytes.end());
  return MemorySource(images_path, 1, static_cast<int>(h), static_cast<int>(w), classes, std::move(pixels),
                      std::move(labels));
}

void write_idx(const std::string& images_path, const std::string& labels_path, const MemorySource& set, bool gzip) {
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
    if (data.empty()) throw Error(fmt::format("{}: empty file, expected {}-byte CIFAR records", path, record));
    if (data.size() % record != 0)
      throw Error(fmt::format("{}: truncated: {} bytes is not a whole number of {}-byte CIFAR records "
                              "({} complete, {} bytes left over)",
                              path, data.size(), record, data.size() / record, data.size() % record));
    for (size_t off = 0; off < data.size(); off += record) {
      int label = data[off + label_bytes - 1];  // CIFAR-100: coarse, fine; the fine label is the class
      if (label >= classes)
        throw Error(fmt::format("{}: record {}: label {} is out of range (expected 0 .. {}); not a CIFAR-{} file?", path,
                                off / record, label, classes - 1, classes));
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

// ---- JPEG / PNG ----
namespace {
// A header may claim any size; decoding it would allocate width*height*channels bytes before a single
// pixel is checked. PIL's decompression-bomb guard (Image.MAX_IMAGE_PIXELS) is the limit used here too.
constexpr uint64_t kMaxImagePixels = 89'478'485;
[[noreturn]] void too_large(const std::string& path, const char* kind, uint64_t width, uint64_t height) {
  throw Error(fmt::format("{}: {} header claims {}x{} pixels; the limit is {} pixels (a decompression bomb?)", path,
                          kind, width, height, kMaxImagePixels));
}

struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};
void jpeg_quiet(j_common_ptr) {}  // warnings are counted and reported as one Error, not printed
void jpeg_fail(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  longjmp(err->jump, 1);
}

Image interleaved_to_chw(const std::vector<uint8_t>& hwc, int h, int w, int c) {
  Image img;
  img.channels = c;
  img.height = h;
  img.width = w;
  img.pixels.resize(hwc.size());
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) img.pixels[(size_t(k) * h + y) * w + x] = hwc[(size_t(y) * w + x) * c + k];
  return img;
}

Image decode_jpeg(const std::string& path, const std::vector<uint8_t>& data, int channels) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_fail;
  err.mgr.output_message = jpeg_quiet;
  std::vector<uint8_t> hwc;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    throw Error(fmt::format("{}: corrupt JPEG: {}", path, err.message));
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data.data(), static_cast<unsigned long>(data.size()));
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.image_width * uint64_t(cinfo.image_height) > kMaxImagePixels) {
    const uint64_t w = cinfo.image_width, h = cinfo.image_height;
    jpeg_destroy_decompress(&cinfo);
    too_large(path, "JPEG", w, h);
  }
  // libjpeg converts YCbCr and greyscale to RGB or grey but not CMYK/YCCK (print JPEGs, often from
  // Photoshop): those are decoded as CMYK and converted here, as PIL's Image.convert("RGB") does.
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  const bool inverted = cmyk && cinfo.saw_Adobe_marker;  // Adobe writes CMYK inverted (0 = full ink)
  cinfo.out_color_space = cmyk ? JCS_CMYK : channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  const int decoded = cmyk ? 4 : channels;
  jpeg_start_decompress(&cinfo);
  const int w = static_cast<int>(cinfo.output_width), h = static_cast<int>(cinfo.output_height);
  if (cinfo.output_components != decoded) {
    const int got = cinfo.output_components;
    jpeg_destroy_decompress(&cinfo);
    throw Error(fmt::format("{}: unsupported JPEG: {} components decoded, expected {}", path, got, decoded));
  }
  hwc.resize(size_t(w) * h * decoded);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = hwc.data() + size_t(cinfo.output_scanline) * w * decoded;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  // libjpeg only warns on a truncated stream (and pads with grey): treat it as the corrupt file it is.
  const long warnings = err.mgr.num_warnings;
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  if (warnings > 0) throw Error(fmt::format("{}: corrupt or truncated JPEG ({} decoder warnings)", path, warnings));
  if (cmyk) {
    std::vector<uint8_t> out(size_t(w) * h * channels);
    for (size_t i = 0; i < size_t(w) * h; ++i) {
      int ink[4];
      for (int k = 0; k < 4; ++k) ink[k] = inverted ? 255 - hwc[4 * i + k] : hwc[4 * i + k];
      int rgb[3];
      for (int k = 0; k < 3; ++k) rgb[k] = (255 - ink[k]) * (255 - ink[3]) / 255;
      if (channels == 3)
        for (int k = 0; k < 3; ++k) out[3 * i + k] = static_cast<uint8_t>(rgb[k]);
      else  // ITU-R 601 luma, as libjpeg's RGB to greyscale
        out[i] = static_cast<uint8_t>((299 * rgb[0] + 587 * rgb[1] + 114 * rgb[2] + 500) / 1000);
    }
    hwc = std::move(out);
  }
  return interleaved_to_chw(hwc, h, w, channels);
}

Image decode_png(const std::string& path, const std::vector<uint8_t>& data, int channels) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, data.data(), data.size()))
    throw Error(fmt::format("{}: corrupt PNG: {}", path, png.message));
  if (uint64_t(png.width) * png.height > kMaxImagePixels) {
    const uint64_t w = png.width, h = png.height;
    png_image_free(&png);
    too_large(path, "PNG", w, h);
  }
  // libpng's simplified API takes 16-bit samples without a gAMA or sRGB chunk as linear light and would
  // gamma-encode them (half scale 0x8080 became 186, not 128); PIL and torchvision keep the stored values
  // (the high byte): take them as sRGB, as they are.
  png.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
  png.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  std::vector<uint8_t> hwc(PNG_IMAGE_SIZE(png));
  if (!png_image_finish_read(&png, nullptr, hwc.data(), 0, nullptr)) {
    std::string msg = png.message;
    png_image_free(&png);
    throw Error(fmt::format("{}: corrupt PNG: {}", path, msg));
  }
  return interleaved_to_chw(hwc, static_cast<int>(png.height), static_cast<int>(png.width), channels);
}
}  // namespace

Image decode_image_file(const std::string& path, int channels) {
  if (channels != 1 && channels != 3) throw Error(fmt::format("{}: can decode to 1 or 3 channels, not {}", path, channels));
  need_regular_file(path, "an image file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::vector<uint8_t> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (data.size() >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return decode_jpeg(path, data, channels);
  static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (data.size() >= 8 && std::memcmp(data.data(), png_sig, 8) == 0) return decode_png(path, data, channels);
  throw Error(fmt::format("{}: neither a JPEG nor a PNG file (unknown signature)", path));
}

namespace {

// ImageFolder: root/<class>/<image>, classes in sorted order, decoded on demand by the loader threads.
class FolderSource : public Source {
 public:
  FolderSource(const std::string& root, int channels) : root_(root), channels_(channels) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) throw Error(fmt::format("{}: not a directory (ImageFolder root)", root));
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(root))
      if (e.is_directory()) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (size_t c = 0; c < dirs.size(); ++c) {
      std::vector<std::string> imgs;
      for (const auto& e : fs::directory_iterator(dirs[c])) {
        std::string ext = e.path().extension().string();
        std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
        if (e.is_regular_file() && (ext == ".jpg" || ext == ".jpeg" || ext == ".png")) imgs.push_back(e.path().string());
      }
      std::sort(imgs.begin(), imgs.end());
      for (auto& p : imgs) files_.push_back({std::move(p), static_cast<int>(c)});
    }
    classes_ = static_cast<int>(dirs.size());
    for (const auto& d : dirs) class_names_.push_back(d.filename().string());
    if (files_.empty())
      throw Error(fmt::format("{}: no .jpg/.jpeg/.png files in class subfolders (ImageFolder layout: root/<class>/<image>)", root));
  }
  size_t size() const override { return files_.size(); }
  int classes() const override { return classes_; }
  int channels() const override { return channels_; }
  void get(size_t index, Image& image, int& label) const override {
    image = decode_image_file(files_[index].first, channels_);
    label = files_[index].second;
  }
  std::string describe() const override { return root_; }
  std::vector<std::string> class_names() const override { return class_names_; }

 private:
  std::string root_;
  int channels_, classes_ = 0;
  std::vector<std::string> class_names_;
  std::vector<std::pair<std::string, int>> files_;
};

// Synthetic: pixels and labels are a pure function of (index, seed); for benchmarks, not for learning.
class SyntheticSource : public Source {
 public:
  SyntheticSource(size_t n, int channels, int size, int classes, uint64_t seed)
      : n_(n), channels_(channels), size_(size), classes_(classes), seed_(seed) {}
  size_t size() const override { return n_; }
  int classes() const override { return classes_; }
  int channels() const override { return channels_; }
  void get(size_t index, Image& image, int& label) const override {
    image.channels = channels_;
    image.height = image.width = size_;
    image.pixels.resize(size_t(channels_) * size_ * size_);
    uint64_t s = key(seed_, index, 0x5f);
    for (size_t i = 0; i < image.pixels.size(); i += 8) {
      s = mix(s);
      for (size_t k = 0; k < 8 && i + k < image.pixels.size(); ++k) image.pixels[i + k] = static_cast<uint8_t>(s >> (8 * k));
    }
    label = static_cast<int>(key(seed_, index, 0x1ab) % static_cast<uint64_t>(classes_));
  }
  std::string describe() const override { return "synthetic"; }

 private:
  size_t n_;
  int channels_, size_, classes_;
  uint64_t seed_;
};

std::string need_file(const std::string& dir, const std::string& name, const std::string& dataset) {
  fs::path p = fs::path(dir) / name;
  std::error_code ec;
  if (!fs::exists(p, ec))
    throw Error(fmt::format("dataset {}: {} does not exist (dataset.path = '{}')", dataset, p.string(), dir));
  return p.string();
}

// The reader the dataset's row (core/dataset.hpp) names, over the split's files under `dir`.
std::unique_ptr<Source> open_reader(const DatasetInfo& info, const DatasetSpec& spec, const ViTConfig& model,
                                         const std::string& dir, bool train) {
  std::vector<std::string> files;
  if (info.reader != DatasetReader::Synthetic)
    for (const auto& f : train ? info.train_files : info.test_files) files.push_back(need_file(dir, f, spec.name));  // in order: the first missing one is named
  switch (info.reader) {
    case DatasetReader::Idx:
      return std::make_unique<MemorySource>(read_idx(files.at(0), files.at(1), info.facts->classes));
    case DatasetReader::CifarBinary:
      return std::make_unique<MemorySource>(read_cifar(files, info.label_bytes, info.facts->classes));
    case DatasetReader::ImageFolder:
      return std::make_unique<FolderSource>(files.at(0), model.channels);
    case DatasetReader::Synthetic: {
      const long long n = train ? spec.train_samples : (spec.test_samples > 0 ? spec.test_samples : 0);
      return std::make_unique<SyntheticSource>(static_cast<size_t>(n), model.channels, spec.image_size, model.classes,
                                               train ? 1 : 2);
    }
  }
  throw Error(fmt::format("dataset {}: no reader", spec.name));
}

}  // namespace

DatasetSplit open_dataset(const DatasetSpec& spec, const ViTConfig& model, const std::string& split) {
  const bool train = split == "train";
  const DatasetInfo& info = dataset(spec.name);  // unknown: "unknown dataset 'X'; valid: ..."
  DatasetSplit out;
  auto [mean, stddev] = info.normalization(model.channels);
  out.norm = {std::move(mean), std::move(stddev)};
  std::string dir = spec.path.empty() ? info.default_path : spec.path;
  if (dir.empty() && info.reader != DatasetReader::Synthetic)
    throw Error(fmt::format("dataset {} needs dataset.path: {}", spec.name, info.path_help));
  out.source = open_reader(info, spec, model, dir, train);
  if (out.source->channels() != model.channels)
    throw Error(fmt::format("dataset {}: {} channels but the model takes {}", spec.name, out.source->channels(), model.channels));
  if (out.source->classes() > model.classes)
    throw Error(fmt::format("dataset {} ({}): {} classes but the model's head has {}", spec.name, out.source->describe(),
                            out.source->classes(), model.classes));
  return out;
}

void Transform::apply(const Image& in, int epoch, size_t sample_index, float* out) const {
  const int S = image_size, C = in.channels;
  // Bilinear resize (align_corners=false, as torch's interpolate) when the stored size differs.
  std::vector<float> img(size_t(C) * S * S);
  if (in.height == S && in.width == S) {
    for (size_t i = 0; i < img.size(); ++i) img[i] = in.pixels[i];
  } else {
    const float sy = float(in.height) / S, sx = float(in.width) / S;
    for (int y = 0; y < S; ++y) {
      float fy = std::max(0.f, (y + 0.5f) * sy - 0.5f);
      int y0 = std::min(int(fy), in.height - 1), y1 = std::min(y0 + 1, in.height - 1);
      float wy = fy - y0;
      for (int x = 0; x < S; ++x) {
        float fx = std::max(0.f, (x + 0.5f) * sx - 0.5f);
        int x0 = std::min(int(fx), in.width - 1), x1 = std::min(x0 + 1, in.width - 1);
        float wx = fx - x0;
        for (int c = 0; c < C; ++c) {
          const uint8_t* p = in.pixels.data() + size_t(c) * in.height * in.width;
          float v = (1 - wy) * ((1 - wx) * p[y0 * in.width + x0] + wx * p[y0 * in.width + x1]) +
                    wy * ((1 - wx) * p[y1 * in.width + x0] + wx * p[y1 * in.width + x1]);
          img[(size_t(c) * S + y) * S + x] = v;
        }
      }
    }
  }
  int dy = 0, dx = 0;
  bool flip = false;
  if (augment) {
    const int pad = std::max(1, S / 8);
    uint64_t r = key(seed, static_cast<uint64_t>(epoch), sample_index);
    dy = static_cast<int>(r % (2 * pad + 1)) - pad;
    dx = static_cast<int>((r >> 16) % (2 * pad + 1)) - pad;
    flip = (r >> 32) & 1;
  }
  for (int c = 0; c < C; ++c) {
    const float m = norm.mean[c % norm.mean.size()], s = norm.stddev[c % norm.stddev.size()];
    const float zero = (0.f - m) / s;
    for (int y = 0; y < S; ++y)
      for (int x = 0; x < S; ++x) {
        int sy = y + dy, sx = flip ? (S - 1 - x) + dx : x + dx;
        float v = (sy < 0 || sy >= S || sx < 0 || sx >= S) ? zero : (img[(size_t(c) * S + sy) * S + sx] / 255.f - m) / s;
        out[(size_t(c) * S + y) * S + x] = v;
      }
  }
}

namespace {
std::vector<size_t> epoch_order(size_t n, uint64_t seed, int epoch, bool shuffle) {
  std::vector<size_t> perm(n);
  for (size_t i = 0; i < n; ++i) perm[i] = i;
  if (shuffle) {
    // Fisher-Yates with our own generator: the order is the same on every platform and standard library.
    uint64_t s = key(seed, 0x5a3d1e, static_cast<uint64_t>(epoch));
    for (size_t i = n; i > 1; --i) {
      s = mix(s);
      std::swap(perm[i - 1], perm[s % i]);
    }
  }
  return perm;
}
}  // namespace

std::vector<size_t> shard_indices(size_t n, int rank, int world, uint64_t seed, int epoch, bool shuffle, bool drop_tail) {
  const std::vector<size_t> perm = epoch_order(n, seed, epoch, shuffle);
  const size_t per_rank = drop_tail ? n / world : (n + world - 1 - rank) / world;
  std::vector<size_t> out;
  out.reserve(per_rank);
  for (size_t k = 0; k < per_rank; ++k) out.push_back(perm[rank + k * world]);
  return out;
}

std::vector<size_t> padded_shard(size_t n, int rank, int world, uint64_t seed, int epoch) {
  if (n == 0) return {};
  const std::vector<size_t> perm = epoch_order(n, seed, epoch, true);
  const size_t per_rank = (n + world - 1) / world;
  std::vector<size_t> out;
  out.reserve(per_rank);
  // DistributedSampler: indices += indices[:padding]; rank r takes indices[r::world].
  for (size_t k = 0; k < per_rank; ++k) out.push_back(perm[(rank + k * world) % n]);
  return out;
}

void check_same_classes(const Source& train, const Source& test) {
  const auto a = train.class_names(), b = test.class_names();
  if (a == b) return;
  std::vector<std::string> only_train, only_test;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(only_train));
  std::set_difference(b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(only_test));
  auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (size_t i = 0; i < v.size() && i < 8; ++i) out += (i ? ", " : "") + v[i];
    if (v.size() > 8) out += fmt::format(" and {} more", v.size() - 8);
    return v.empty() ? std::string("none") : out;
  };
  throw Error(fmt::format("{} and {} have different classes (labels are the sorted class folders, so they would not "
                          "match): only in {}: {}; only in {}: {}",
                          train.describe(), test.describe(), train.describe(), list(only_train), test.describe(),
                          list(only_test)));
}

Loader::Loader(const Source& source, Transform transform, std::vector<size_t> indices, int batch_size, int epoch,
               long long first_batch, int workers, int prefetch)
    : source_(source), transform_(std::move(transform)), indices_(std::move(indices)), batch_size_(batch_size),
      epoch_(epoch), first_(first_batch), next_(first_batch), prefetch_(std::max(1, prefetch)) {
  batches_ = static_cast<long long>(indices_.size() / batch_size_);
  if (indices_.size() % batch_size_ != 0 && batch_size_ > 0) {
    // Evaluation keeps a last partial batch; training passes whole multiples.
    batches_ += 1;
  }
  for (int w = 0; w < workers; ++w) lanes_.push_back(std::make_unique<Lane>());
  for (int w = 0; w < workers; ++w) threads_.emplace_back([this, w] { work(w); });
}

Loader::~Loader() {
  for (auto& l : lanes_) {
    std::lock_guard<std::mutex> g(l->mu);
    stop_ = true;
  }
  for (auto& l : lanes_) l->cv.notify_all();
  for (auto& t : threads_) t.join();
}

Batch Loader::load(long long number) const {
  Batch b;
  b.number = number;
  const size_t begin = static_cast<size_t>(number) * batch_size_;
  const size_t end = std::min(indices_.size(), begin + batch_size_);
  b.size = static_cast<int>(end - begin);
  b.channels = source_.channels();
  b.image_size = transform_.image_size;
  const size_t per = size_t(b.channels) * b.image_size * b.image_size;
  b.images.resize(per * b.size);
  b.labels.resize(b.size);
  Image img;
  for (size_t i = begin; i < end; ++i) {
    int label = 0;
    source_.get(indices_[i], img, label);
    transform_.apply(img, epoch_, indices_[i], b.images.data() + (i - begin) * per);
    b.labels[i - begin] = label;
  }
  return b;
}

void Loader::work(int lane_id) {
  Lane& lane = *lanes_[lane_id];
  const int workers = static_cast<int>(lanes_.size());
  // This worker's first batch at or after next_.
  long long k = first_ + ((lane_id - first_ % workers) % workers + workers) % workers;
  for (; k < batches_; k += workers) {
    {
      std::unique_lock<std::mutex> g(lane.mu);
      lane.cv.wait(g, [&] { return stop_ || static_cast<int>(lane.ready.size()) < prefetch_; });
      if (stop_) return;
    }
    try {
      Batch b = load(k);
      std::lock_guard<std::mutex> g(lane.mu);
      lane.ready.push_back(std::move(b));
    } catch (...) {
      std::lock_guard<std::mutex> g(lane.mu);
      lane.error = std::current_exception();
      lane.cv.notify_all();
      return;
    }
    lane.cv.notify_all();
  }
}

std::optional<Batch> Loader::next() {
  if (next_ >= batches_) return std::nullopt;
  if (lanes_.empty()) return load(next_++);
  Lane& lane = *lanes_[next_ % lanes_.size()];
  std::unique_lock<std::mutex> g(lane.mu);
  lane.cv.wait(g, [&] { return !lane.ready.empty() || lane.error; });
  if (lane.ready.empty()) std::rethrow_exception(lane.error);
  Batch b = std::move(lane.ready.front());
  lane.ready.pop_front();
  g.unlock();
  lane.cv.notify_all();
  ++next_;
  return b;
}

}  // namespace vitsim::real
