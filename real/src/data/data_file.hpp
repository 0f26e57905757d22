#pragma once
// The bytes of dataset files (internal to real/): regular files only, gzip read within bounds (a gzip
// bomb is stopped, not inflated), and files written plain or gzipped for the tests' datasets.
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <memory>
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
// data inflates without end) is stopped there instead of running out of memory. A gzip file is one or
// more gzip members (RFC 1952, as gzip(1) reads them) and nothing else: bytes after the last member that
// do not start another (zlib's gzread ignores them) are refused with their byte offset.
class BoundedGzip {
 public:
  explicit BoundedGzip(std::string path);
  ~BoundedGzip();
  BoundedGzip(const BoundedGzip&) = delete;
  BoundedGzip& operator=(const BoundedGzip&) = delete;

  // Appends up to n bytes to out; returns how many came (fewer only at the end of the data).
  size_t read(std::vector<uint8_t>& out, uint64_t n);
  // Whether the file holds more data than has been read (reads one byte, at most).
  bool more() {
    std::vector<uint8_t> one;
    return read(one, 1) > 0;
  }
  bool compressed() const { return gzip_; }
  // The most data this file can hold: its size when plain, 1032 x its size when gzipped.
  uint64_t capacity() const { return compressed() ? kMaxDeflateRatio * file_size_ + 1024 : file_size_; }
  uint64_t file_size() const { return file_size_; }

 private:
  [[noreturn]] void fail(const std::string& reason);
  bool refill();       // reads more compressed bytes; false at the end of the file
  void next_member();  // after a member's end: another member, the end of the file, or trailing bytes
  std::string path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f_{nullptr, &std::fclose};
  uint64_t file_size_ = 0;
  bool gzip_ = false, done_ = false;
  z_stream z_{};
  std::vector<uint8_t> in_;
  uint64_t consumed_ = 0;  // compressed bytes handed to zlib so far (file offset of in_'s end)
};

// Writes data to path, gzipped or plain. Throws Error.
void write_bytes(const std::string& path, const std::vector<uint8_t>& data, bool gzip);

}  // namespace vitsim::real
