// nccl-tests' all_reduce_perf logs as calibration inputs (calibrate/imports.hpp): the reader and the ring
// fit. Pure: no Torch, no MPI.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "vitsim/calibrate/imports.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/platform/platform_props.hpp"

namespace vitsim::calibrate {

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

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// The whole token as a finite number, else nullopt-like false.
bool to_number(const std::string& t, double& v) {
  if (t.empty()) return false;
  char* end = nullptr;
  errno = 0;
  v = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size() && errno == 0 && std::isfinite(v);
}

// Half a unit of the last digit a number was printed with: nccl-tests' getFloatStr (src/util.cu) prints a
// time or bandwidth in a fixed width with two decimals, else one, else none, else an exponent ("1.8e+07",
// "1e+06"), so a printed value is that far from the one it computed at most.
double half_unit(const std::string& t) {
  const size_t e = t.find_first_of("eE");
  const std::string mantissa = t.substr(0, e);
  const size_t dot = mantissa.find('.');
  const int decimals = dot == std::string::npos ? 0 : static_cast<int>(mantissa.size() - dot - 1);
  double exponent = 0;
  if (e != std::string::npos && !to_number(t.substr(e + 1), exponent)) exponent = 0;
  return 0.5 * std::pow(10.0, exponent - decimals);
}

// The two column headers of all_reduce_perf: 2.x (with root, "#wrong": a count of wrong elements) and
// 1.x / early 2.x (no root, "error": the largest relative error, a float).
const std::vector<std::string> kColumnsRoot = {"size",  "count",  "type", "redop", "root",  "time",  "algbw",
                                               "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"};
const std::vector<std::string> kColumnsOld = {"size",  "count", "type", "redop", "time",  "algbw",
                                              "busbw", "error", "time", "algbw", "busbw", "error"};

// Bytes per element of nccl-tests' type names (its -d option).
int type_bytes(const std::string& type) {
  static const std::map<std::string, int> bytes = {
      {"int8", 1},     {"uint8", 1},   {"char", 1},   {"f8e4m3", 1}, {"f8e5m2", 1}, {"half", 2},
      {"bfloat16", 2}, {"float16", 2}, {"int32", 4},  {"uint32", 4}, {"int", 4},    {"float", 4},
      {"float32", 4},  {"int64", 8},   {"uint64", 8}, {"double", 8}, {"float64", 8}};
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
    if (text.find(" NCCL INFO ") != std::string::npos || text.find(" NCCL WARN ") != std::string::npos)
      return;
    const size_t first = text.find_first_not_of(" \t");
    if (first == std::string::npos) return;
    if (text[first] == '#') return comment(ln, text, first);
    if (columns_.empty() || ended_) return;  // launcher output before the table, anything after it
    log_.rows.push_back(row(ln, text, first));
    rounding_.push_back(row_rounding_);
  }

  NcclTestsLog finish() {
    const std::string& path = log_.path;
    if (columns_.empty())
      throw Error(fmt::format(
          "{}: no all_reduce_perf table (no '# size count type redop ...' column header): is this "
          "the output of nccl-tests' all_reduce_perf?",
          path));
    if (log_.rows.empty()) throw fail(header_line_, "the all_reduce_perf table has no data rows");
    if (!ended_)
      throw fail(last_line_,
                 fmt::format("the all_reduce_perf table stops after {} rows without its closing '# Avg bus "
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
  // Per row, half a unit of the last printed digit of the out-of-place algbw and busbw, then the in-place
  // ones (half_unit): what check_allreduce_factor allows beside its own margin.
  std::vector<std::array<double, 4>> rounding_;
  mutable std::array<double, 4> row_rounding_{};

  Error fail(int line, const std::string& what) const { return Error(Origin{log_.path, line}, what); }

  void comment(int ln, const std::string& line, size_t first) {
    const std::vector<std::string> t = split_ws(line.substr(first + 1));
    if (t.empty()) return;
    if (t[0] == "Rank" && columns_.empty()) return rank_line(ln, line, first, t);
    if (t.size() >= 2 && t[0] == "size" && t[1] == "count") return header(ln, t);
    if (!columns_.empty() && !ended_ &&
        (starts_with(t[0], "Out") || (t[0] == "Avg" && t.size() > 1 && t[1] == "bus"))) {
      if (log_.rows.empty()) throw fail(header_line_, "the all_reduce_perf table has no data rows");
      if (t[0] == "Avg") {
        const size_t colon = line.find(':');
        const std::vector<std::string> value =
            split_ws(colon == std::string::npos ? "" : line.substr(colon + 1));
        double v = 0;
        if (value.empty() || !to_number(value[0], v))
          throw fail(ln, "unreadable '# Avg bus bandwidth : X' line");
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
                                 "all_reduce_perf run per file",
                                 header_line_));
    if (t != kColumnsRoot && t != kColumnsOld)
      throw fail(ln,
                 fmt::format("unknown all_reduce_perf column header '{}': expected '{}' (nccl-tests 2.x) or "
                             "'{}'",
                             join(t), join(kColumnsRoot), join(kColumnsOld)));
    columns_ = t;
    header_line_ = ln;
  }

  // One data row: size, count, type, redop, [root], then the out-of-place and the in-place columns.
  NcclTestsRow row(int ln, const std::string& line, size_t first) const {
    const std::vector<std::string> t = split_ws(line);
    const bool with_root = columns_.size() == kColumnsRoot.size();
    if (t.size() != columns_.size())
      throw fail(ln, fmt::format("expected {} columns ({}), found {}: '{}'", columns_.size(), join(columns_),
                                 t.size(), line.substr(first)));
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
    if (!to_number(t[i], v))
      throw fail(ln, fmt::format("column {} ({}): '{}' is not a number", i + 1, columns_[i], t[i]));
    return v;
  }

  // time, algbw, busbw and #wrong (or error) from column k: the out-of-place half, or the in-place one.
  void read_half(int ln, const std::vector<std::string>& t, size_t k, bool in_place, NcclTestsRow& r) const {
    const double us = number(ln, t, k), alg = number(ln, t, k + 1), bus = number(ln, t, k + 2);
    if (!(us > 0))
      throw fail(ln, fmt::format("column {} (time): {} us; a time must be positive", k + 1, t[k]));
    if (alg < 0 || bus < 0)
      throw fail(ln, fmt::format("columns {}-{} (algbw, busbw): negative bandwidth", k + 2, k + 3));
    const std::string& wrong = t[k + 3];
    if (columns_[k + 3] == "#wrong" && wrong != "N/A") {
      double w = 0;
      if (!to_number(wrong, w) || w < 0 || w != std::floor(w))
        throw fail(ln, fmt::format("column {} (#wrong): '{}' is not a count", k + 4, wrong));
      if (w > 0)
        throw fail(
            ln, fmt::format("{} wrong elements in the {} all-reduce of {} B: the run's results are invalid",
                            wrong, in_place ? "in-place" : "out-of-place", t[0]));
    } else if (double e = 0; columns_[k + 3] == "error" && wrong != "N/A" && !to_number(wrong, e)) {
      throw fail(ln, fmt::format("column {} (error): '{}' is not a number", k + 4, wrong));
    }
    // algbw = size / time (nccl-tests' definition): a check of the columns, within what each was rounded to
    // when printed (two decimals mostly; a long time or a large rate in an exponent: issue 39's fuzzing
    // found `vitsim collective`'s own tables, printed as nccl-tests prints them, refused here).
    const double alg_expected = r.bytes / (us * 1e-6) / 1e9;
    const double rounding = half_unit(t[k + 1]) + alg_expected * half_unit(t[k]) / us;
    if (std::abs(alg - alg_expected) > 0.01 + 0.02 * alg_expected + rounding)
      throw fail(ln, fmt::format("algbw {} GB/s is not size / time = {} B / {} us = {:.2f} GB/s", t[k + 1],
                                 t[0], t[k], alg_expected));
    row_rounding_[in_place ? 2 : 0] = half_unit(t[k + 1]);
    row_rounding_[in_place ? 3 : 1] = half_unit(t[k + 2]);
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
          throw Error(fmt::format(
              "{}: the '# Rank' lines list ranks {}..{} with gaps or repeats: the header is incomplete", path,
              rank_numbers_.front(), rank_numbers_.back()));
      return static_cast<int>(rank_numbers_.size());
    }
    const NcclTestsRow* best = nullptr;
    for (const auto& r : log_.rows)
      if (!best || r.oop_algbw > best->oop_algbw) best = &r;
    if (best->oop_algbw < 1e9)
      throw Error(
          fmt::format("{}: no '# Rank' lines and no row with algbw of 1 GB/s or more: the number of ranks is "
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
    for (size_t i = 0; i < log_.rows.size(); ++i)
      for (int half = 0; half < 2; ++half) {
        const NcclTestsRow& r = log_.rows[i];
        const double alg = (half ? r.ip_algbw : r.oop_algbw) / 1e9,
                     bus = (half ? r.ip_busbw : r.oop_busbw) / 1e9;
        // Within the margin, and what the two columns were rounded to when printed ("1e+06").
        const double printed = rounding_[i][2 * half + 1] + factor * rounding_[i][2 * half];
        if (std::abs(bus - alg * factor) > 0.01 + 0.02 * alg * factor + printed)
          throw Error(
              Origin{log_.path, r.line},
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
    throw Error(fmt::format("{}: an all-reduce of {} rank measures no link: the fit needs 2 or more ranks",
                            log.path, log.ranks));
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
  // A log whose times do not grow with the size fits a bandwidth no link has (1.1e+07 EB/s, issue 27): the
  // same range as the calibration reader's (core/platform/platform_props.hpp), said with the times.
  if (!plausible_bandwidth().contains(imp.fit.bandwidth))
    throw Error(fmt::format(
        "{}: the fit gives a bandwidth of {:.3g} B/s, outside the plausible {}: the out-of-place times do "
        "not grow with the size ({} in {}, {} in {}); is the log of one run, and its time column in us?",
        log.path, imp.fit.bandwidth, kPlausibleBandwidthText, units::format_bytes(fitted.front().bytes),
        units::format_time(fitted.front().seconds), units::format_bytes(fitted.back().bytes),
        units::format_time(fitted.back().seconds)));
  std::string cls = link_class;
  if (cls.empty()) {
    if (log.hosts.empty())
      throw Error(
          fmt::format("{}: no '# Rank ... on HOST' lines say whether the ranks share a node: pass "
                      "--link-class intra_node or inter_node",
                      log.path));
    cls = log.hosts.size() > 1 ? "inter_node" : "intra_node";
  }
  imp.link = {cls, imp.fit.bandwidth, imp.fit.latency_s, log.ranks};
  return imp;
}

std::string describe(const NcclTestsLog& log, const NcclImport& imp) {
  return fmt::format(
      "{}: all_reduce_perf, {} ranks on {} host(s){}, {} sizes; link class {}: fit t = 2(n-1) a + 2(n-1)/n "
      "S/B over the "
      "{} sizes up to {} (out-of-place times): a = {}, B = {}, largest residual {:.1f}%",
      log.path, log.ranks, std::max<size_t>(1, log.hosts.size()),
      log.device.empty() ? "" : " (" + log.device + ")", log.rows.size(), imp.link.link_class, imp.fitted,
      units::format_bytes(imp.fitted_up_to), units::format_time(imp.fit.latency_s),
      units::format_bandwidth(imp.fit.bandwidth), 100 * imp.fit.max_rel_residual);
}
}  // namespace vitsim::calibrate
