// The plan's explanation of its pick in numbers (plan_detail.hpp): the gradient reduction's regime with the
// pick's own figures, the bucket the model recommends and what NCCL would run (issue 25 item 6), and with
// --interval whether the runner-up overlaps the pick (issue 26 item 3). docs/plan.md "Communication advice"
// and "Intervals".
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "results/plan_detail.hpp"
#include "results/report_interval.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim {

namespace {

std::string t(double seconds) {
  return units::format_time(seconds);
}

// The link a what-if names: SimGrid's directions of a SPLITDUPLEX link ("n0-nic_UP") are one link.
std::string link_id(const std::string& link) {
  for (const char* suffix : {"_UP", "_DOWN"}) {
    const std::string s = suffix;
    if (link.size() > s.size() && link.compare(link.size() - s.size(), s.size(), s) == 0)
      return link.substr(0, link.size() - s.size());
  }
  return link;
}

// "27 buckets x 6 ring steps x 200 us = 32.4 ms" or NCCL's latency per call.
std::string latency_text(const CommRegime& c) {
  if (c.model == "ring")
    return fmt::format("{} x {} ring steps x {} = {}", count_noun(c.calls, "bucket"), c.ring_steps,
                       t(c.step_latency_s), t(c.latency_s));
  const double product = c.calls * c.call_latency_s;
  if (std::fabs(product - c.latency_s) <= 1e-9 * std::max(product, c.latency_s))
    return fmt::format("{} x {} (NCCL {}) = {}", count_noun(c.calls, "bucket"), t(c.call_latency_s),
                       c.nccl_choice, t(c.latency_s));
  return fmt::format("{}, {} each at the largest (NCCL {}): {}", count_noun(c.calls, "bucket"),
                     t(c.call_latency_s), c.nccl_choice, t(c.latency_s));
}

std::string regime_line(const CommRegime& c) {
  const std::string payload =
      c.payload_fraction < 1 ? fmt::format(", {:.0f}% of the wire bytes data", 100 * c.payload_fraction) : "";
  return fmt::format(
      "Gradient reduction ({} over {} ranks, {}): {}: {} of latency per step against {} of transfer (the "
      "largest bucket, {}, moves in {} at {} on link {}{}).",
      c.op, c.ranks, c.collective, c.latency_bound() ? "latency-bound" : "bandwidth-bound", latency_text(c),
      t(c.transfer_s), units::format_bytes(c.bucket_bytes), t(c.call_transfer_s),
      units::format_bandwidth(c.bottleneck_bw), link_id(c.bottleneck), payload);
}

// How the recommended bucket follows from the model: the ring's closed form with the pick's figures.
std::string bucket_formula(const CommRegime& c) {
  if (c.model == "ring")
    return fmt::format("n x a x B / {:g} = {} x {} x {} / {:g} = {}", c.share, c.ranks, t(c.step_latency_s),
                       units::format_bandwidth(c.bottleneck_bw), c.share,
                       units::format_bytes(c.recommended_bytes));
  return fmt::format("{}, where NCCL's latency is {:g}% of the ring's transfer",
                     units::format_bytes(c.recommended_bytes), 100 * c.share);
}

std::string bucket_line(const CommRegime& c) {
  const std::string share = fmt::format("{:g}%", 100 * c.share);
  if (!c.cap_moves)
    return "Buckets: this step reduces its gradients as one flat buffer whatever parallelism.bucket_size "
           "says (DeepSpeed's bf16 optimizer at ZeRO-0): no bucket size moves it.";
  if (!c.has_figures()) return "";
  if (c.call_latency_s <= c.share * c.call_transfer_s)
    return fmt::format(
        "Buckets: at {} a call's latency is {:.0f}% of its transfer, under {} already: a larger "
        "parallelism.bucket_size gains little.",
        units::format_bytes(c.bucket_bytes), 100 * c.call_latency_s / c.call_transfer_s, share);
  if (c.calls == 1)
    return "Buckets: the gradients go as one bucket already: no larger parallelism.bucket_size changes that; "
           "fewer ranks or more images per reduction (micro-batch, accumulation) lower latency's share.";
  if (c.recommended_bytes <= 0)
    return fmt::format("Buckets: no bucket up to {} keeps a call's latency under {} of its transfer here.",
                       units::format_bytes(kLargestBucketBytes), share);
  if (c.recommended_calls <= 1 || c.recommended_bytes >= c.gradient_bytes)
    return fmt::format(
        "Buckets: even one bucket of all the gradients ({}) keeps a call's latency over {} of its transfer "
        "(the model's bucket for {}: {}): parallelism.bucket_size={} cuts the calls from {} to 1 per step, "
        "leaving nothing to overlap with backward.",
        units::format_bytes(c.gradient_bytes), share, share, bucket_formula(c),
        bucket_setting(c.gradient_bytes), c.calls);
  return fmt::format(
      "Buckets: parallelism.bucket_size={} (now {}) keeps a call's latency under {} of its transfer ({}): {} "
      "-> {} calls per step.",
      bucket_setting(c.recommended_bytes), bucket_setting(c.cap_bytes), share, bucket_formula(c), c.calls,
      c.recommended_calls);
}

std::string collective_line(const CommRegime& c) {
  if (c.collective == "auto")
    return c.nccl_choice.empty() ? ""
                                 : fmt::format(
                                       "Collective: auto runs what NCCL picks ({} at the largest bucket): no "
                                       "collective setting to suggest.",
                                       c.nccl_choice);
  if (c.nccl_would.empty()) return "";
  if (c.nccl_same)
    return fmt::format(
        "Collective: NCCL {} would run {} for these buckets too: '{}' is NCCL's own pick here, no collective "
        "setting to suggest.",
        c.nccl_would.substr(0, c.nccl_would.find(' ')), c.nccl_would.substr(c.nccl_would.find(' ') + 1),
        c.collective);
  return fmt::format(
      "Collective: NCCL {} would run {} for the largest bucket (its estimate {} per call{}): "
      "parallelism.collective=auto runs NCCL's choice.",
      c.nccl_would.substr(0, c.nccl_would.find(' ')), c.nccl_would.substr(c.nccl_would.find(' ') + 1),
      t(c.nccl_estimate_s),
      c.named_estimate_s > 0 ? fmt::format(" against {} for '{}'", t(c.named_estimate_s), c.collective) : "");
}

}  // namespace

std::string comm_term_advice(const PlanPoint& top, const std::string& lead, double percent) {
  const CommRegime& c = top.comm;
  if (!c.known()) return "";
  const std::string links =
      c.has_figures() && !c.latency_bound()
          ? fmt::format(", or faster links (--what-if link:{}:bandwidth=...)", link_id(c.bottleneck))
          : "";
  return fmt::format(
      "{}: exposed communication ({:.0f}%): {}a larger micro-batch or accumulation (fewer gradient "
      "reductions per image){}; the collective and its buckets: the Gradient reduction lines.",
      lead, percent, overlap_advice(top, ""), links);
}

std::string overlap_advice(const PlanPoint& top, const std::string& buckets) {
  if (top.overlap) return "";
  const bool deepspeed = std::any_of(
      top.result.notes.begin(), top.result.notes.end(),
      [](const std::string& n) { return n.find("deepspeed framework step") != std::string::npos; });
  if (deepspeed && top.zero == 0)
    return fmt::format(
        "ZeRO-1 or above with overlap (parallelism.zero=1 and parallelism.overlap=true{}: DeepSpeed's ZeRO-0 "
        "reduces after backward), ",
        buckets);
  return fmt::format("overlap with backward (parallelism.overlap=true{}), ", buckets);
}

void explain_comm(const PlanPoint& top, std::vector<std::string>& out) {
  const CommRegime& c = top.comm;
  if (!c.known()) return;
  const ReportPoint& r = top.result;
  const Breakdown& b = r.breakdown_s;
  const double step = r.step_time_s.mean;
  if (r.bound != "exposed_comm" && !(step > 0 && b.comm_exposed / step >= kAdviceShare)) {
    out.push_back(fmt::format(
        "Collective and buckets: exposed communication is {:.1f}% of the step ({} of {} in flight), so a "
        "collective or bucket setting can shorten it by at most that; none is suggested.",
        pct(b.comm_exposed, step), t(b.comm_exposed), t(b.comm_total)));
    return;
  }
  if (c.has_figures())
    out.push_back(regime_line(c));
  else
    out.push_back(fmt::format(
        "Gradient reduction ({} over {} ranks, {}): {} of up to {} per step; per-call latency figures are "
        "derived for ring and auto.",
        c.op, c.ranks, c.collective, count_noun(c.calls, "bucket"), units::format_bytes(c.bucket_bytes)));
  for (const std::string& line : {bucket_line(c), collective_line(c)})
    if (!line.empty()) out.push_back(line);
}

namespace {

// The objective's interval of a point with one, low to high in the objective's own unit, and its text.
struct ObjectiveInterval {
  double low = 0, high = 0;
  std::string text;
};
// The public corpus' band (an uncalibrated point, docs/predict.md "The model's own error") is left out: it
// scales every candidate's time by the same ratios, since rows of one origin (one software stack) move
// together (docs/benchmarks.md "The model's error band, origin by origin"), so it cannot reorder them.
// ASSUMPTION: that holds for candidates on different GPU types too; the corpus has too few rows per origin
// and GPU to measure it.
ObjectiveInterval objective_interval(const PlanResult& plan, const PlanPoint& p) {
  PointInterval v = p.result.interval;
  if (v.corpus.rows > 0) {
    v.epoch_low_s = v.corpus.figures_epoch_low_s;
    v.epoch_high_s = v.corpus.figures_epoch_high_s;
    v.step_low_s = v.corpus.figures_step_low_s;
    v.step_high_s = v.corpus.figures_step_high_s;
  }
  const double epoch = p.result.epoch_time_s;
  ObjectiveInterval o;
  if (plan.objective == "throughput") {
    o.low = v.step_high_s > 0 ? p.global_batch / v.step_high_s : 0;
    o.high = v.step_low_s > 0 ? p.global_batch / v.step_low_s : 0;
    o.text = fmt::format("{:.0f} .. {:.0f} images/s", o.low, o.high);
  } else if (plan.objective == "cost") {
    o.low = epoch > 0 ? p.cost * v.epoch_low_s / epoch : 0;
    o.high = epoch > 0 ? p.cost * v.epoch_high_s / epoch : 0;
    o.text = fmt::format("{} .. {}", cost_text(plan, o.low), cost_text(plan, o.high));
  } else {
    o.low = v.epoch_low_s * plan.epochs;
    o.high = v.epoch_high_s * plan.epochs;
    o.text = fmt::format("{} .. {}", t(o.low), t(o.high));
  }
  return o;
}

std::string objective_noun(const PlanResult& plan) {
  return plan.objective == "throughput" ? "throughput" : plan.objective == "cost" ? "cost" : "time to train";
}

}  // namespace

void explain_intervals(const PlanResult& plan, const PlanPoint& top, std::vector<std::string>& out) {
  int with = 0;
  const PlanPoint* second = nullptr;
  for (const auto& p : plan.points) {
    if (p.rank > 0 && p.result.interval.samples > 0) ++with;
    if (p.rank == 2) second = &p;
  }
  const PointInterval& v = top.result.interval;
  if (with == 0 || v.samples == 0) return;
  out.push_back(fmt::format(
      "Intervals ({} of the epoch over the platform's {}, {} samples, seed {}): on the top {} by central "
      "value (--interval-top N for more).",
      quantile_range(v), count_noun(v.figures, "ranged figure"), v.samples, v.seed, with));
  if (!second || second->result.interval.samples == 0) return;
  if (plan.objective == "energy") {
    out.push_back("The intervals are of time; the ranking by energy is not held against them.");
    return;
  }
  const ObjectiveInterval a = objective_interval(plan, top), b = objective_interval(plan, *second);
  std::string both =
      fmt::format("{} {}: #1 {}, #2 {}", objective_noun(plan), quantile_range(v), a.text, b.text);
  if (v.corpus.rows > 0)
    both += fmt::format(
        "; of the figures alone: the public corpus' band of the model's own error (x{:.3f} .. x{:.3f}, "
        "uncalibrated) moves both alike",
        v.corpus.ratio_low, v.corpus.ratio_high);
  if (std::max(a.low, b.low) > std::min(a.high, b.high)) {
    out.push_back(fmt::format("The pick stays ahead of the runner-up across their intervals ({}).", both));
    return;
  }
  if (top.result.sensitivity.empty()) {
    out.push_back(fmt::format(
        "The pick and the runner-up overlap within their intervals ({}): the platform states no ranged "
        "figure, so the two tie on its stated values.",
        both));
    return;
  }
  // The measured runs' spread (--runs) is a factor every candidate's run meets alike: it widens both
  // intervals without reordering them, so the figure to measure first is the widest of the others.
  const auto& sens = top.result.sensitivity;
  const auto f = std::find_if(sens.begin(), sens.end(),
                              [](const FigureSensitivity& e) { return e.figure != "measured runs"; });
  std::string runs;
  if (f != sens.begin())
    runs = fmt::format(
        "; the widest part is the measured runs' spread ({}, {}), which a run of either meets "
        "alike: it does not reorder them",
        sens.front().where, sens.front().range);
  if (f == sens.end()) {
    out.push_back(
        fmt::format("The pick and the runner-up overlap within their intervals ({}){}; the platform "
                    "states no ranged figure, so the two tie on its stated values.",
                    both, runs));
    return;
  }
  out.push_back(fmt::format(
      "The pick and the runner-up overlap within their intervals ({}){}: measure {} first ({}, {}: "
      "it moves the "
      "pick's epoch by {}; {}).",
      both, runs, f->figure, f->where, f->range, t(f->swing_s()),
      f->measure.empty() ? "no command measures it" : "measure: " + f->measure));
}

}  // namespace vitsim
