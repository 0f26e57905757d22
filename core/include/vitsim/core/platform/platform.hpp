#pragma once
// Facts vitsim needs from a SimGrid platform file, read without SimGrid (pugixml): which hosts are
// GPUs, how they group into nodes, and each GPU's and node's figures, taken from <prop> elements.
//
// Conventions (docs/platforms.md):
// - every <cluster> is one node; its hosts (prefix + radical + suffix) are that node's GPUs;
//   a <host> outside a cluster with a gpu_model property is a one-GPU node of its own.
// - properties on a <cluster>, or on a <zone> enclosing it, apply to every GPU within (SimGrid passes
//   cluster props to each host; vitsim also inherits zone props); a <host>'s own props win.
// - the top zone's routing must connect every pair of nodes: with routing="Full", a <zoneRoute> per pair.
// - transports (core/platform/transport.hpp): a <link> with a `transport` prop (its own or an enclosing
// zone's: tcp, ib,
//   nvlink, pcie_host, pcie_p2p) and its settings (tcp_mtu, nccl_socket_nthreads, nccl_nsocks_perthread,
//   socket_bw, tcp_stack_latency, ib_mtu, ib_stack_latency, staging_bw); a cluster's `intranode_transport`
//   prop (nvlink, pcie_host, pcie_p2p) is the transport of its backbone (the GPU-to-GPU path inside the
//   node), with `staging_bw` for pcie_host.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/model/ops.hpp"
#include "vitsim/core/model/vit.hpp"
#include "vitsim/core/platform/figure_range.hpp"
#include "vitsim/core/platform/transport.hpp"

namespace vitsim {

struct FlatPlatform;  // core/platform/platform_flat.hpp

struct GpuFacts {
  std::string model;           // gpu_model
  double flops_fp32 = 0;       // gpu_flops_fp32 (FLOP/s)
  double flops_fp16 = 0;       // gpu_flops_fp16 (tensor-core dense); = fp32 when the GPU has no fast fp16
  double flops_bf16 = 0;       // gpu_flops_bf16; = fp16 figure when not given
  double mem_bw = 0;           // gpu_mem_bw (bytes/s)
  double mem_bytes = 0;        // gpu_mem
  double efficiency = 0;       // gpu_efficiency (legacy): fraction of peak a training step reaches (0..1];
                               // = gemm_efficiency when only gpu_gemm_efficiency is given
  double kernel_overhead = 0;  // gpu_kernel_overhead: device-side fixed cost per kernel (s)
  double reserved_bytes = 0;   // gpu_reserved: CUDA context and workspaces (bytes)
  int sm_count = 1;            // gpu_sm_count: streaming multiprocessors (waves of GEMM tiles)
  int tile_m = 128;            // gpu_gemm_tile "MxN": output tile of a GEMM kernel (rows)
  int tile_n = 128;            //   ... (columns)
  double gemm_efficiency = 0;  // gpu_gemm_efficiency (0..1]: fraction of the precision's peak a large GEMM
                               // whose tiles fill every wave reaches; = gpu_efficiency when absent
  double attn_efficiency =
      0;  // gpu_attn_efficiency (0..1]: same for attention's batched matmuls; = gemm_efficiency
  double mem_efficiency = 1;  // gpu_mem_efficiency (0..1]: fraction of gpu_mem_bw memory-bound ops reach
  double gemm_k_half = 0;  // gpu_gemm_k_half (>= 0): K at which a GEMM reaches half its efficiency (0 = off)
  double sync_overhead = 0;  // gpu_sync_overhead: cost of one host<-device synchronisation (s)
  double host_op_overhead =
      0;  // host_op_overhead: host time to issue one op (framework dispatch + launch) (s)
  double power_busy_w =
      0;  // gpu_power_busy ("700W"): drawn while a kernel runs (core/model/energy.hpp); 0 = not stated
  double power_idle_w =
      0;  // gpu_power_idle: drawn otherwise; stated together with gpu_power_busy, not above it
  // gpu_step_cv [0, 1): the coefficient of variation of a rank's step compute (forward + backward) from
  // rank to rank and step to step; the synchronous step waits for the slowest of its ranks (sim/src/point/
  // rank_setup.cpp, docs/model.md "Stragglers"). 0 = ranks in lockstep.
  double step_cv = 0;
  bool async = true;  // device_kind: "gpu" (ops queued asynchronously) or "cpu" (false: ops run on the host)
  // What NCCL's tuner reads (sim/src/collectives/nccl_platform.cpp), each as the file states it or, where it
  // does not, from gpu_model's catalogue entry (data/catalogue.json); empty or 0 where neither says.
  std::string arch;    // gpu_arch: a name of the catalogue's architectures ("hopper")
  std::string link;    // gpu_link: "none", "nvlink" or "nvswitch"
  double link_bw = 0;  // gpu_link_bw (bytes/s per direction); with link nvlink or nvswitch
  int pcie_gen = 0;    // gpu_host_link "pcie<gen>_x<lanes>": PCIe generation
  int pcie_lanes = 0;  //   ... and lanes
  double peak_flops(Precision p) const;
};

struct NodeFacts {
  std::string name;               // the cluster id (or host name for a lone host)
  std::vector<std::string> gpus;  // SimGrid host names, in radical order
  int cpu_cores = 1;              // cpu_cores
  double loader_bw = 0;           // loader_bw: bytes of output tensor one loader worker produces per second
  double loader_image_overhead = 0;  // loader_image_overhead: fixed CPU time per image per worker (s)
  double h2d_pageable_bw = 0;        // h2d_pageable_bw: pageable host->device bandwidth (0 = same as pinned)
  Origin origin;
};

struct PlatformFacts {
  std::string path;
  std::vector<NodeFacts> nodes;              // file order
  std::map<std::string, GpuFacts> gpu;       // host name -> facts
  std::map<std::string, std::string> props;  // top-level <zone> props (price etc.)
  std::vector<LinkFacts> links;  // links that state a transport (file order); others run as written
  // The ranges the file states (core/platform/figure_range.hpp), each checked: by element in file order, by
  // key within one; empty in a file without ranges, which reads exactly as before them.
  std::vector<FigureRange> ranges;
  bool link_profiles =
      false;  // some link's bandwidth, latency or state follows a profile (a *_file, <trace>)
  // A flat-star file (core/platform/platform_flat.hpp: is_flat_layout_text on its first 1 MiB), which vitsim
  // builds in code instead of SimGrid's parser; `flat`, its description once the simulator has read it (its
  // platform check, before the points fork), so that nothing reads the file again; null until then and for
  // any other file.
  bool flat_layout = false;
  std::shared_ptr<const FlatPlatform> flat;
  const NodeFacts& node(const std::string& name) const;  // throws listing valid names
};

PlatformFacts read_platform_facts(const std::string& path);  // throws Error with file:line

// The op model's figures (core/model/ops.hpp) of a platform GPU at a precision: the file's gpu_* attributes
// under the op model's names, the peak that precision's GEMMs run at (GpuFacts::peak_flops).
DeviceFigures device_figures(const GpuFacts& g, Precision p);
// The same on text already in memory (a what-if's edited copy, a fuzzer's input): `path` names it in
// messages. Checks first what SimGrid 3.32's parser would abort on (docs/platforms.md; docs/errors.md:
// limits).
PlatformFacts read_platform_text(const std::string& path, const std::string& text);

// A figure at another value (the interval's ends and samples, sim/predict/interval.hpp): every element whose
// `KEY.range` prop reads `range` word for word states KEY as `value`, its own KEY prop's value replaced or
// the prop added, as in a copy of the file edited so (sim/predict/interval.hpp platform_with_texts).
struct FigureValue {
  std::string key;    // "gpu_gemm_efficiency"
  std::string range;  // the range prop's value as written (FigureRange::raw)
  std::string value;  // the value as written ("0.494")
};
// A platform file parsed once and read again with figures at other values (`with`): what read_platform_text
// reads from a copy of the file edited so, without writing and parsing one (the interval's copies: parsed in
// the parent, each copy read in its own forked child, which inherits the parsed document). `text` is a file
// read by read_platform_text before: its structure (what SimGrid would abort on) is not checked again; lines
// in messages are the file's own.
class PlatformDocument {
 public:
  PlatformDocument(const std::string& path, const std::string& text);  // throws Error: malformed XML
  ~PlatformDocument();
  PlatformDocument(const PlatformDocument&) = delete;
  PlatformDocument& operator=(const PlatformDocument&) = delete;
  PlatformFacts with(const std::vector<FigureValue>& values);

 private:
  struct Parsed;
  std::unique_ptr<Parsed> parsed_;
};

}  // namespace vitsim
