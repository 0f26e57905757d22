#pragma once
#include <string>

namespace vitsim {
// Writes to "<path>.tmp.<pid>" then renames over `path`, so a reader never sees half a file.
// Throws Error naming the path when it cannot be written.
void write_file_atomic(const std::string& path, const std::string& content);
std::string read_file(const std::string& path);  // throws Error naming the path

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
