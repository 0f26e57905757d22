#pragma once
// Calibration files ("schema": "vitsim.calibration/2"): what `vitsim calibrate` measured on real nodes.
// Schema 2 (affine batch curves, op-class efficiencies in "op_models") replaced 1, which is refused with
// one line asking to measure again.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vitsim/core/model/ops.hpp"
#include "vitsim/core/model/vit.hpp"

namespace vitsim {

inline constexpr const char* kCalibrationSchema = "vitsim.calibration/2";

struct LayerTime {
  std::string name;  // as in core's layer table: "patch_embed", "block0.attn", ...
  double fwd_s = 0;
  double bwd_s = 0;
};

struct ComputePoint {
  int micro_batch = 0;
  double fwd_s = 0;
  double bwd_s = 0;
  double optimizer_s = 0;
  std::vector<LayerTime> layers;  // optional per-layer split
};

// What a data-parallel step costs at its gradient sync beyond the all-reduce the platform's links carry,
// measured by calibrate's step phase (the trainer's own steps on `ranks` ranks at each calibration
// micro-batch): the wait for the slowest rank (the ranks' per-step jitter, which grows with the compute) and
// the first collective's wake-up after the compute. Per gradient sync: fixed_s + per_compute x the rank's
// forward + backward time of the step. ranks 0: not measured (the simulator then adds nothing).
struct SyncCalibration {
  int ranks = 0;
  double fixed_s = 0;
  double per_compute = 0;
};

// The span a measured figure took over calibrate's rounds (issue 26: a measured figure's spread from its
// repeats), as factors on the figure kept: low <= 1 <= high, low > 0, and why ("measured: ..."). The
// interval sampler (sim/predict/interval.hpp figure_at) draws a factor in [low, high] per device type, half
// the draws each side of the figure kept (the median round's), and applies it to every rank of that type.
// JSON: {"low": .., "high": .., "why": ".."}.
struct MeasuredSpan {
  double low = 1, high = 1;
  std::string why;
  bool empty() const { return why.empty(); }
};

// A figure calibrate measured and where it comes from ("measured: ..."); `why` empty: not measured.
struct MeasuredFigure {
  double value = 0;
  std::string why;
  // Optional: the spread of what was measured, low <= value <= high (JSON "low", "high"; absent in older
  // files and where one figure was measured: then low == high == 0). predict --interval samples it.
  double low = 0, high = 0;
  bool empty() const { return why.empty(); }
  bool ranged() const { return !empty() && high > low; }
};

// How one phase's rounds agreed (issue 37 item 4, docs/calibrate-validate.md "Noisy rounds"): calibrate
// interleaves its rounds over time, takes the spread of each phase's rounds (calibrate.hpp round_spread), and
// repeats a phase whose spread exceeds `limit` (at most a stated number of times). JSON: {"rounds": 3,
// "repeats": 0, "spread": 0.04, "limit": 0.1, "noisy": false}. rounds 0: the phase did not run.
struct RoundCheck {
  int rounds = 0;      // rounds measured in all, the repeats among them
  int repeats = 0;     // rounds added because the spread exceeded the limit
  double spread = 0;   // the spread after the last round (worst over the ranks and micro-batches)
  double limit = 0;    // the limit it was held to
  bool noisy = false;  // spread > limit after the repeats
  bool empty() const { return rounds == 0; }
};
// The round checks of the phases with rounds (JSON "rounds": {"compute": .., "step": ..}).
struct RoundChecks {
  RoundCheck compute, step;
  bool empty() const { return compute.empty() && step.empty(); }
};

struct DeviceCalibration {
  std::string device_type;  // matches the platform's gpu_model
  ViTConfig model;          // shape measured (compared field by field, preset name ignored)
  Precision precision = Precision::FP32;
  double peak_flops = 0;  // the device's peak at that precision and memory bandwidth, for cross-device
  double mem_bw = 0;      // scaling by roofline (0 = unknown: no cross-device use)
  std::vector<ComputePoint> points;  // sorted by micro_batch
  SyncCalibration sync;              // optional ("sync"): calibrate's step phase
  // Optional ("spans": {"compute": .., "sync": ..}): the compute span scales every measured forward and
  // backward time of the device (points and layers); the sync span, the sync wait (fixed_s and
  // per_compute). Absent (older files, a single round): nothing of the calibration is sampled.
  MeasuredSpan compute_span, sync_span;
  // Optional ("occupancy": {"busy_ranks": 2, "alone_factor": 0.96}): calibrate's occupancy phase, forward +
  // backward of one rank alone over the same with `busy_ranks` ranks of the host busy (the figures above).
  // A point with fewer busy ranks per host runs its compute at alone_factor (1 rank) up to 1 (busy_ranks),
  // linear between. busy_ranks 0: not measured.
  int occupancy_busy_ranks = 0;
  double occupancy_alone_factor = 1;
  // Optional ("step_cv": {"value": 0.012, "low": 0.008, "high": 0.02, "why": "measured: ..."}, low and high
  // optional: the least and most of the ranks' and micro-batches' cvs): the coefficient of variation of one
  // rank's step compute (forward + backward) from step to step, measured by calibrate's compute rounds: the
  // platform's gpu_step_cv for this device where the calibration has no sync figures (docs/model.md
  // "Stragglers"). value in [0, 1), as the platform property.
  MeasuredFigure step_cv;
  // Optional ("rounds"): how the run's rounds agreed, per phase; absent in older files.
  RoundChecks rounds;
  // Not in the file: what an interval's sample scaled the figures by ("x0.1 by its spans.compute.low"), for
  // the messages of a point that the scaled figures make impossible.
  std::string scaled_by;
  // The factor on this device's calibrated compute with `busy` ranks per host (1 when not measured or
  // busy >= occupancy_busy_ranks).
  double occupancy_factor(int busy) const;
};

// The op model's figures fitted for one device type and precision (schema 2, "op_models"): what carries
// from the calibrated ViT shape to any other (core/model/ops.hpp). `figures.device_type` names the device.
struct OpModelCalibration {
  Precision precision = Precision::FP32;
  DeviceFigures figures;
  int samples = 0;              // op measurements the fit used
  double max_rel_residual = 0;  // largest |fit - measured| / measured over them
  double median_rel_residual = 0;
};

struct LinkCalibration {
  std::string link_class;  // "intra_node", "inter_node", or a link name
  double bandwidth = 0;    // bytes/s, fitted
  double latency = 0;      // s per step, fitted
  int ranks = 0;           // ranks of the all-reduce it was fitted from
};

struct LoaderCalibration {
  std::string dataset;
  int resize = 0;
  double images_per_s_per_worker = 0;
};

struct Calibration {
  std::string path;
  std::map<std::string, std::string> provenance;  // host, date, versions, command
  std::vector<DeviceCalibration> devices;
  std::vector<OpModelCalibration> op_models;
  std::vector<LinkCalibration> links;
  std::vector<LoaderCalibration> loaders;
  double h2d_pinned_bw = 0;  // bytes/s (0 = not measured)
  double h2d_pageable_bw = 0;

  const DeviceCalibration* find(const std::string& device_type, const ViTConfig& m, Precision p) const;
  // Any device measured on this model and precision with a known roofline (for cross-device scaling).
  const DeviceCalibration* find_any(const ViTConfig& m, Precision p) const;
  const OpModelCalibration* op_model(const std::string& device_type, Precision p) const;
  const LoaderCalibration* loader(const std::string& dataset, int resize) const;
  // The step phase's sync figures of a device type (any shape or precision measured with one), or nullptr.
  const SyncCalibration* sync(const std::string& device_type) const;
  // The measured step-to-step compute variability of a device type (any shape or precision), or nullptr.
  const MeasuredFigure* step_cv(const std::string& device_type) const;
};

// A calibration repeated over time (`calibrate --append` on a device already in the file): `fresh`'s compute
// span widened to take in `earlier`'s figures against its own (forward + backward at each micro-batch both
// measured, else at fresh's micro-batches by earlier's affine fit), and earlier's span ends carried over by
// their mean ratio, so that repeated calibrations accumulate: what the machine's speed did between them,
// which no round of one calibration sees. Nothing when fresh has no compute span or earlier no points.
void widen_by_earlier(DeviceCalibration& fresh, const DeviceCalibration& earlier);

// `c` with device `device`'s measured forward and backward times (whole and per layer) times `compute`
// and its sync figures times `sync`: one sample of the interval (sim/predict/interval.hpp).
Calibration with_span_factors(const Calibration& c, size_t device, double compute, double sync);

// The calibration's figures predict and plan do not use, in one line for the points' notes ("" when none):
// its link entries (calibrate's all-reduce fit, `--from-nccl-tests`), which the simulator does not read:
// links come from the platform file (`calibrate --emit-platform` writes the fit into one). A table with and
// without such an entry was byte-identical and said nothing (issue 27).
std::string unused_calibration_note(const Calibration& c);

bool same_shape(const ViTConfig& a, const ViTConfig& b);
Calibration read_calibration(const std::string& path);  // throws Error naming the file and key
// The same checks on a calibration's text; `path` names it in errors.
Calibration read_calibration_text(const std::string& text, const std::string& path);
std::string calibration_to_json(const Calibration& c);  // pretty, deterministic
// The measured times at another micro-batch. Each of fwd, bwd and every per-layer fwd/bwd is fitted
// separately by t(b) = fixed + per_sample x b over all measured points (least squares on relative
// residuals: each point weighted by 1/t^2, so small and large micro-batches count alike), clamped at
// 1e-12 s. One measured micro-batch: proportional through the origin, t(b) = t1 x b / b1. The optimizer
// time is the mean over the points (it does not depend on the batch). Per-layer times come from the
// points that list layers, when they all list the same names (else `layers` is empty).
struct Interpolated {
  ComputePoint point;
  bool single_point = false;               // one measured micro-batch: scaled proportionally
  bool extrapolated = false;               // micro_batch outside [measured_min, measured_max]
  double fit_max_rel_residual = 0;         // largest |fit - measured| / measured of the fwd and bwd fits
  int measured_min = 0, measured_max = 0;  // the measured micro-batch range
};
Interpolated interpolate_with_notes(const DeviceCalibration& d,
                                    int micro_batch);                   // throws Error without points
ComputePoint interpolate(const DeviceCalibration& d, int micro_batch);  // interpolate_with_notes(d, b).point
// "" when micro_batch was measured or lies inside the measured range with 2+ micro-batches; else one line:
// "compute on cpu at micro-batch 512: extrapolated beyond the measured 48..384 (affine fit)",
// "compute on cpu at micro-batch 32: one measured point (micro-batch 64): scaled proportionally".
std::string interpolation_note(const DeviceCalibration& d, int micro_batch);

}  // namespace vitsim
