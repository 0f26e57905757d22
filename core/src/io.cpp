#include "vitsim/core/io.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "vitsim/core/error.hpp"

namespace vitsim {

void write_file_atomic(const std::string& path, const std::function<void(const ChunkSink&)>& produce) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw Error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  int err = 0;  // the first failure's errno
  auto fail = [&](int e) {
    if (err == 0) err = e ? e : EIO;
  };
  try {
    produce([&](const void* data, size_t size) {
      if (err == 0 && size > 0 && std::fwrite(data, 1, size, f) != size) fail(errno);
    });
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  if (err == 0 && std::fflush(f) != 0) fail(errno);
  if (err == 0 && fsync(fileno(f)) != 0) fail(errno);
  if (std::fclose(f) != 0) fail(errno);
  if (err == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) fail(errno);
  if (err != 0) {
    std::remove(tmp.c_str());
    throw Error(fmt::format("cannot write {}: {}", path, std::strerror(err)));
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  write_file_atomic(path, [&](const ChunkSink& sink) { sink(content.data(), content.size()); });
}

void check_writable(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw Error(fmt::format("cannot write {}: {}", path, std::strerror(ENOENT)));
  if (access(dir.c_str(), W_OK | X_OK) != 0) throw Error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot open {}", path));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
  if (!mkdtemp(tmpl.data())) throw Error(fmt::format("cannot create a temporary directory: {}", std::strerror(errno)));
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace vitsim
