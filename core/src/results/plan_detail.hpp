#pragma once
// Internal to core's plan (plan.cpp: ranking and explanation; plan_table.cpp: table and CSV; plan_advice.cpp:
// the gradient reduction in numbers and the intervals' verdict).
#include <string>
#include <vector>

#include "vitsim/core/results/plan.hpp"

namespace vitsim {

// "2 nodes x 8 GPUs, micro-batch 32, accumulation 1, ZeRO-3, fp32, auto all-reduce, overlap on"
std::string settings_text(const PlanPoint& p);
// "$1.27" with a price per GPU-hour, else "1.27 GPU-h"
std::string cost_text(const PlanResult& plan, double cost);
double pct(double part, double whole);  // 100 part / whole; 0 when whole is not positive

// Below this share of the step, exposed communication gets no advice of its own (explain_advice: the terms
// over a fifth of the step, or the one that bounds it).
inline constexpr double kAdviceShare = 0.2;

// The top pick's gradient reduction in numbers (core/model/comm_regime.hpp): its regime with the point's
// figures, the bucket the model recommends, and what NCCL would run against the named collective; or, where
// exposed communication is too small a share of the step to matter, that no collective or bucket setting
// would move it. Nothing when the pick has no gradient reduction (one rank).
void explain_comm(const PlanPoint& top, std::vector<std::string>& out);
// The advice for exposed communication with the collective and bucket settings left to explain_comm
// ("" when the pick has no figures for it: the generic advice stands).
// What turns overlap on for the pick when it is off: parallelism.overlap=true, or, where its framework
// cannot overlap at its stage (DeepSpeed's ZeRO-0 reduces after backward: its point's notes name the
// deepspeed framework step), ZeRO-1 or above with overlap. "" when overlap is on.
std::string overlap_advice(const PlanPoint& top, const std::string& buckets);
std::string comm_term_advice(const PlanPoint& top, const std::string& lead, double percent);
// With plan --interval: which candidates have an interval, and whether the pick's overlaps the runner-up's
// (then the figure to measure first, from the pick's sensitivity).
void explain_intervals(const PlanResult& plan, const PlanPoint& top, std::vector<std::string>& out);

}  // namespace vitsim
