#pragma once
// The bytes of dataset files (internal to real/): regular files only, gzip read within bounds (a gzip
// bomb is stopped, not inflated), and files written plain or gzipped for the tests' datasets.
#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

namespace vitsim::real {

// A dataset file must be a regular file: a FIFO would block, /dev/zero would never end.
void need_regular_file(const std::string& path, const char* what = "a dataset file");

// Deflate expands at most 1032:1 (zlib's technical notes: a 258-byte match coded in 2 bits), so a
// gzip file of S bytes cannot hold more than about 1032 x S bytes: a header stating more is corrupt.
constexpr uint64_t kMaxDeflateRatio = 1032;

// Reads a gzipped or plain file through zlib, never more than the caller asks for: the reader of a
// format with a header (IDX) reads the header, works out how many bytes the header states, and reads
// exactly that many plus one byte to tell "larger than stated" apart. A gzip bomb (a small file whose
// data inflates without end) is stopped there instead of running out of memory.
class BoundedGzip {
 public:
  explicit BoundedGzip(std::string path);
  ~BoundedGzip() { gzclose(f_); }
  BoundedGzip(const BoundedGzip&) = delete;
  BoundedGzip& operator=(const BoundedGzip&) = delete;

  // Appends up to n bytes to out; returns how many came (fewer only at the end of the data).
  size_t read(std::vector<uint8_t>& out, uint64_t n);
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
  [[noreturn]] void fail();
  std::string path_;
  gzFile f_ = nullptr;
  uint64_t file_size_ = 0;
};

// Writes data to path, gzipped or plain. Throws Error.
void write_bytes(const std::string& path, const std::vector<uint8_t>& data, bool gzip);

}  // namespace vitsim::real
