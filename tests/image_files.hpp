#pragma once
// Small PNG and JPEG files for the dataset tests, written with libpng and libjpeg.
#include <png.h>
// jpeglib.h needs FILE and size_t declared first.
#include <cstdio>
#include <jpeglib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace vt {

// An RGB PNG of one value everywhere.
inline void write_png(const std::string& path, int w, int h, uint8_t value) {
  std::vector<uint8_t> rgb(size_t(w) * h * 3, value);
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = w;
  png.height = h;
  png.format = PNG_FORMAT_RGB;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  if (!png_image_write_to_file(&png, path.c_str(), 0, rgb.data(), 0, nullptr)) throw std::runtime_error("png write");
}

// A greyscale JPEG (quality 95) of one value everywhere.
inline void write_jpeg(const std::string& path, int w, int h, uint8_t value) {
  std::vector<uint8_t> gray(size_t(w) * h, value);
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("jpeg write: cannot create " + path);
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = w;
  c.image_height = h;
  c.input_components = 1;
  c.in_color_space = JCS_GRAYSCALE;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = gray.data() + size_t(c.next_scanline) * w;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
}

}  // namespace vt
