// Torch-free helpers of the trainer: fault-injection parsing, thread counts, saved parameters, malloc settings.
#include <fmt/format.h>
#include <malloc.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "vitsim/core/error.hpp"
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
      "mpirun binds each rank to one core when it starts two or fewer; add --bind-to none or --map-by slot:PE={} "
      "to mpirun",
      std::max(t.threads, t.share));
  if (t.threads > t.allowed_cpus)
    t.warning = fmt::format("{} intra-op threads but this process may run on {} CPU(s) only, so they share them: {}",
                            t.threads, t.allowed_cpus, fix);
  else if (requested <= 0 && t.allowed_cpus < t.share)
    t.warning = fmt::format("{} intra-op thread(s): this process may run on {} CPU(s) of the {} cores per rank of this "
                            "node: {}",
                            t.threads, t.allowed_cpus, t.share, fix);
  return t;
}

FaultInjection parse_fault(const std::string& text) {
  FaultInjection f;
  auto fail = [&]() -> FaultInjection {
    throw Error(fmt::format("--fault '{}': expected KIND:STEP[:RANK] with KIND kill, hang or exit, STEP >= 1, RANK >= 0",
                            text));
  };
  auto c1 = text.find(':');
  if (c1 == std::string::npos) return fail();
  f.kind = text.substr(0, c1);
  if (f.kind != "kill" && f.kind != "hang" && f.kind != "exit") return fail();
  auto c2 = text.find(':', c1 + 1);
  try {
    size_t used = 0;
    std::string step = text.substr(c1 + 1, c2 == std::string::npos ? std::string::npos : c2 - c1 - 1);
    f.step = std::stoll(step, &used);
    if (used != step.size() || f.step < 1) return fail();
    if (c2 != std::string::npos) {
      std::string rank = text.substr(c2 + 1);
      f.rank = std::stoi(rank, &used);
      if (used != rank.size() || f.rank < 0) return fail();
    }
  } catch (const std::logic_error&) {
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
// ran 5-9x slower inside a pass than alone (README "vitsim calibrate"). Large thresholds keep the freed
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

}  // namespace vitsim::real
