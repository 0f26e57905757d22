// One Chrome trace writer for predicted and measured runs (core/results/trace.hpp).
#include "vitsim/core/results/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
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
std::string trace_step(int step) {
  return fmt::format("ProfilerStep#{}", step);
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

// A time in whole nanoseconds: ts and dur are written from these, dur as the rounded end less the rounded
// start, so that slices that touch in time touch in the file (rounding ts and dur apart made adjacent
// slices overlap by 1 ns, which Perfetto shows as a wrong nesting).
long long ns(double seconds) {
  return std::llround(seconds * 1e9);
}

// Microseconds with nanosecond resolution: short, and the same text for the same time.
std::string us(long long nanoseconds) {
  const long long a = nanoseconds < 0 ? -nanoseconds : nanoseconds;
  return fmt::format("{}{}.{:03}", nanoseconds < 0 ? "-" : "", a / 1000, a % 1000);
}

// PyTorch's profiler marks each step with a "ProfilerStep#N" slice on the thread that runs it, the parent
// of the step's work: here on the compute track, step N from the end of step N-1's optimizer (the rank's
// first event for N = 0) to the end of its own. Derived from the events, so a predicted and a measured
// trace get them alike.
std::vector<TraceEvent> step_slices(const std::vector<TraceEvent>& events, int rank) {
  std::vector<const TraceEvent*> mine;
  for (const TraceEvent& e : events)
    if (e.rank == rank) mine.push_back(&e);
  std::stable_sort(mine.begin(), mine.end(),
                   [](const TraceEvent* a, const TraceEvent* b) { return a->start_s < b->start_s; });
  std::vector<TraceEvent> out;
  if (mine.empty()) return out;
  double from = mine.front()->start_s;
  for (const TraceEvent* e : mine)
    if (e->name == kTraceOptimizer) {
      const double end = e->start_s + e->dur_s;
      out.push_back(
          {rank, TraceTrack::Compute, trace_step(static_cast<int>(out.size())), from, end - from, {}});
      from = end;
    }
  return out;
}

// The "memory" counter of one rank (TraceMemory): resident, then up at each forward's end and down at each
// backward's end, in the order the slices end.
std::vector<std::pair<long long, double>> memory_counter(const std::vector<TraceEvent>& events, int rank,
                                                         const TraceMemory& m) {
  std::vector<std::pair<long long, double>> out;  // (ns, bytes)
  if (m.resident_bytes <= 0) return out;
  std::vector<std::pair<long long, double>> changes;  // (end ns, +-bytes)
  long long first = -1;
  for (const TraceEvent& e : events) {
    if (e.rank != rank) continue;
    if (first < 0 || ns(e.start_s) < first) first = ns(e.start_s);
    const bool fwd = e.name.rfind("fwd ", 0) == 0, bwd = e.name.rfind("bwd ", 0) == 0;
    if (!fwd && !bwd) continue;
    auto it = m.saved_bytes.find(e.name.substr(4));
    if (it != m.saved_bytes.end() && it->second > 0)
      changes.push_back({ns(e.start_s + e.dur_s), fwd ? it->second : -it->second});
  }
  if (first < 0) return out;
  std::stable_sort(changes.begin(), changes.end(), [](auto& a, auto& b) { return a.first < b.first; });
  double bytes = m.resident_bytes;
  out.push_back({first, bytes});
  for (const auto& [t, delta] : changes) {
    bytes += delta;
    if (!out.empty() && out.back().first == t)
      out.back().second = bytes;
    else
      out.push_back({t, bytes});
  }
  return out;
}

// A measured "memory" counter (TracePoint::measured_memory): in time order, one value per nanosecond (the
// last sample of each), so that Perfetto draws the steps the trainer saw.
std::vector<std::pair<long long, double>> measured_counter(std::vector<MemorySample> samples) {
  std::stable_sort(samples.begin(), samples.end(),
                   [](const MemorySample& a, const MemorySample& b) { return a.t_s < b.t_s; });
  std::vector<std::pair<long long, double>> out;  // (ns, bytes)
  for (const MemorySample& m : samples) {
    const long long t = ns(m.t_s);
    if (!out.empty() && out.back().first == t)
      out.back().second = m.bytes;
    else
      out.push_back({t, m.bytes});
  }
  return out;
}

// Flow arrows of a ring all-reduce: the n-th "allreduce bucket K" of rank r to the n-th of rank r + 1.
void ring_flows(const TracePoint& p, const std::map<int, int>& pid_of, int point,
                const std::function<void(const std::string&)>& add) {
  if (p.ring_size < 2) return;
  std::map<std::pair<int, std::string>, std::vector<const TraceEvent*>> by;  // (rank, name) -> in time order
  for (const TraceEvent& e : p.events)
    if (e.track == TraceTrack::Comm && e.name.rfind("allreduce bucket ", 0) == 0 && pid_of.count(e.rank))
      by[{e.rank, e.name}].push_back(&e);
  long long id = 0;
  for (auto& [key, mine] : by) {
    const int next = (key.first + 1) % p.ring_size;
    auto it = by.find({next, key.second});
    if (it == by.end()) continue;
    for (size_t n = 0; n < mine.size() && n < it->second.size(); ++n, ++id) {
      const TraceEvent& from = *mine[n];
      const TraceEvent& to = *it->second[n];
      const std::string flow_id = fmt::format("\"{}.{}\"", point, id);
      add(fmt::format(
          R"({{"name": "{}", "cat": "comm", "ph": "s", "id": {}, "pid": {}, "tid": {}, "ts": {}}})",
          kTraceRingFlow, flow_id, pid_of.at(from.rank), static_cast<int>(TraceTrack::Comm),
          us(ns(from.start_s))));
      add(fmt::format(
          R"({{"name": "{}", "cat": "comm", "ph": "f", "bp": "e", "id": {}, "pid": {}, "tid": {}, "ts": {}}})",
          kTraceRingFlow, flow_id, pid_of.at(to.rank), static_cast<int>(TraceTrack::Comm),
          us(ns(to.start_s))));
    }
  }
}

// One "X" event; `cat` its category.
std::string slice(const TraceEvent& e, int pid, const std::string& cat) {
  std::string args;
  for (const auto& [k, v] : e.args)
    args += fmt::format("{}{}: {}", args.empty() ? "" : ", ", quoted(k), nlohmann::json(v).dump());
  const long long start = ns(e.start_s), end = ns(e.start_s + e.dur_s);
  return fmt::format(R"({{"name": {}, "cat": "{}", "ph": "X", "pid": {}, "tid": {}, "ts": {}, "dur": {}{}}})",
                     quoted(e.name), cat, pid, static_cast<int>(e.track), us(start), us(end - start),
                     args.empty() ? "" : ", \"args\": {" + args + "}");
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
  int pid = 0, point_index = 0;
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
    // Each step's slice before the events it holds: a parent first, as PyTorch writes them.
    for (const auto& [rank, rank_pid] : pid_of)
      for (const TraceEvent& e : step_slices(p.events, rank)) add(slice(e, rank_pid, kTraceStepCategory));
    for (const TraceEvent& e : p.events) {
      auto it = pid_of.find(e.rank);
      if (it == pid_of.end()) continue;  // a rank not traced
      add(slice(e, it->second, trace_track_name(e.track)));
    }
    for (const auto& [rank, rank_pid] : pid_of) {
      auto measured = p.measured_memory.find(rank);
      const auto counter = measured != p.measured_memory.end() && !measured->second.empty()
                               ? measured_counter(measured->second)
                               : memory_counter(p.events, rank, p.memory);
      for (const auto& [t, bytes] : counter)
        add(fmt::format(R"({{"name": "{}", "ph": "C", "pid": {}, "ts": {}, "args": {{"bytes": {:.0f}}}}})",
                        kTraceMemory, rank_pid, us(t), bytes));
    }
    ring_flows(p, pid_of, point_index++, add);
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
