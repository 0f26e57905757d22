#include "vitsim/core/base/io.hpp"
// The files vitsim writes (the one atomic writer, the checks of output paths) and reads (the shared input
// reader); temporary folders and interruptions in interrupt.cpp.

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "base/io_registry.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim {
namespace fs = std::filesystem;

namespace {
using detail::forget, detail::registry, detail::Registry;

// ---------------------------------------------------------------------------------------------------
// Outputs.

std::string reason(int err) {
  return std::strerror(err);
}

[[noreturn]] void cannot_write(const std::string& path, const std::string& why) {
  throw Error(fmt::format("cannot write {}: {}", path, why));
}

const char* type_name(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a regular file";
}

// How an output path is written.
struct OutTarget {
  enum Kind { Create, Replace, Through } kind = Create;
  std::string path;  // the name to create or replace (a link's target), or the path to write through
  mode_t mode = 0666;
};

OutTarget resolve_output(const std::string& path) {
  if (path.empty()) throw Error("cannot write an output with an empty name");
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) return {OutTarget::Through, path, 0};
    if (S_ISDIR(st.st_mode)) cannot_write(path, reason(EISDIR));
    if (!S_ISREG(st.st_mode))
      cannot_write(path, fmt::format("it is {}; vitsim writes regular files, FIFOs and character devices",
                                     type_name(st.st_mode)));
    std::string target = path;
    struct stat lst {};
    if (lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
      char buf[PATH_MAX];
      if (!realpath(path.c_str(), buf)) cannot_write(path, reason(errno));
      target = buf;
    }
    return {OutTarget::Replace, target, static_cast<mode_t>(st.st_mode & 07777)};
  }
  if (errno != ENOENT) cannot_write(path, reason(errno));  // ELOOP, EACCES, ENOTDIR
  // A new name, or a symbolic link to one: follow the links to the name to create.
  std::string p = path;
  for (int hops = 0;; ++hops) {
    struct stat lst {};
    if (lstat(p.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode)) break;
    if (hops >= 40) cannot_write(path, reason(ELOOP));
    std::vector<char> buf(PATH_MAX + 1);
    const ssize_t n = readlink(p.c_str(), buf.data(), PATH_MAX);
    if (n < 0) cannot_write(path, reason(errno));
    fs::path link(std::string(buf.data(), static_cast<size_t>(n)));
    p = link.is_absolute() ? link.string() : (fs::path(p).parent_path() / link).string();
  }
  return {OutTarget::Create, p, 0666};
}

void check_folder(const std::string& path, const std::string& target) {
  fs::path dir = fs::path(target).parent_path();
  if (dir.empty()) dir = ".";
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) cannot_write(path, reason(errno));
  if (!S_ISDIR(st.st_mode)) cannot_write(path, reason(ENOTDIR));
  if (access(dir.c_str(), W_OK | X_OK) != 0) cannot_write(path, reason(errno));
}

}  // namespace

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (w == 0) {
      errno = EIO;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

namespace {

// The identity of a file for check_output_paths: its device and inode, or, when it does not exist,
// the absolute name it would be created under (symbolic links in the folder resolved).
struct Identity {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  mode_t mode = 0;
  std::string name;
  bool operator==(const Identity& o) const {
    if (exists != o.exists) return false;
    return exists ? dev == o.dev && ino == o.ino : name == o.name;
  }
};

Identity identity(const std::string& path) {
  Identity id;
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
    id.mode = st.st_mode;
    return id;
  }
  std::string p = path;
  try {
    p = resolve_output(path).path;  // a dangling link names its target
  } catch (const Error&) {
  }
  std::error_code ec;
  fs::path w = fs::weakly_canonical(fs::absolute(p, ec), ec);
  id.name = ec ? fs::absolute(p).lexically_normal().string() : w.string();
  return id;
}

std::string quoted(const std::string& s) {
  return "'" + s + "'";
}

}  // namespace

void write_file_atomic(const std::string& path, const std::function<void(const ChunkSink&)>& produce) {
  const OutTarget t = resolve_output(path);
  int fd = -1;
  std::string tmp;
  if (t.kind == OutTarget::Through) {
    do fd = open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) cannot_write(path, reason(errno));
  } else {
    tmp = fmt::format("{}.tmp.{}", t.path, getpid());
    {
      Registry& r = registry();
      std::lock_guard<std::mutex> lock(r.mu);
      r.files.push_back(tmp);
    }
    fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST) {  // left by a killed run with this pid: never written through
      unlink(tmp.c_str());
      fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    }
    if (fd < 0) {
      const int e = errno;
      std::lock_guard<std::mutex> lock(registry().mu);
      forget(registry().files, tmp);
      cannot_write(path, reason(e));
    }
    if (t.kind == OutTarget::Replace && fchmod(fd, t.mode) != 0) {
      // keeping the permissions is best effort: the content matters more
    }
  }
  auto drop_tmp = [&] {
    if (tmp.empty()) return;
    unlink(tmp.c_str());
    std::lock_guard<std::mutex> lock(registry().mu);
    forget(registry().files, tmp);
  };
  int err = 0;  // the first failure's errno
  auto fail = [&](int e) {
    if (err == 0) err = e ? e : EIO;
  };
  std::vector<char> buf;
  buf.reserve(size_t{1} << 16);
  auto flush = [&] {
    if (err == 0 && !buf.empty() && !write_all(fd, buf.data(), buf.size())) fail(errno);
    buf.clear();
  };
  try {
    produce([&](const void* data, size_t size) {
      if (err != 0 || size == 0) return;
      const char* p = static_cast<const char*>(data);
      if (buf.size() + size > buf.capacity()) flush();
      if (size >= buf.capacity()) {
        if (err == 0 && !write_all(fd, p, size)) fail(errno);
      } else {
        buf.insert(buf.end(), p, p + size);
      }
    });
  } catch (...) {
    close(fd);
    drop_tmp();
    throw;
  }
  flush();
  if (t.kind != OutTarget::Through && err == 0 && fsync(fd) != 0) fail(errno);
  if (close(fd) != 0) fail(errno);
  if (t.kind != OutTarget::Through && err == 0 && std::rename(tmp.c_str(), t.path.c_str()) != 0) fail(errno);
  if (err != 0) {
    drop_tmp();
    cannot_write(path, reason(err));
  }
  if (!tmp.empty()) {
    std::lock_guard<std::mutex> lock(registry().mu);
    forget(registry().files, tmp);
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  write_file_atomic(path, [&](const ChunkSink& sink) { sink(content.data(), content.size()); });
}

void check_writable(const std::string& path) {
  const OutTarget t = resolve_output(path);
  if (t.kind == OutTarget::Through) {
    if (access(path.c_str(), W_OK) != 0) cannot_write(path, reason(errno));
    return;
  }
  check_folder(path, t.path);
}

void check_output_paths(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  std::vector<std::pair<const NamedPath*, Identity>> outs, ins;
  for (const auto& o : outputs)
    if (!o.path.empty()) {
      check_writable(o.path);
      outs.emplace_back(&o, identity(o.path));
    }
  for (const auto& i : inputs)
    if (!i.path.empty()) ins.emplace_back(&i, identity(i.path));
  for (size_t a = 0; a < outs.size(); ++a) {
    const auto& [o, oid] = outs[a];
    for (const auto& [i, iid] : ins)
      if (oid == iid)
        throw Error(fmt::format("{} {} is {} {}: an output must not overwrite an input", o->role,
                                quoted(o->path), i->role, quoted(i->path)));
    const bool through = oid.exists && (S_ISFIFO(oid.mode) || S_ISCHR(oid.mode));
    for (size_t b = 0; b < a && !through; ++b)
      if (outs[b].second == oid)
        throw Error(fmt::format("{} {} and {} {} are the same file: one output would overwrite the other",
                                outs[b].first->role, quoted(outs[b].first->path), o->role, quoted(o->path)));
  }
}

// ---------------------------------------------------------------------------------------------------
// Inputs.

size_t input_size_limit() {
  const char* env = std::getenv("VITSIM_MAX_INPUT_SIZE");
  if (!env || !*env) return kDefaultInputLimit;
  double v = 0;
  try {
    v = units::parse(env, units::Kind::Bytes);
  } catch (const Error& e) {
    throw Error(fmt::format("VITSIM_MAX_INPUT_SIZE: {}", e.what()));
  }
  if (!(v >= 1) || v > 1e18)
    throw Error(fmt::format("VITSIM_MAX_INPUT_SIZE='{}': expected a size from 1B", env));
  return static_cast<size_t>(v);
}

std::string read_input_file(const std::string& path, const std::string& role, size_t limit) {
  const Origin o{path, 0};
  const bool unlimited = limit == SIZE_MAX;
  if (limit == 0) limit = input_size_limit();
  // O_NONBLOCK: opening a FIFO with no writer returns at once (and is refused below) instead of waiting.
  int fd = -1;
  do fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int e = errno;
    throw Error(o, e == ENOENT ? "cannot open " + role : fmt::format("cannot open {}: {}", role, reason(e)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    close(fd);
    throw Error(o, fmt::format("cannot open {}: {}", role, reason(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    throw Error(o, fmt::format("{} is {}, not a regular file", role, type_name(st.st_mode)));
  }
  auto too_large = [&](const std::string& size) {
    return Error(
        o, fmt::format(
               "{} is {}, above the {} limit for an input{}", role, size, units::format_bytes(double(limit)),
               unlimited ? "" : " (VITSIM_MAX_INPUT_SIZE raises it, e.g. VITSIM_MAX_INPUT_SIZE=1GiB)"));
  };
  if (static_cast<unsigned long long>(st.st_size) > limit) {
    close(fd);
    throw too_large(units::format_bytes(double(st.st_size)));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  // Read to the end, never past the limit: a file that grows while read (or a /proc file whose size is 0)
  // is bounded too.
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      close(fd);
      throw Error(o, fmt::format("cannot read {}: {}", role, reason(e)));
    }
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > limit) {
      close(fd);
      throw too_large("more than that");
    }
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

std::string read_file(const std::string& path) {
  return read_input_file(path, "file", SIZE_MAX);
}

void reserve_standard_fds() {
  for (int fd = 0; fd <= 2; ++fd)
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      const int got = open("/dev/null", O_RDONLY);  // the lowest free descriptor: this one
      if (got >= 0 && got != fd) {
        dup2(got, fd);
        close(got);
      }
    }
}

}  // namespace vitsim
