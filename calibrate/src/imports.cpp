// Imports of measurements users already have (calibrate/imports.hpp): nccl-tests' all_reduce_perf logs
// and PyTorch profiler traces. Pure: no Torch, no MPI.
#include "vitsim/calibrate/imports.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "vitsim/core/error.hpp"
#include "vitsim/core/identity.hpp"
#include "vitsim/core/io.hpp"
#include "vitsim/core/platform.hpp"
#include "vitsim/core/scenario.hpp"
#include "vitsim/core/system.hpp"
#include "vitsim/core/units.hpp"

namespace vitsim::calibrate {
namespace fs = std::filesystem;

namespace {

std::vector<std::string> split_ws(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& t : v) out += (out.empty() ? "" : " ") + t;
  return out;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The whole token as a finite number, else nullopt-like false.
bool to_number(const std::string& t, double& v) {
  if (t.empty()) return false;
  char* end = nullptr;
  errno = 0;
  v = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size() && errno == 0 && std::isfinite(v);
}

// The two column headers of all_reduce_perf: 2.x (with root, "#wrong": a count of wrong elements) and
// 1.x / early 2.x (no root, "error": the largest relative error, a float).
const std::vector<std::string> kColumnsRoot = {"size", "count", "type",   "redop", "root",  "time",  "algbw",
                                               "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"};
const std::vector<std::string> kColumnsOld = {"size",  "count", "type", "redop", "time",  "algbw",
                                              "busbw", "error", "time", "algbw", "busbw", "error"};

// Bytes per element of nccl-tests' type names (its -d option).
int type_bytes(const std::string& type) {
  static const std::map<std::string, int> bytes = {
      {"int8", 1},  {"uint8", 1},  {"char", 1},   {"f8e4m3", 1}, {"f8e5m2", 1}, {"half", 2},   {"bfloat16", 2},
      {"float16", 2}, {"int32", 4}, {"uint32", 4}, {"int", 4},    {"float", 4},  {"float32", 4}, {"int64", 8},
      {"uint64", 8}, {"double", 8}, {"float64", 8}};
  auto it = bytes.find(type);
  return it == bytes.end() ? 0 : it->second;
}

// What the reader has seen of an all_reduce_perf log so far, and how it reads each kind of line.
class NcclReader {
 public:
  explicit NcclReader(const std::string& path) { log_.path = path; }

  void line(int ln, std::string text) {
    if (!text.empty() && text.back() == '\r') text.pop_back();
    last_line_ = ln;
    if (text.find(" NCCL INFO ") != std::string::npos || text.find(" NCCL WARN ") != std::string::npos) return;
    const size_t first = text.find_first_not_of(" \t");
    if (first == std::string::npos) return;
    if (text[first] == '#') return comment(ln, text, first);
    if (columns_.empty() || ended_) return;  // launcher output before the table, anything after it
    log_.rows.push_back(row(ln, text, first));
  }

  NcclTestsLog finish() {
    const std::string& path = log_.path;
    if (columns_.empty())
      throw Error(fmt::format("{}: no all_reduce_perf table (no '# size count type redop ...' column header): is this "
                              "the output of nccl-tests' all_reduce_perf?",
                              path));
    if (log_.rows.empty()) throw fail(header_line_, "the all_reduce_perf table has no data rows");
    if (!ended_)
      throw fail(last_line_, fmt::format("the all_reduce_perf table stops after {} rows without its closing '# Avg bus "
                                         "bandwidth' line: the log is truncated",
                                         log_.rows.size()));
    log_.ranks = rank_count();
    check_allreduce_factor();
    return log_;
  }

 private:
  NcclTestsLog log_;
  std::vector<std::string> columns_;  // the header's, once seen
  int header_line_ = 0, last_line_ = 0;
  bool ended_ = false;
  std::vector<int> rank_numbers_;

  Error fail(int line, const std::string& what) const { return Error(Origin{log_.path, line}, what); }

  void comment(int ln, const std::string& line, size_t first) {
    const std::vector<std::string> t = split_ws(line.substr(first + 1));
    if (t.empty()) return;
    if (t[0] == "Rank" && columns_.empty()) return rank_line(ln, line, first, t);
    if (t.size() >= 2 && t[0] == "size" && t[1] == "count") return header(ln, t);
    if (!columns_.empty() && !ended_ && (starts_with(t[0], "Out") || (t[0] == "Avg" && t.size() > 1 && t[1] == "bus"))) {
      if (log_.rows.empty()) throw fail(header_line_, "the all_reduce_perf table has no data rows");
      if (t[0] == "Avg") {
        const size_t colon = line.find(':');
        const std::vector<std::string> value = split_ws(colon == std::string::npos ? "" : line.substr(colon + 1));
        double v = 0;
        if (value.empty() || !to_number(value[0], v)) throw fail(ln, "unreadable '# Avg bus bandwidth : X' line");
        log_.avg_busbw = v * 1e9;
        ended_ = true;
      }
    }
    // Other comments: the command line, "(B) (elements) (us)" units, "out-of-place in-place".
  }

  // "#  Rank  0 Group  0 Pid 6899 on HOST device  0 [0000:04:00] NAME"
  void rank_line(int ln, const std::string& line, size_t first, const std::vector<std::string>& t) {
    double r = 0;
    auto on = std::find(t.begin(), t.end(), "on");
    if (t.size() < 2 || !to_number(t[1], r) || on == t.end() || on + 1 == t.end())
      throw fail(ln, fmt::format("unreadable rank line '{}': expected '#  Rank N ... on HOST device D ...'",
                                 line.substr(first)));
    rank_numbers_.push_back(static_cast<int>(r));
    const std::string& host = *(on + 1);
    if (std::find(log_.hosts.begin(), log_.hosts.end(), host) == log_.hosts.end()) log_.hosts.push_back(host);
    const size_t bracket = line.find(']');
    if (log_.device.empty() && bracket != std::string::npos) {
      std::string name = line.substr(bracket + 1);
      name.erase(0, name.find_first_not_of(" \t"));
      name.erase(name.find_last_not_of(" \t") + 1);
      log_.device = name;
    }
  }

  void header(int ln, const std::vector<std::string>& t) {
    if (!columns_.empty())
      throw fail(ln, fmt::format("a second nccl-tests table (the first starts at line {}): import one "
                                 "all_reduce_perf run per file", header_line_));
    if (t != kColumnsRoot && t != kColumnsOld)
      throw fail(ln, fmt::format("unknown all_reduce_perf column header '{}': expected '{}' (nccl-tests 2.x) or "
                                 "'{}'", join(t), join(kColumnsRoot), join(kColumnsOld)));
    columns_ = t;
    header_line_ = ln;
  }

  // One data row: size, count, type, redop, [root], then the out-of-place and the in-place columns.
  NcclTestsRow row(int ln, const std::string& line, size_t first) const {
    const std::vector<std::string> t = split_ws(line);
    const bool with_root = columns_.size() == kColumnsRoot.size();
    if (t.size() != columns_.size())
      throw fail(ln, fmt::format("expected {} columns ({}), found {}: '{}'", columns_.size(), join(columns_), t.size(),
                                 line.substr(first)));
    NcclTestsRow r;
    r.line = ln;
    r.bytes = number(ln, t, 0);
    const double count = number(ln, t, 1);
    if (r.bytes < 0 || r.bytes != std::floor(r.bytes) || count < 0 || count != std::floor(count))
      throw fail(ln, fmt::format("size '{}' and count '{}' must be whole non-negative numbers", t[0], t[1]));
    r.count = static_cast<long long>(count);
    r.type = t[2];
    r.redop = t[3];
    const int tb = type_bytes(r.type);
    if (tb > 0 && r.bytes != static_cast<double>(r.count) * tb)
      throw fail(ln, fmt::format("size {} B is not count {} x {} B of type {}", t[0], t[1], tb, r.type));
    const size_t c = with_root ? 5 : 4;  // first out-of-place column
    if (with_root) number(ln, t, 4);
    for (int half = 0; half < 2; ++half) read_half(ln, t, c + 4 * half, half == 1, r);
    return r;
  }

  double number(int ln, const std::vector<std::string>& t, size_t i) const {
    double v = 0;
    if (!to_number(t[i], v)) throw fail(ln, fmt::format("column {} ({}): '{}' is not a number", i + 1, columns_[i], t[i]));
    return v;
  }

  // time, algbw, busbw and #wrong (or error) from column k: the out-of-place half, or the in-place one.
  void read_half(int ln, const std::vector<std::string>& t, size_t k, bool in_place, NcclTestsRow& r) const {
    const double us = number(ln, t, k), alg = number(ln, t, k + 1), bus = number(ln, t, k + 2);
    if (!(us > 0)) throw fail(ln, fmt::format("column {} (time): {} us; a time must be positive", k + 1, t[k]));
    if (alg < 0 || bus < 0) throw fail(ln, fmt::format("columns {}-{} (algbw, busbw): negative bandwidth", k + 2, k + 3));
    const std::string& wrong = t[k + 3];
    if (columns_[k + 3] == "#wrong" && wrong != "N/A") {
      double w = 0;
      if (!to_number(wrong, w) || w < 0 || w != std::floor(w))
        throw fail(ln, fmt::format("column {} (#wrong): '{}' is not a count", k + 4, wrong));
      if (w > 0)
        throw fail(ln, fmt::format("{} wrong elements in the {} all-reduce of {} B: the run's results are invalid", wrong,
                                   in_place ? "in-place" : "out-of-place", t[0]));
    } else if (double e = 0; columns_[k + 3] == "error" && wrong != "N/A" && !to_number(wrong, e)) {
      throw fail(ln, fmt::format("column {} (error): '{}' is not a number", k + 4, wrong));
    }
    // algbw = size / time (nccl-tests' definition), printed with two decimals: a check of the columns.
    const double alg_expected = r.bytes / (us * 1e-6) / 1e9;
    if (std::abs(alg - alg_expected) > 0.01 + 0.02 * alg_expected)
      throw fail(ln, fmt::format("algbw {} GB/s is not size / time = {} B / {} us = {:.2f} GB/s", t[k + 1], t[0], t[k],
                                 alg_expected));
    (in_place ? r.ip_time_s : r.oop_time_s) = us * 1e-6;
    (in_place ? r.ip_algbw : r.oop_algbw) = alg * 1e9;
    (in_place ? r.ip_busbw : r.oop_busbw) = bus * 1e9;
  }

  // Ranks: the rank lines, else busbw / algbw = 2(n-1)/n on a row precise enough to tell.
  int rank_count() {
    const std::string& path = log_.path;
    if (!rank_numbers_.empty()) {
      std::sort(rank_numbers_.begin(), rank_numbers_.end());
      for (size_t i = 0; i < rank_numbers_.size(); ++i)
        if (rank_numbers_[i] != static_cast<int>(i))
          throw Error(fmt::format("{}: the '# Rank' lines list ranks {}..{} with gaps or repeats: the header is incomplete",
                                  path, rank_numbers_.front(), rank_numbers_.back()));
      return static_cast<int>(rank_numbers_.size());
    }
    const NcclTestsRow* best = nullptr;
    for (const auto& r : log_.rows)
      if (!best || r.oop_algbw > best->oop_algbw) best = &r;
    if (best->oop_algbw < 1e9)
      throw Error(fmt::format("{}: no '# Rank' lines and no row with algbw of 1 GB/s or more: the number of ranks is "
                              "unknown (keep the log's header)",
                              path));
    const double ratio = best->oop_busbw / best->oop_algbw;
    const int ranks = ratio < 2 ? static_cast<int>(std::lround(2 / (2 - ratio))) : 0;
    if (ranks < 1) throw Error(Origin{path, best->line}, "busbw / algbw is 2 or more: not an all-reduce");
    return ranks;
  }

  // busbw = algbw x 2(n-1)/n for an all-reduce: any other factor is another collective's log.
  void check_allreduce_factor() const {
    const double factor = 2.0 * (log_.ranks - 1) / log_.ranks;
    for (const auto& r : log_.rows)
      for (int half = 0; half < 2; ++half) {
        const double alg = (half ? r.ip_algbw : r.oop_algbw) / 1e9, bus = (half ? r.ip_busbw : r.oop_busbw) / 1e9;
        if (std::abs(bus - alg * factor) > 0.01 + 0.02 * alg * factor)
          throw Error(Origin{log_.path, r.line},
                      fmt::format("busbw {:.2f} GB/s is not algbw x 2(n-1)/n = {:.2f} x {:.4g} for {} ranks: not an "
                                  "all_reduce_perf table",
                                  bus, alg, factor, log_.ranks));
      }
  }
};

}  // namespace

NcclTestsLog parse_nccl_tests(const std::string& path, const std::string& text) {
  NcclReader reader(path);
  std::istringstream in(text);
  std::string line;
  for (int ln = 1; std::getline(in, line); ++ln) reader.line(ln, line);
  return reader.finish();
}

NcclImport import_nccl_tests(const NcclTestsLog& log, double fit_max_bytes, const std::string& link_class) {
  NcclImport imp;
  if (log.ranks < 2)
    throw Error(fmt::format("{}: an all-reduce of {} rank measures no link: the fit needs 2 or more ranks", log.path,
                            log.ranks));
  std::vector<AllreduceSample> all, fitted;
  for (const auto& r : log.rows)
    if (r.bytes > 0) all.push_back({r.bytes, r.oop_time_s});
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
  for (const auto& s : all)
    if (fit_max_bytes <= 0 || s.bytes <= fit_max_bytes * 1.0001) fitted.push_back(s);
  // At least the two smallest sizes, so a fit always exists (as calibrate's own measurement).
  if (fitted.size() < 2) fitted.assign(all.begin(), all.begin() + std::min<size_t>(2, all.size()));
  try {
    imp.fit = fit_ring_allreduce(fitted, log.ranks);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", log.path, e.what()));
  }
  imp.fitted = static_cast<int>(fitted.size());
  imp.fitted_up_to = fitted.back().bytes;
  std::string cls = link_class;
  if (cls.empty()) {
    if (log.hosts.empty())
      throw Error(fmt::format("{}: no '# Rank ... on HOST' lines say whether the ranks share a node: pass "
                              "--link-class intra_node or inter_node",
                              log.path));
    cls = log.hosts.size() > 1 ? "inter_node" : "intra_node";
  }
  imp.link = {cls, imp.fit.bandwidth, imp.fit.latency_s, log.ranks};
  return imp;
}

std::string describe(const NcclTestsLog& log, const NcclImport& imp) {
  return fmt::format(
      "{}: all_reduce_perf, {} ranks on {} host(s){}, {} sizes; link class {}: fit t = 2(n-1) a + 2(n-1)/n S/B over the "
      "{} sizes up to {} (out-of-place times): a = {}, B = {}, largest residual {:.1f}%",
      log.path, log.ranks, std::max<size_t>(1, log.hosts.size()), log.device.empty() ? "" : " (" + log.device + ")",
      log.rows.size(), imp.link.link_class, imp.fitted, units::format_bytes(imp.fitted_up_to),
      units::format_time(imp.fit.latency_s), units::format_bandwidth(imp.fit.bandwidth),
      100 * imp.fit.max_rel_residual);
}

// ---- PyTorch profiler trace ----

OpClass torch_op_class(const std::string& n) {
  static const std::set<std::string> gemm = {"aten::addmm",       "aten::mm",           "aten::linear",
                                             "aten::matmul",      "aten::conv2d",       "aten::convolution",
                                             "aten::_convolution", "aten::convolution_backward",
                                             "aten::mkldnn_convolution", "aten::cudnn_convolution"};
  static const std::set<std::string> attn = {"aten::bmm", "aten::baddbmm", "aten::scaled_dot_product_attention"};
  static const std::set<std::string> norm = {
      "aten::softmax",    "aten::_softmax",          "aten::_softmax_backward_data", "aten::log_softmax",
      "aten::_log_softmax", "aten::_log_softmax_backward_data", "aten::layer_norm", "aten::native_layer_norm",
      "aten::native_layer_norm_backward", "aten::gelu", "aten::gelu_backward"};
  if (gemm.count(n)) return OpClass::Gemm;
  if (attn.count(n) || starts_with(n, "aten::_scaled_dot_product_") || starts_with(n, "aten::_flash_attention_") ||
      starts_with(n, "aten::_efficient_attention_"))
    return OpClass::AttnMatmul;
  if (norm.count(n)) return OpClass::Norm;
  return OpClass::Memory;
}

namespace {

using json = nlohmann::json;

enum class Phase { Fwd, Bwd, Optimizer, Data };
constexpr int kPhases = 4;

struct TraceEv {
  std::string name, cat, thread;  // thread: pid/tid as the trace writes them
  double ts = 0, dur = 0;         // us
  long long ext = -1;             // "External id"
  double end() const { return ts + dur; }
};

struct TopOp {
  OpClass cls;
  Phase phase;
  double ts, end;
};

std::string id_text(const json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

// The trace's "traceEvents" array.
json trace_events(const std::string& path, const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed JSON: {}", path, e.what()));
  }
  if (!(j.is_object() && j.contains("traceEvents") && j["traceEvents"].is_array()))
    throw Error(fmt::format("{}: not a PyTorch profiler trace: no \"traceEvents\" array (export it with "
                            "prof.export_chrome_trace(...))",
                            path));
  return std::move(j["traceEvents"]);
}

// The complete events ("ph": "X") of the trace: host events (with the ProfilerStep# spans among them
// also in `steps`) and device ones (kernels, copies, memsets).
struct TraceEvents {
  std::vector<TraceEv> cpu, device, steps;
};
TraceEvents complete_events(const std::string& path, const json& events) {
  TraceEvents out;
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    if (!e.is_object() || e.value("ph", "") != "X") continue;
    auto bad = [&](const char* what) { return Error(fmt::format("{}: /traceEvents/{}: {}", path, i, what)); };
    if (!e.contains("name") || !e["name"].is_string()) throw bad("a complete event (\"ph\": \"X\") without a \"name\"");
    if (!e.contains("ts") || !e["ts"].is_number()) throw bad("a complete event without a numeric \"ts\"");
    if (e.contains("dur") && !e["dur"].is_number()) throw bad("\"dur\" is not a number");
    TraceEv ev;
    ev.name = e["name"].get<std::string>();
    ev.cat = e.contains("cat") && e["cat"].is_string() ? e["cat"].get<std::string>() : "";
    ev.thread = id_text(e.value("pid", json())) + "/" + id_text(e.value("tid", json()));
    ev.ts = e["ts"].get<double>();
    ev.dur = e.value("dur", 0.0);
    if (!std::isfinite(ev.ts) || !std::isfinite(ev.dur) || ev.dur < 0) throw bad("\"ts\" or \"dur\" is not a finite time");
    if (e.contains("args") && e["args"].is_object() && e["args"].contains("External id") &&
        e["args"]["External id"].is_number_integer())
      ev.ext = e["args"]["External id"].get<long long>();
    if (ev.cat == "kernel" || ev.cat == "gpu_memcpy" || ev.cat == "gpu_memset") {
      out.device.push_back(std::move(ev));
    } else {
      if (starts_with(ev.name, "ProfilerStep#")) out.steps.push_back(ev);
      out.cpu.push_back(std::move(ev));
    }
  }
  return out;
}

// The step the trace covers: its one ProfilerStep# span, else all of it.
struct StepWindow {
  bool windowed = false;
  std::string name;  // the step's
  double w0 = -INFINITY, w1 = INFINITY;
  bool contains(double ts) const { return ts >= w0 - 1e-3 && ts <= w1 + 1e-3; }
};
StepWindow step_window(const std::string& path, const std::vector<TraceEv>& steps) {
  if (steps.size() > 1) {
    std::string names;
    for (const auto& s : steps) names += (names.empty() ? "" : ", ") + s.name;
    throw Error(fmt::format("{}: {} profiler steps ({}): import a trace of one training step "
                            "(torch.profiler.schedule(wait=..., warmup=..., active=1))",
                            path, steps.size(), names));
  }
  StepWindow w;
  if (steps.size() == 1) w = {true, steps[0].name, steps[0].ts, steps[0].end()};
  return w;
}

// The outermost aten:: ops of the step, each with its class and phase (from the wrappers around it),
// and which of them each "External id" belongs to (the op's own, or one of an inner aten:: op).
struct OuterOps {
  std::vector<TopOp> tops;
  std::map<long long, size_t> top_of_ext;
};
OuterOps outermost_ops(std::vector<TraceEv>& cpu, const StepWindow& window) {
  // Per thread, outermost aten:: ops and the phase wrappers around them.
  std::stable_sort(cpu.begin(), cpu.end(), [](const TraceEv& a, const TraceEv& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    if (a.ts != b.ts) return a.ts < b.ts;
    return a.dur > b.dur;  // a parent before the child that starts with it
  });
  OuterOps out;
  std::vector<const TraceEv*> stack;
  std::string thread;
  long long current_top = -1;
  for (const TraceEv& ev : cpu) {
    if (ev.thread != thread) {
      stack.clear();
      thread = ev.thread;
      current_top = -1;
    }
    while (!stack.empty() && stack.back()->end() <= ev.ts + 1e-3) stack.pop_back();
    const bool aten = starts_with(ev.name, "aten::");
    const TraceEv* outer_aten = nullptr;
    Phase phase = Phase::Fwd;
    for (const TraceEv* s : stack) {
      if (!outer_aten && starts_with(s->name, "aten::")) outer_aten = s;
      if (starts_with(s->name, "autograd::engine::evaluate_function:")) phase = Phase::Bwd;
      else if (starts_with(s->name, "Optimizer.step") || starts_with(s->name, "Optimizer.zero_grad")) phase = Phase::Optimizer;
      else if (starts_with(s->name, "enumerate(DataLoader)")) phase = Phase::Data;
    }
    if (aten && !outer_aten && window.contains(ev.ts)) {
      out.tops.push_back({torch_op_class(ev.name), phase, ev.ts, ev.end()});
      current_top = static_cast<long long>(out.tops.size() - 1);
      if (ev.ext >= 0) out.top_of_ext[ev.ext] = out.tops.size() - 1;
    } else if (outer_aten && current_top >= 0 && window.contains(outer_aten->ts)) {
      if (ev.ext >= 0) out.top_of_ext[ev.ext] = static_cast<size_t>(current_top);
      // aten::matmul of batched operands runs a bmm: attention's matmul, not a GEMM of weights.
      TopOp& t = out.tops[current_top];
      if (aten && t.cls == OpClass::Gemm && torch_op_class(ev.name) == OpClass::AttnMatmul) t.cls = OpClass::AttnMatmul;
    }
    stack.push_back(&ev);
  }
  return out;
}

// Where the counted times lie: each phase's first start and last end, and the extent of them all (us).
struct Span {
  double first = INFINITY, last = -INFINITY;
  void add(double a, double b) {
    first = std::min(first, a);
    last = std::max(last, b);
  }
  double extent_s() const { return last > first ? (last - first) * 1e-6 : 0.0; }
};
struct Spans {
  std::array<Span, kPhases> phase;
  Span all;  // the extent of every counted time
  Span& of(Phase ph) { return phase[static_cast<size_t>(ph)]; }
};

// Device kernels (NCCL's left out: communication) into the classes of the ops that launched them; a
// kernel launched outside any aten:: op is memory work of no phase.
void count_kernels(const TraceEvents& ev, const OuterOps& ops, const StepWindow& window, TorchProfile& p, Spans& spans) {
  for (const TraceEv& k : ev.device) {
    if (starts_with(k.name, "nccl")) continue;  // communication, not compute
    auto it = k.ext >= 0 ? ops.top_of_ext.find(k.ext) : ops.top_of_ext.end();
    if (it == ops.top_of_ext.end()) {
      if (!window.contains(k.ts)) continue;
      p.class_s[static_cast<int>(OpClass::Memory)] += k.dur * 1e-6;  // launched outside any aten:: op
    } else {
      const TopOp& t = ops.tops[it->second];
      if (t.phase == Phase::Data) continue;
      p.class_s[static_cast<int>(k.cat == "kernel" ? t.cls : OpClass::Memory)] += k.dur * 1e-6;
      spans.of(t.phase).add(k.ts, k.end());
    }
    ++p.kernels;
    spans.all.add(k.ts, k.end());
  }
}

// The outermost ops outside the data loader counted; without device kernels their own times classed.
void count_ops(const OuterOps& ops, TorchProfile& p, Spans& spans) {
  for (const TopOp& t : ops.tops) {
    if (t.phase == Phase::Data) continue;
    ++p.ops;
    if (!p.device) {
      p.class_s[static_cast<int>(t.cls)] += (t.end - t.ts) * 1e-6;
      spans.of(t.phase).add(t.ts, t.end);
      spans.all.add(t.ts, t.end);
    }
  }
}

}  // namespace

TorchProfile parse_torch_profile(const std::string& path, const std::string& text) {
  TorchProfile p;
  p.path = path;
  TraceEvents ev = complete_events(path, trace_events(path, text));
  const StepWindow window = step_window(path, ev.steps);
  const OuterOps ops = outermost_ops(ev.cpu, window);
  if (ops.tops.empty())
    throw Error(fmt::format("{}: no aten:: operator{}: record the trace with "
                            "torch.profiler.profile(activities=[ProfilerActivity.CPU, ...])",
                            path, window.windowed ? " inside " + window.name : ""));
  p.device = std::any_of(ev.device.begin(), ev.device.end(), [](const TraceEv& k) { return !starts_with(k.name, "nccl"); });
  Spans spans;
  if (p.device) count_kernels(ev, ops, window, p, spans);
  count_ops(ops, p, spans);
  p.fwd_s = spans.of(Phase::Fwd).extent_s();
  p.bwd_s = spans.of(Phase::Bwd).extent_s();
  p.optimizer_s = spans.of(Phase::Optimizer).extent_s();
  if (!(p.fwd_s > 0))
    throw Error(fmt::format("{}: no forward: no aten:: operator outside the backward, the optimizer and the data "
                            "loader{}",
                            path, p.device ? " launched a kernel" : ""));
  if (!(p.bwd_s > 0))
    throw Error(fmt::format("{}: no backward (no aten:: operator inside an 'autograd::engine::evaluate_function' "
                            "event{}): profile a whole training step",
                            path, p.device ? " launched a kernel" : ""));
  p.step_s = window.windowed ? (std::max(window.w1, spans.all.last) - window.w0) * 1e-6
                             : (spans.all.last - spans.all.first) * 1e-6;
  return p;
}

void add_torch_profile_point(DeviceCalibration& d, const TorchProfile& p, int micro_batch) {
  ComputePoint cp;
  cp.micro_batch = micro_batch;
  cp.fwd_s = p.fwd_s;
  cp.bwd_s = p.bwd_s;
  cp.optimizer_s = p.optimizer_s;
  d.points.erase(std::remove_if(d.points.begin(), d.points.end(),
                                [&](const ComputePoint& e) { return e.micro_batch == micro_batch; }),
                 d.points.end());
  d.points.push_back(cp);
  std::sort(d.points.begin(), d.points.end(),
            [](const ComputePoint& a, const ComputePoint& b) { return a.micro_batch < b.micro_batch; });
}

std::string describe(const TorchProfile& p) {
  const double step = p.step_s;
  auto share = [&](double s) { return step > 0 ? fmt::format(" ({:.1f}%)", 100 * s / step) : std::string(); };
  return fmt::format(
      "{}: one step {} ({} {}); gemm {}{}, attn_matmul {}{}, norm {}{}, memory {}{}; forward {}, backward {}, "
      "optimizer {}",
      p.path, units::format_time(step), p.device ? p.kernels : p.ops, p.device ? "device kernels" : "CPU aten:: ops",
      units::format_time(p.cls(OpClass::Gemm)), share(p.cls(OpClass::Gemm)),
      units::format_time(p.cls(OpClass::AttnMatmul)), share(p.cls(OpClass::AttnMatmul)),
      units::format_time(p.cls(OpClass::Norm)), share(p.cls(OpClass::Norm)), units::format_time(p.cls(OpClass::Memory)),
      share(p.cls(OpClass::Memory)), units::format_time(p.fwd_s), units::format_time(p.bwd_s),
      units::format_time(p.optimizer_s));
}

// ---- the import run ----

namespace {

void say_import(const ImportOptions& o, const std::string& line) {
  if (o.verbose) fmt::print("vitsim calibrate: {}\n", line);
}

// The nccl-tests log as the calibration's link entry (an entry of the same class and ranks replaced).
void import_nccl_log(const Scenario& s, const ImportOptions& o, Calibration& c) {
  const std::string text = read_input_file(o.nccl_tests, "nccl-tests log");
  const NcclTestsLog log = parse_nccl_tests(o.nccl_tests, text);
  // What the scenario's trainer reduces per step: the whole fp32 gradient (calibrate's own fit limit).
  const double fit_max = o.fit_max_bytes > 0 ? o.fit_max_bytes : 4.0 * build_workload(s.model).total_params();
  const NcclImport imp = import_nccl_tests(log, fit_max, o.link_class);
  c.links.erase(std::remove_if(c.links.begin(), c.links.end(),
                               [&](const LinkCalibration& e) {
                                 return e.link_class == imp.link.link_class && e.ranks == imp.link.ranks;
                               }),
                c.links.end());
  c.links.push_back(imp.link);
  const std::string line = describe(log, imp);
  c.provenance["nccl_tests"] = fmt::format("{} (sha256 {})", line, sha256_hex(text));
  say_import(o, line);
}

// --device-type, else the gpu_model of the scenario platform's first GPU used.
std::string profiled_device_type(const Scenario& s, const ImportOptions& o) {
  if (!o.device_type.empty()) return o.device_type;
  const PlatformFacts facts = read_platform_facts(s.cluster.platform);
  if (facts.nodes.empty()) throw Error(fmt::format("{}: the platform has no node", s.cluster.platform));
  const NodeFacts& node = s.cluster.hosts.empty() ? facts.nodes.front() : facts.node(s.cluster.hosts.front());
  if (node.gpus.empty()) throw Error(fmt::format("{}: node {} has no GPU", s.cluster.platform, node.name));
  return facts.gpu.at(node.gpus.front()).model;
}

// The profiled step as a measured compute point of the device (its entry for the scenario's model and
// precision, made when there is none).
void import_profile(const Scenario& s, const ImportOptions& o, Calibration& c) {
  if (s.training.grad_accum != 1)
    throw Error(fmt::format("--from-torch-profile: the scenario has training.grad_accum {}: a profiled step then holds "
                            "{} forward and backward passes; profile (and import with) grad_accum 1",
                            s.training.grad_accum, s.training.grad_accum));
  const std::string text = read_input_file(o.torch_profile, "PyTorch profiler trace");
  const TorchProfile prof = parse_torch_profile(o.torch_profile, text);
  const std::string type = profiled_device_type(s, o);
  DeviceCalibration fresh;
  fresh.device_type = type;
  fresh.model = s.model;
  fresh.precision = s.training.precision;
  DeviceCalibration* d = &fresh;
  for (auto& e : c.devices)
    if (e.device_type == type && e.precision == s.training.precision && same_shape(e.model, s.model)) d = &e;
  if (o.peak_flops > 0) d->peak_flops = o.peak_flops;
  if (o.mem_bw > 0) d->mem_bw = o.mem_bw;
  add_torch_profile_point(*d, prof, s.training.micro_batch);
  if (d == &fresh) c.devices.push_back(fresh);
  const std::string line = describe(prof);
  c.provenance["torch_profile"] = fmt::format("{}; device {} at micro-batch {} (sha256 {})", line, type,
                                              s.training.micro_batch, sha256_hex(text));
  say_import(o, fmt::format("{}; recorded as device '{}', micro-batch {}, {}", line, type, s.training.micro_batch,
                            precision_name(s.training.precision)));
}

// Read back before it replaces `out`: a merge the reader refuses (a point that breaks the batch curve)
// must not destroy the file it was merged into.
void write_read_back(const std::string& out, const Calibration& c) {
  const std::string tmp = out + ".vitsim-import";
  write_file_atomic(tmp, calibration_to_json(c));
  try {
    read_calibration(tmp);
  } catch (const Error& e) {
    fs::remove(tmp);
    throw Error(fmt::format("{}: the merged calibration would not read back: {}", out, e.what()));
  }
  fs::rename(tmp, out);
}

}  // namespace

Calibration import_measurements(const Scenario& s, const ImportOptions& o) {
  if (o.out.empty()) throw Error("calibrate: --out FILE is required");
  if (o.nccl_tests.empty() && o.torch_profile.empty())
    throw Error("calibrate: nothing to import (--from-nccl-tests FILE or --from-torch-profile FILE)");
  if (!o.force && !o.append && fs::exists(o.out))
    throw Error(fmt::format("{}: calibration file exists; pass --force to overwrite it (or --append to merge)", o.out));
  check_writable(o.out);
  Calibration c;
  if (o.append && fs::exists(o.out)) c = read_calibration(o.out);
  std::string earlier;
  if (!c.provenance.empty()) earlier = fmt::format("{} ({})", c.provenance["command"], c.provenance["date"]);
  c.provenance.clear();
  c.provenance["date"] = now_utc();
  c.provenance["command"] = o.command;
  if (!earlier.empty()) c.provenance["appended_to"] = earlier;
  if (!o.nccl_tests.empty()) import_nccl_log(s, o, c);
  if (!o.torch_profile.empty()) import_profile(s, o, c);
  write_read_back(o.out, c);
  say_import(o, fmt::format("wrote {}", o.out));
  return read_calibration(o.out);
}

}  // namespace vitsim::calibrate
