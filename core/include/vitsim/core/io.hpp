#pragma once
#include <cstddef>
#include <functional>
#include <string>

namespace vitsim {
// Writes to "<path>.tmp.<pid>", syncs, then renames over `path`, so a reader never sees half a file and
// a failed write (a full disk) leaves the previous file intact and no temporary behind.
// Throws Error naming the path and the system's reason when it cannot be written.
void write_file_atomic(const std::string& path, const std::string& content);
// The same for content produced piece by piece: `produce` calls its argument with each chunk. After the
// first failed write the rest are dropped and the error is thrown once `produce` returns; an exception
// from `produce` removes the temporary and propagates.
using ChunkSink = std::function<void(const void* data, size_t size)>;
void write_file_atomic(const std::string& path, const std::function<void(const ChunkSink&)>& produce);
std::string read_file(const std::string& path);  // throws Error naming the path
// Fails early, before hours of work, when `path` could not be written later: its folder is missing or
// not writable. Throws the Error write_file_atomic would ("cannot write PATH: reason").
void check_writable(const std::string& path);

// A private temporary folder ("<tmp>/<prefix>XXXXXX"), removed with everything in it when destroyed.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "vitsim-");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};
}  // namespace vitsim
