// PyTorch profiler Chrome traces of one training step as calibration inputs (calibrate/imports.hpp).
// Pure: no Torch, no MPI.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "vitsim/calibrate/imports.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/json_depth.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim::calibrate {

namespace {
bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}
}  // namespace

OpClass torch_op_class(const std::string& n) {
  static const std::set<std::string> gemm = {"aten::addmm",
                                             "aten::mm",
                                             "aten::linear",
                                             "aten::matmul",
                                             "aten::conv2d",
                                             "aten::convolution",
                                             "aten::_convolution",
                                             "aten::convolution_backward",
                                             "aten::mkldnn_convolution",
                                             "aten::cudnn_convolution"};
  static const std::set<std::string> attn = {"aten::bmm", "aten::baddbmm",
                                             "aten::scaled_dot_product_attention"};
  static const std::set<std::string> norm = {
      "aten::softmax",     "aten::_softmax",          "aten::_softmax_backward_data",
      "aten::log_softmax", "aten::_log_softmax",      "aten::_log_softmax_backward_data",
      "aten::layer_norm",  "aten::native_layer_norm", "aten::native_layer_norm_backward",
      "aten::gelu",        "aten::gelu_backward"};
  if (gemm.count(n)) return OpClass::Gemm;
  if (attn.count(n) || starts_with(n, "aten::_scaled_dot_product_") ||
      starts_with(n, "aten::_flash_attention_") || starts_with(n, "aten::_efficient_attention_"))
    return OpClass::AttnMatmul;
  if (norm.count(n)) return OpClass::Norm;
  return OpClass::Memory;
}

namespace {

using json = nlohmann::json;

// The longest event a trace of one training step may hold: a day (8.64e10 us). A duration of 1e300 us was
// accepted and made a step of 1e294 s (issue 27).
constexpr double kMaxEventUs = 86400e6;

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

std::string id_text(const json& j) {
  return j.is_string() ? j.get<std::string>() : j.dump();
}

// The trace's "traceEvents" array.
json trace_events(const std::string& path, const std::string& text) {
  if (const std::string deep = json_depth_problem(text); !deep.empty())
    throw Error(fmt::format("{}: {}", path, deep));
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed JSON: {}", path, e.what()));
  }
  if (!(j.is_object() && j.contains("traceEvents") && j["traceEvents"].is_array()))
    throw Error(
        fmt::format("{}: not a PyTorch profiler trace: no \"traceEvents\" array (export it with "
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
    if (!e.contains("name") || !e["name"].is_string())
      throw bad("a complete event (\"ph\": \"X\") without a \"name\"");
    if (!e.contains("ts") || !e["ts"].is_number()) throw bad("a complete event without a numeric \"ts\"");
    if (e.contains("dur") && !e["dur"].is_number()) throw bad("\"dur\" is not a number");
    TraceEv ev;
    ev.name = e["name"].get<std::string>();
    ev.cat = e.contains("cat") && e["cat"].is_string() ? e["cat"].get<std::string>() : "";
    ev.thread = id_text(e.value("pid", json())) + "/" + id_text(e.value("tid", json()));
    ev.ts = e["ts"].get<double>();
    ev.dur = e.value("dur", 0.0);
    if (!std::isfinite(ev.ts) || !std::isfinite(ev.dur) || ev.dur < 0)
      throw bad("\"ts\" or \"dur\" is not a finite time");
    if (ev.dur > kMaxEventUs)
      throw bad(
          fmt::format("\"dur\" {:.6g} us is over a day: not an event of one training step", ev.dur).c_str());
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
    throw Error(
        fmt::format("{}: {} profiler steps ({}): import a trace of one training step "
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
      if (starts_with(s->name, "autograd::engine::evaluate_function:"))
        phase = Phase::Bwd;
      else if (starts_with(s->name, "Optimizer.step") || starts_with(s->name, "Optimizer.zero_grad"))
        phase = Phase::Optimizer;
      else if (starts_with(s->name, "enumerate(DataLoader)"))
        phase = Phase::Data;
    }
    if (aten && !outer_aten && window.contains(ev.ts)) {
      out.tops.push_back({torch_op_class(ev.name), phase, ev.ts, ev.end()});
      current_top = static_cast<long long>(out.tops.size() - 1);
      if (ev.ext >= 0) out.top_of_ext[ev.ext] = out.tops.size() - 1;
    } else if (outer_aten && current_top >= 0 && window.contains(outer_aten->ts)) {
      if (ev.ext >= 0) out.top_of_ext[ev.ext] = static_cast<size_t>(current_top);
      // aten::matmul of batched operands runs a bmm: attention's matmul, not a GEMM of weights.
      TopOp& t = out.tops[current_top];
      if (aten && t.cls == OpClass::Gemm && torch_op_class(ev.name) == OpClass::AttnMatmul)
        t.cls = OpClass::AttnMatmul;
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

// A kernel runs after the op that launched it, and within its step: the device may trail the host that
// launches it, but by less than one more step (the next step's launches queue behind it). Kernels 16
// minutes away from their 3 ms ProfilerStep made a 16.67-minute forward pass (issue 27).
void check_kernel_in_step(const std::string& path, const TraceEv& k, const TopOp& t,
                          const StepWindow& window) {
  constexpr double kSkewUs = 1;  // host and device clocks, aligned by the profiler, to a microsecond
  std::string why;
  if (k.ts < t.ts - kSkewUs)
    why = fmt::format("starts {:.6g} us before the operator that launched it", t.ts - k.ts);
  else if (window.windowed && k.end() > window.w1 + (window.w1 - window.w0) + kSkewUs)
    why = fmt::format("ends {:.6g} us after {} ({:.6g} us long) ended: outside its step", k.end() - window.w1,
                      window.name, window.w1 - window.w0);
  if (!why.empty())
    throw Error(
        fmt::format("{}: kernel '{}' (External id {}) {}; export the trace of one step as the "
                    "profiler wrote it",
                    path, k.name.substr(0, 60), k.ext, why));
}

// Device kernels (NCCL's left out: communication) into the classes of the ops that launched them; a
// kernel launched outside any aten:: op is memory work of no phase.
void count_kernels(const TraceEvents& ev, const OuterOps& ops, const StepWindow& window, TorchProfile& p,
                   Spans& spans) {
  for (const TraceEv& k : ev.device) {
    if (starts_with(k.name, "nccl")) continue;  // communication, not compute
    auto it = k.ext >= 0 ? ops.top_of_ext.find(k.ext) : ops.top_of_ext.end();
    if (it == ops.top_of_ext.end()) {
      if (!window.contains(k.ts)) continue;
      p.class_s[static_cast<int>(OpClass::Memory)] += k.dur * 1e-6;  // launched outside any aten:: op
    } else {
      const TopOp& t = ops.tops[it->second];
      if (t.phase == Phase::Data) continue;
      check_kernel_in_step(p.path, k, t, window);
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
    throw Error(
        fmt::format("{}: no aten:: operator{}: record the trace with "
                    "torch.profiler.profile(activities=[ProfilerActivity.CPU, ...])",
                    path, window.windowed ? " inside " + window.name : ""));
  p.device = std::any_of(ev.device.begin(), ev.device.end(),
                         [](const TraceEv& k) { return !starts_with(k.name, "nccl"); });
  Spans spans;
  if (p.device) count_kernels(ev, ops, window, p, spans);
  count_ops(ops, p, spans);
  p.fwd_s = spans.of(Phase::Fwd).extent_s();
  p.bwd_s = spans.of(Phase::Bwd).extent_s();
  p.optimizer_s = spans.of(Phase::Optimizer).extent_s();
  if (!(p.fwd_s > 0))
    throw Error(
        fmt::format("{}: no forward: no aten:: operator outside the backward, the optimizer and the data "
                    "loader{}",
                    path, p.device ? " launched a kernel" : ""));
  if (!(p.bwd_s > 0))
    throw Error(
        fmt::format("{}: no backward (no aten:: operator inside an 'autograd::engine::evaluate_function' "
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
      "{}: one step {} ({} {}); gemm {}{}, attn_matmul {}{}, norm {}{}, memory {}{}; forward {}, backward "
      "{}, "
      "optimizer {}",
      p.path, units::format_time(step), p.device ? p.kernels : p.ops,
      p.device ? "device kernels" : "CPU aten:: ops", units::format_time(p.cls(OpClass::Gemm)),
      share(p.cls(OpClass::Gemm)), units::format_time(p.cls(OpClass::AttnMatmul)),
      share(p.cls(OpClass::AttnMatmul)), units::format_time(p.cls(OpClass::Norm)),
      share(p.cls(OpClass::Norm)), units::format_time(p.cls(OpClass::Memory)), share(p.cls(OpClass::Memory)),
      units::format_time(p.fwd_s), units::format_time(p.bwd_s), units::format_time(p.optimizer_s));
}

}  // namespace vitsim::calibrate
