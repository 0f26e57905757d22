#pragma once
// Small PNG and JPEG files for the dataset tests, written with libpng and libjpeg.
#include <png.h>
// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>
#include <cstdio>

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
  if (!png_image_write_to_file(&png, path.c_str(), 0, rgb.data(), 0, nullptr))
    throw std::runtime_error("png write");
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

// A JPEG of one colour everywhere with libjpeg's options: components 1 (grey), 3 (RGB) or 4 (CMYK,
// which libjpeg writes with an Adobe marker: the values as given, read back inverted by Adobe's
// convention), optionally progressive.
inline void write_jpeg_pixels(const std::string& path, int w, int h, const std::vector<uint8_t>& colour,
                              bool progressive = false) {
  const int comps = static_cast<int>(colour.size());
  std::vector<uint8_t> px(size_t(w) * h * comps);
  for (size_t i = 0; i < px.size(); ++i) px[i] = colour[i % comps];
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
  c.input_components = comps;
  c.in_color_space = comps == 1 ? JCS_GRAYSCALE : comps == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  if (progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = px.data() + size_t(c.next_scanline) * w * comps;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::fclose(f);
}

// A 16-bit-per-channel RGB PNG of one value everywhere (value16 big-endian in the file), written with
// libpng's full API (the simplified one writes 8 bits or linear 16-bit only).
inline void write_png16(const std::string& path, int w, int h, uint16_t value16) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("png write: cannot create " + path);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) throw std::runtime_error("png16 write");
  png_init_io(png, f);
  png_set_IHDR(png, info, w, h, 16, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  std::vector<uint8_t> row(size_t(w) * 6);
  for (size_t i = 0; i < row.size(); i += 2) {
    row[i] = uint8_t(value16 >> 8);
    row[i + 1] = uint8_t(value16 & 0xff);
  }
  for (int y = 0; y < h; ++y) png_write_row(png, row.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}

}  // namespace vt
