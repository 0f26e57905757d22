// Writes the seed corpora of the dataset-reader harnesses (fuzz_idx, fuzz_cifar, fuzz_image) in the input
// layout each harness expects (see fuzz_inputs.cpp): small valid files made by the project's own writers
// (write_idx, write_cifar) and by libjpeg/libpng, so a fresh machine needs no dataset to start fuzzing.
// Usage: fuzz_seeds CORPUS_DIR   (creates CORPUS_DIR/{idx,cifar,image})
#include <png.h>
// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>
#include <cstddef>
#include <cstdio>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "vitsim/real/data.hpp"

namespace fs = std::filesystem;
using vitsim::real::MemorySource;

namespace {

std::vector<uint8_t> slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void put(const fs::path& p, uint8_t mode, const std::vector<uint8_t>& body) {
  std::ofstream f(p, std::ios::binary);
  f.put(static_cast<char>(mode));
  f.write(reinterpret_cast<const char*>(body.data()), static_cast<std::streamsize>(body.size()));
}

// A deterministic test card: gradients with a diagonal, so the decoders see non-constant data.
std::vector<uint8_t> card(int channels, int h, int w) {
  std::vector<uint8_t> px(size_t(channels) * h * w);
  for (int c = 0; c < channels; ++c)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        px[(size_t(c) * h + y) * w + x] = uint8_t(x == y ? 255 : (x * 7 + y * 3 + c * 50));
  return px;
}

std::vector<uint8_t> interleave(const std::vector<uint8_t>& chw, int c, int h, int w) {
  std::vector<uint8_t> hwc(chw.size());
  for (int k = 0; k < c; ++k)
    for (int i = 0; i < h * w; ++i) hwc[size_t(i) * c + k] = chw[size_t(k) * h * w + i];
  return hwc;
}

void write_png(const fs::path& p, int c, int h, int w) {
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  png.width = w;
  png.height = h;
  png.format = c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  auto hwc = interleave(card(c, h, w), c, h, w);
  if (!png_image_write_to_file(&png, p.c_str(), 0, hwc.data(), 0, nullptr))
    throw std::runtime_error(png.message);
}

void write_jpeg(const fs::path& p, int c, int h, int w, bool progressive) {
  auto hwc = interleave(card(c, h, w), c, h, w);
  FILE* f = std::fopen(p.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot create " + p.string());
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  jpeg_stdio_dest(&cinfo, f);
  cinfo.image_width = w;
  cinfo.image_height = h;
  cinfo.input_components = c;
  cinfo.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 90, TRUE);
  if (progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = hwc.data() + size_t(cinfo.next_scanline) * w * c;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::cerr << "usage: fuzz_seeds CORPUS_DIR\n";
    return 2;
  }
  const fs::path root = argv[1];
  for (const char* d : {"idx", "cifar", "image"}) fs::create_directories(root / d);
  const fs::path tmp = root / "tmp";
  fs::create_directories(tmp);

  // IDX: [mode][u16 LE image-file length][image file][label file]; plain and gzipped.
  for (int n : {1, 3}) {
    std::vector<int32_t> labels;
    for (int i = 0; i < n; ++i) labels.push_back(i % 10);
    MemorySource set("seed", 1, 6, 5, 10, card(1, 6 * n, 5), labels);
    for (bool gz : {false, true}) {
      vitsim::real::write_idx(tmp / "i", tmp / "l", set, gz);
      auto img = slurp(tmp / "i"), lab = slurp(tmp / "l");
      std::vector<uint8_t> body = {uint8_t(img.size() & 0xff), uint8_t(img.size() >> 8)};
      body.insert(body.end(), img.begin(), img.end());
      body.insert(body.end(), lab.begin(), lab.end());
      put(root / "idx" / ("n" + std::to_string(n) + (gz ? "-gz" : "")), 0x11, body);
    }
  }
  // CIFAR-10 and CIFAR-100 batches of two records each.
  for (int label_bytes : {1, 2}) {
    MemorySource set("seed", 3, 32, 32, label_bytes == 1 ? 10 : 100, card(3, 64, 32), {3, 7});
    vitsim::real::write_cifar(tmp / "c", set, label_bytes);
    put(root / "cifar" / ("cifar" + std::string(label_bytes == 1 ? "10" : "100")),
        label_bytes == 1 ? 0x10 : 0x11, slurp(tmp / "c"));
  }
  // Images: grey and RGB PNG, baseline and progressive JPEG.
  int k = 0;
  for (int c : {1, 3}) {
    write_png(tmp / "p", c, 9, 13);
    put(root / "image" / ("png" + std::to_string(c)), uint8_t(0x20 + k++), slurp(tmp / "p"));
    for (bool prog : {false, true}) {
      write_jpeg(tmp / "j", c, 17, 11, prog);
      put(root / "image" / ("jpeg" + std::to_string(c) + (prog ? "p" : "")), uint8_t(0x41 + k++),
          slurp(tmp / "j"));
    }
  }
  fs::remove_all(tmp);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "fuzz_seeds: " << e.what() << "\n";
  return 1;
}
