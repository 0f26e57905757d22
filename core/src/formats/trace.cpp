// One Chrome trace writer for predicted and measured runs (core/formats/trace.hpp).
#include "vitsim/core/formats/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>

#include "vitsim/core/base/enum_names.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim {

namespace {
constexpr EnumNames<TraceTrack, 3> kTracks{
    {{TraceTrack::Compute, "compute"}, {TraceTrack::Comm, "comm"}, {TraceTrack::Data, "data"}}};
}  // namespace

const char* trace_track_name(TraceTrack t) {
  return name_of(kTracks, t);
}

std::string trace_fwd(const std::string& layer) {
  return "fwd " + layer;
}
std::string trace_bwd(const std::string& layer) {
  return "bwd " + layer;
}
std::string trace_allreduce(int bucket) {
  return fmt::format("allreduce bucket {}", bucket);
}

TraceArgs allreduce_args(double bytes, double seconds, int ranks) {
  const double algbw = seconds > 0 ? bytes / seconds / 1e9 : 0;
  const double busbw = ranks > 0 ? algbw * 2.0 * (ranks - 1) / ranks : 0;
  return {{"bytes", bytes}, {"algbw_GBps", algbw}, {"busbw_GBps", busbw}};
}

namespace {

std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump();
}

// Microseconds with nanosecond resolution: short, and the same text for the same time.
std::string us(double seconds) {
  std::string t = fmt::format("{:.3f}", seconds * 1e6);
  if (t == "-0.000") t = "0.000";
  return t;
}

}  // namespace

std::string write_trace(const std::vector<TracePoint>& points, const std::string& source,
                        const std::vector<std::string>& notes) {
  std::string out = "{\"traceEvents\": [\n";
  bool first = true;
  auto add = [&](const std::string& e) {
    out += first ? "  " : ",\n  ";
    out += e;
    first = false;
  };
  int pid = 0;
  for (const TracePoint& p : points) {
    std::map<int, int> pid_of;  // rank -> pid
    for (int r : p.ranks) {
      pid_of[r] = pid;
      const std::string host = r < static_cast<int>(p.hosts.size()) ? p.hosts[r] : std::string("?");
      add(fmt::format(R"({{"name": "process_name", "ph": "M", "pid": {}, "tid": 0, "args": {{"name": {}}}}})",
                      pid, quoted(fmt::format("rank {} ({})", r, host))));
      add(fmt::format(
          R"({{"name": "process_sort_index", "ph": "M", "pid": {}, "tid": 0, "args": {{"sort_index": {}}}}})",
          pid, pid));
      if (!p.label.empty())
        add(fmt::format(
            R"({{"name": "process_labels", "ph": "M", "pid": {}, "tid": 0, "args": {{"labels": {}}}}})", pid,
            quoted(p.label)));
      for (TraceTrack t : {TraceTrack::Compute, TraceTrack::Comm, TraceTrack::Data}) {
        const int tid = static_cast<int>(t);
        add(fmt::format(
            R"({{"name": "thread_name", "ph": "M", "pid": {}, "tid": {}, "args": {{"name": "{}"}}}})", pid,
            tid, trace_track_name(t)));
        add(fmt::format(
            R"({{"name": "thread_sort_index", "ph": "M", "pid": {}, "tid": {}, "args": {{"sort_index": {}}}}})",
            pid, tid, tid));
      }
      ++pid;
    }
    for (const TraceEvent& e : p.events) {
      auto it = pid_of.find(e.rank);
      if (it == pid_of.end()) continue;  // a rank not traced
      std::string args;
      for (const auto& [k, v] : e.args)
        args += fmt::format("{}{}: {}", args.empty() ? "" : ", ", quoted(k), nlohmann::json(v).dump());
      add(fmt::format(
          R"({{"name": {}, "cat": "{}", "ph": "X", "pid": {}, "tid": {}, "ts": {}, "dur": {}{}}})",
          quoted(e.name), trace_track_name(e.track), it->second, static_cast<int>(e.track), us(e.start_s),
          us(e.dur_s), args.empty() ? "" : ", \"args\": {" + args + "}"));
    }
  }
  std::string note_list;
  for (const auto& n : notes) note_list += (note_list.empty() ? "" : ", ") + quoted(n);
  out += fmt::format(
      "\n],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": {{\"generator\": \"vitsim\", \"source\": {}, "
      "\"time_origin\": \"start of each point's first step\", \"notes\": [{}]}}\n}}\n",
      quoted(source), note_list);
  return out;
}

// ---- --trace-ranks ----

bool RankList::contains(int rank) const {
  for (const auto& [lo, hi] : ranges)
    if (rank >= lo && rank <= hi) return true;
  return false;
}

int RankList::max() const {
  int m = -1;
  for (const auto& r : ranges) m = std::max(m, r.second);
  return m;
}

RankList parse_rank_list(const std::string& text) {
  constexpr long kMaxRank = (1 << 24) - 1;  // the scenario's largest rank count, 16777216, less one
  auto fail = [&](const std::string& what) {
    return Error(
        fmt::format("--trace-ranks '{}': {} (expected ranks and ranges such as 0,3,8-15)", text, what));
  };
  if (text.empty()) throw fail("empty list");
  RankList list;
  size_t pos = 0;
  int item = 0;
  while (true) {
    ++item;
    const size_t comma = text.find(',', pos);
    const std::string part = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (part.empty()) throw fail(fmt::format("item {} is empty", item));
    auto number = [&](const std::string& s) -> int {
      if (s.empty() || !std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); }))
        throw fail(fmt::format("'{}' is not a rank (a whole number >= 0)", s));
      try {
        return static_cast<int>(units::parse_integer(s, 0, kMaxRank));  // core's one strict reader
      } catch (const Error&) {
        throw fail(fmt::format("rank {} is above {}", echo(s), kMaxRank));
      }
    };
    const size_t dash = part.find('-');
    if (dash == 0) throw fail(fmt::format("'{}' is not a rank (ranks are whole numbers >= 0)", part));
    int lo, hi;
    if (dash == std::string::npos) {
      lo = hi = number(part);
    } else {
      lo = number(part.substr(0, dash));
      hi = number(part.substr(dash + 1));
      if (hi < lo) throw fail(fmt::format("range {} runs backwards", part));
    }
    list.ranges.emplace_back(lo, hi);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return list;
}

std::vector<int> traced_ranks(const RankList* list, int ranks) {
  std::vector<int> out;
  for (int r = 0; r < ranks; ++r) {
    if (list ? list->contains(r) : r < kDefaultTraceRanks) out.push_back(r);
  }
  return out;
}

std::string trace_ranks_note(const RankList* list, int ranks) {
  if (list || ranks <= kDefaultTraceRanks) return "";
  return fmt::format(
      "trace: ranks 0-{} of {} kept; --trace-ranks LIST chooses others (e.g. --trace-ranks 0-{} for all)",
      kDefaultTraceRanks - 1, ranks, ranks - 1);
}

}  // namespace vitsim
