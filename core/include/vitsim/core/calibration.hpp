#pragma once
// Calibration files ("schema": "vitsim.calibration/1"): what `vitsim calibrate` measured on real nodes.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vitsim/core/vit.hpp"

namespace vitsim {

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

struct DeviceCalibration {
  std::string device_type;  // matches the platform's gpu_model
  ViTConfig model;          // shape measured (compared field by field, preset name ignored)
  Precision precision = Precision::FP32;
  double peak_flops = 0;    // the device's peak at that precision and memory bandwidth, for cross-device
  double mem_bw = 0;        // scaling by roofline (0 = unknown: no cross-device use)
  std::vector<ComputePoint> points;  // sorted by micro_batch
};

struct LinkCalibration {
  std::string link_class;   // "intra_node", "inter_node", or a link name
  double bandwidth = 0;     // bytes/s, fitted
  double latency = 0;       // s per step, fitted
  int ranks = 0;            // ranks of the all-reduce it was fitted from
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
  std::vector<LinkCalibration> links;
  std::vector<LoaderCalibration> loaders;
  double h2d_pinned_bw = 0;    // bytes/s (0 = not measured)
  double h2d_pageable_bw = 0;

  const DeviceCalibration* find(const std::string& device_type, const ViTConfig& m, Precision p) const;
  // Any device measured on this model and precision with a known roofline (for cross-device scaling).
  const DeviceCalibration* find_any(const ViTConfig& m, Precision p) const;
  const LoaderCalibration* loader(const std::string& dataset, int resize) const;
};

bool same_shape(const ViTConfig& a, const ViTConfig& b);
Calibration read_calibration(const std::string& path);  // throws Error naming the file and key
std::string calibration_to_json(const Calibration& c);   // pretty, deterministic
// Interpolates (linearly in micro-batch; beyond the ends, along the nearest two points; proportional
// through the origin with one point) the measured fwd/bwd/optimizer times.
ComputePoint interpolate(const DeviceCalibration& d, int micro_batch);

}  // namespace vitsim
