// JPEG and PNG image files, decoded to CHW bytes: decode_image_file (vitsim/real/data.hpp), with the
// decompression-bomb guard, CMYK JPEGs converted and truncated files refused.
#include <fmt/format.h>
#include <jpeglib.h>
#include <png.h>

#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "data/data_file.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/real/data.hpp"

namespace vitsim::real {

namespace {
// A header may claim any size; decoding it would allocate width*height*channels bytes before a single
// pixel is checked. PIL's decompression-bomb guard (Image.MAX_IMAGE_PIXELS) is the limit used here too.
constexpr uint64_t kMaxImagePixels = 89'478'485;
[[noreturn]] void too_large(const std::string& path, const char* kind, uint64_t width, uint64_t height) {
  throw Error(fmt::format("{}: {} header claims {}x{} pixels; the limit is {} pixels (a decompression bomb?)",
                          path, kind, width, height, kMaxImagePixels));
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
  if (warnings > 0)
    throw Error(fmt::format("{}: corrupt or truncated JPEG ({} decoder warnings)", path, warnings));
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
  if (channels != 1 && channels != 3)
    throw Error(fmt::format("{}: can decode to 1 or 3 channels, not {}", path, channels));
  need_regular_file(path, "an image file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::vector<uint8_t> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (data.size() >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF)
    return decode_jpeg(path, data, channels);
  static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (data.size() >= 8 && std::memcmp(data.data(), png_sig, 8) == 0) return decode_png(path, data, channels);
  throw Error(fmt::format("{}: neither a JPEG nor a PNG file (unknown signature)", path));
}

}  // namespace vitsim::real
