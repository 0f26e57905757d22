// Torch-free helpers of the trainer: fault-injection parsing, thread counts, saved parameters, malloc
// settings.
#include <fmt/format.h>
#include <malloc.h>
#include <sched.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <thread>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/real/checkpoint_file.hpp"
#include "vitsim/real/train.hpp"

namespace vitsim::real {
namespace fs = std::filesystem;

ThreadPlan plan_threads(int requested, int local_size) {
  ThreadPlan t;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  t.share = std::max(1, cores / std::max(1, local_size));
  t.allowed_cpus = cores;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) t.allowed_cpus = std::max(1, CPU_COUNT(&set));
  t.threads = requested > 0 ? requested : std::min(t.share, t.allowed_cpus);
  const std::string fix = fmt::format(
      "mpirun binds each rank to one core when it starts two or fewer; add --bind-to none or --map-by "
      "slot:PE={} "
      "to mpirun",
      std::max(t.threads, t.share));
  if (t.threads > t.allowed_cpus)
    t.warning =
        fmt::format("{} intra-op threads but this process may run on {} CPU(s) only, so they share them: {}",
                    t.threads, t.allowed_cpus, fix);
  else if (requested <= 0 && t.allowed_cpus < t.share)
    t.warning = fmt::format(
        "{} intra-op thread(s): this process may run on {} CPU(s) of the {} cores per rank of this "
        "node: {}",
        t.threads, t.allowed_cpus, t.share, fix);
  return t;
}

FaultInjection parse_fault(const std::string& text) {
  FaultInjection f;
  auto fail = [&]() -> FaultInjection {
    throw Error(
        fmt::format("--fault '{}': expected KIND:STEP[:RANK] with KIND kill, hang, exit or nan, STEP >= 1, "
                    "RANK >= 0",
                    text));
  };
  auto c1 = text.find(':');
  if (c1 == std::string::npos) return fail();
  f.kind = text.substr(0, c1);
  if (f.kind != "kill" && f.kind != "hang" && f.kind != "exit" && f.kind != "nan") return fail();
  auto c2 = text.find(':', c1 + 1);
  try {
    f.step =
        units::parse_integer(text.substr(c1 + 1, c2 == std::string::npos ? std::string::npos : c2 - c1 - 1),
                             1, std::numeric_limits<long long>::max());
    if (c2 != std::string::npos)
      f.rank = static_cast<int>(units::parse_integer(text.substr(c2 + 1), 0, 1 << 30));
  } catch (const Error&) {
    return fail();
  }
  return f;
}

// PyTorch's CPU allocator (c10::alloc_cpu) is posix_memalign and free: a tensor's memory goes back to
// malloc as soon as its last reference dies, and a training step frees its whole activation set after
// backward. With glibc's defaults that memory then leaves the process: blocks above M_MMAP_THRESHOLD
// (128 KiB, rising with the blocks freed up to 32 MiB) are their own mmap, unmapped by free, and a heap
// whose free top exceeds M_TRIM_THRESHOLD is shrunk. The next step maps it again and takes a page fault on
// the first touch of every 4 KiB page (about 2 us each in a VM): residual adds and other memory-bound ops
// ran 5-9x slower inside a pass than alone (docs/calibrate-validate.md). Large thresholds keep the freed
// blocks in the heap for the next step, as PyTorch's CUDA caching allocator does on a GPU; the process
// holds its peak working set instead of returning it between steps. M_TOP_PAD grows the heap in large
// steps (address space only: pages are committed when touched). Setting M_MMAP_THRESHOLD also turns off
// glibc's sliding threshold.
bool keep_freed_memory() {
  constexpr int kGiB = 1 << 30;
  bool ok = mallopt(M_MMAP_THRESHOLD, kGiB) == 1;
  ok = mallopt(M_TRIM_THRESHOLD, kGiB) == 1 && ok;
  ok = mallopt(M_TOP_PAD, kGiB) == 1 && ok;
  return ok;
}

std::vector<float> read_saved_params(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() % sizeof(float) != 0)
    throw Error(fmt::format("{}: {} bytes is not a whole number of fp32 values", path, bytes.size()));
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// libgomp reads OMP_WAIT_POLICY once, in its constructor, as the program is loaded: setting it later in
// the process changes nothing, so the process starts itself again with it set (execv keeps the pid, the
// environment and the open files; nothing has run yet but argument parsing, MPI is not initialised).
bool ensure_passive_openmp() {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return false;  // the user's choice (or this is the re-exec)
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return false;
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t at = 0; at < all.size();) {
    const size_t end = all.find('\0', at);
    args.push_back(all.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  if (args.empty()) return false;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  execv("/proc/self/exe", argv.data());
  return false;  // exec failed: carry on with the default policy (the variable is set, for child processes)
}

// ---- the checkpoint envelope (checkpoint_file.hpp) ----

namespace {
constexpr char kHeadMagic[8] = {'V', 'I', 'T', 'S', 'I', 'M', 'C', 'K'};
constexpr char kTailMagic[4] = {'V', 'C', 'K', 'E'};
constexpr uint32_t kEnvelopeVersion = 1;
constexpr size_t kHead = 12, kTail = 16;

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
}  // namespace

uint32_t crc32_of(const void* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  while (size > 0) {  // zlib's length is a uInt: feed it in chunks
    const uInt n = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    crc = crc32(crc, p, n);
    p += n;
    size -= n;
  }
  return static_cast<uint32_t>(crc);
}

void write_checkpoint_envelope(const ChunkSink& sink, const std::function<void(const ChunkSink&)>& archive) {
  std::string head(kHeadMagic, sizeof kHeadMagic);
  put_le(head, kEnvelopeVersion, 4);
  sink(head.data(), head.size());
  uLong crc = crc32(0L, Z_NULL, 0);
  uint64_t length = 0;
  archive([&](const void* data, size_t size) {
    const auto* p = static_cast<const Bytef*>(data);
    for (size_t done = 0; done < size;) {
      const uInt n = static_cast<uInt>(std::min<size_t>(size - done, 1u << 30));
      crc = crc32(crc, p + done, n);
      done += n;
    }
    length += size;
    sink(data, size);
  });
  std::string tail;
  put_le(tail, length, 8);
  put_le(tail, static_cast<uint32_t>(crc), 4);
  tail.append(kTailMagic, sizeof kTailMagic);
  sink(tail.data(), tail.size());
}

CheckpointBytes read_checkpoint_envelope(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw Error(fmt::format("{}: not a regular file (a checkpoint must be one)", path));
  CheckpointBytes c;
  {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    c.file.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    if (f.bad()) throw Error(fmt::format("{}: read error", path));
  }
  const auto& b = c.file;
  if (b.size() >= 4 && std::memcmp(b.data(), "PK\x03\x04", 4) == 0) {
    c.legacy = true;
    c.size = b.size();
    return c;
  }
  if (b.size() < kHead + kTail || std::memcmp(b.data(), kHeadMagic, sizeof kHeadMagic) != 0)
    throw Error(fmt::format(
        "{}: unreadable checkpoint: not a vitsim checkpoint ({} bytes, no VITSIMCK header)", path, b.size()));
  const uint64_t version = get_le(b.data() + 8, 4);
  if (version != kEnvelopeVersion)
    throw Error(
        fmt::format("{}: unreadable checkpoint: envelope version {} (this vitsim reads {}); damaged header?",
                    path, version, kEnvelopeVersion));
  c.offset = kHead;
  c.size = b.size() - kHead - kTail;
  const char* tail = b.data() + b.size() - kTail;
  const uint64_t length = get_le(tail, 8);
  const uint32_t written = static_cast<uint32_t>(get_le(tail + 8, 4));
  if (std::memcmp(tail + 12, kTailMagic, sizeof kTailMagic) != 0)
    c.damage = "the trailer's end mark is damaged (or the file was cut short)";
  else if (length != c.size)
    c.damage = fmt::format(
        "the trailer records a {}-byte archive, the file holds {} bytes (cut short, extended or "
        "damaged trailer)",
        length, c.size);
  else if (const uint32_t crc = crc32_of(b.data() + c.offset, c.size); crc != written)
    c.damage = fmt::format("CRC32 {:08x} of the archive, {:08x} written", crc, written);
  return c;
}

}  // namespace vitsim::real
