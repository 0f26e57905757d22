#include "vitsim/sim/engine/process_pool.hpp"
#include "vitsim/sim/engine/engine.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/platform/platform_flat.hpp"

namespace vitsim::sim {

bool ProgressPace::due(double t, size_t done, size_t total) {
  if (done == 0) return false;
  bool show;
  if (tty) {
    show = t > 1.0 || last_t >= 0;
  } else if (last_t < 0) {
    show = t > 1.0;
  } else {
    const size_t tenth = std::max<size_t>(1, (total + 9) / 10);
    show = done == total || t - last_t >= 10.0 || done / tenth > last_done / tenth;
  }
  if (show) last_t = t, last_done = done;
  return show;
}

ProgressLine::ProgressLine(std::string who, bool enabled)
    : who_(std::move(who)), enabled_(enabled), start_(std::chrono::steady_clock::now()) {
  pace_.tty = isatty(2);
}

ProgressLine::~ProgressLine() {
  if (shown_ && isatty(2)) fmt::print(stderr, "\n");
}

void ProgressLine::update(size_t done, size_t total, const std::string& what) {
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (!enabled_ || !pace_.due(t, done, total)) return;
  const bool tty = pace_.tty;
  fmt::print(stderr, "{}{}: {}/{} {}, {:.1f} s elapsed, ~{:.1f} s left{}", tty ? "\r" : "", who_, done, total,
             what, t, t / done * (total - done), tty ? "   " : "\n");
  shown_ = true;
}

void finish_child(const std::string& out_path, const std::string& payload) {
  // Written whole under another name, then renamed: the parent sees the complete file or none. Not synced
  // to disk (write_file_atomic's fsync): the file lives in the run's temporary folder for as long as the
  // parent reads it, and a crash of the machine loses the run anyway.
  const std::string part = out_path + ".part";
  const int fd = open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && write_all(fd, payload.data(), payload.size());
  if (fd >= 0 && close(fd) != 0) ok = false;
  if (!ok || std::rename(part.c_str(), out_path.c_str()) != 0) std::_Exit(4);
  std::fflush(nullptr);
  std::_Exit(0);
}

std::vector<ForkedResult> gather_forked_each(size_t count, const ForkedPoints& how,
                                             const std::function<nlohmann::json(size_t)>& result_of) {
  using json = nlohmann::json;
  TempDir tmp(how.prefix);
  auto out_of = [&](size_t i) { return fmt::format("{}/point{}.json", tmp.path(), i); };
  std::vector<std::string> failures;
  {
    ProgressLine progress(how.who, how.progress);
    const int jobs = how.jobs > 0 ? how.jobs : default_jobs();
    auto child = [&](size_t i) {
      json j;
      try {
        j = result_of(i);
      } catch (const std::exception& e) {
        j = json{{"error", e.what()}};
      }
      // CBOR, not JSON text: a large point's per-rank table (16,384 ranks: ~7 MB as text) costs no number
      // formatting and parsing on the way (measured on 16,384 GPUs: docs/benchmarks.md, issues 36 and 37).
      const std::vector<std::uint8_t> cbor = json::to_cbor(j);
      finish_child(out_of(i), std::string(cbor.begin(), cbor.end()));
    };
    auto on_done = [&](size_t done) { progress.update(done, count, how.what); };
    failures = run_forked_groups(
        count, jobs, how.group_of ? how.group_of : [](size_t) { return std::string(); },
        how.prepare ? how.prepare : [](size_t) {}, child, on_done);
  }
  std::vector<ForkedResult> results(count);
  for (size_t i = 0; i < count; ++i) {
    ForkedResult& r = results[i];
    const std::string out = out_of(i);
    if (!failures[i].empty() || !std::filesystem::exists(out)) {
      r.error = failures[i].empty() ? "no result" : failures[i];
      r.process_failed = true;
      continue;
    }
    r.result = json::from_cbor(read_file(out));
    if (r.result.contains("error")) r.error = r.result["error"].get<std::string>();
  }
  return results;
}

std::string forked_error(const ForkedResult& r, const std::string& name) {
  return r.process_failed ? fmt::format("{}: {}", name, r.error) : r.error;
}

std::vector<nlohmann::json> gather_forked(size_t count, const ForkedPoints& how,
                                          const std::function<nlohmann::json(size_t)>& result_of,
                                          const std::function<std::string(size_t)>& name_of) {
  std::vector<nlohmann::json> out;
  out.reserve(count);
  for (auto& r : gather_forked_each(count, how, result_of)) {
    if (!r.ok()) throw Error(forked_error(r, name_of(out.size())));
    out.push_back(std::move(r.result));
  }
  return out;
}

const PlatformFacts& PlatformCache::of(const Scenario& s) {
  auto it = facts_.find(s.cluster.platform);
  if (it == facts_.end()) {
    if (!std::filesystem::exists(s.cluster.platform))
      throw Error(s.origin_of("cluster.platform"),
                  fmt::format("cluster.platform: no such file '{}'", s.cluster.platform));
    // The file read once: its facts and, for a flat-star file, the description the zygote builds from
    // (core/platform/platform_flat.hpp), both from the same text.
    const std::string text = read_input_file(s.cluster.platform, "platform file");
    PlatformFacts facts = read_platform_text(s.cluster.platform, text);
    if (facts.flat_layout)
      facts.flat = std::make_shared<const FlatPlatform>(read_flat_platform(s.cluster.platform, text));
    if (!s.cluster.platform_label.empty())
      facts.path = s.cluster.platform_label;  // never the temporary copy's path
    it = facts_.emplace(s.cluster.platform, std::move(facts)).first;
    // Once, before the points fork.
    it->second.flat = check_platform_loads(s.cluster.platform, it->second, platform_origin(s, it->second));
  }
  return it->second;
}

int default_jobs() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace vitsim::sim
