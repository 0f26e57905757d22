// The NCCL versions the tuner model knows: each release's constants, read at its tag in NVIDIA/nccl
// (https://github.com/NVIDIA/nccl), every table with its file:line there (docs/sources.md "NCCL's tuner").
// A new version is one more entry: its tables at the new tag, and its rules (NcclRules) when the formulas
// of tuning.cc or enqueue.cc changed.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/model/nccl_tuning.hpp"

namespace vitsim {
namespace {

using A = NcclAlgo;

// treeCorrectionFactor (powers of two from 64 B to 256 MB, LL / LL128 / Simple): unchanged from 2.18 to
// 2.23: v2.18.3-1 src/graph/tuning.cc:375-379, v2.23.4-1 src/graph/tuning.cc:435-439.
constexpr std::array<std::array<double, 23>, kNcclProtos> kTreeCorrection = {{
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9},
}};

// perChMaxRingLL128Bws, perChMaxTreeLL128Bws, perChMaxTreeBws [Volta, Ampere, Hopper, Blackwell][1 node,
// 2, more]: unchanged from 2.18 to 2.27 but for Blackwell's row, twice Hopper's, added in 2.27:
// v2.18.3-1 and v2.23.4-1 src/graph/tuning.cc:92-106, v2.27.7-1 src/graph/tuning.cc:172-189. Before 2.27
// the 4th row is not read (arch_rows 3: Blackwell takes Hopper's row).
constexpr NcclVersion::ArchNodes kRingLL128 = {
    {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {2 * 36.7, 2 * 36.7, 2 * 36.7}}};
constexpr NcclVersion::ArchNodes kTreeLL128 = {
    {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {2 * 36.7, 2 * 36.7, 2 * 29.0}}};
constexpr NcclVersion::ArchNodes kTreeBw = {
    {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {2 * 38.7, 2 * 41.4, 2 * 36.0}}};

// search.cc's speed arrays (GB/s per channel the search tries, highest first), non-Hopper:
// v2.18.3-1 src/graph/search.cc:789-790 and v2.23.4-1 src/graph/search.cc:930-931 (the same).
const std::vector<double> kSpeedIntra = {40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0,
                                         9.0,  7.0,  6.0,  5.0,  4.0,  3.0};
const std::vector<double> kSpeedInter = {48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0,
                                         7.0,  6.0,  5.0,  4.0,  3.0,  2.4,  1.2,  0.24, 0.12};

NcclVersion v2_18() {
  NcclVersion v;
  v.name = "2.18";
  v.tag = "v2.18.3-1";
  v.rules = NcclRules::V2_18;
  // ncclAlgoStr: v2.18.3-1 src/init.cc:38 (no PAT).
  v.algos = {A::Tree, A::Ring, A::CollNetDirect, A::CollNetChain, A::Nvls, A::NvlsTree};
  // baseLat (us) [Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree][LL, LL128, Simple]:
  // v2.18.3-1 src/graph/tuning.cc:56-59. Tree/Simple is 0 there.
  v.base_lat_us = {
      {{6.8, 14.0, 0}, {6.6, 14.0, 8.4}, {6.8, 14.0, 0}, {6.8, 14.0, 0}, {0, 0, 23.0}, {0, 0, 23.0}}};
  // hwLat (us) [NVLink, PCI, network]: v2.18.3-1 src/graph/tuning.cc:65-78.
  v.hw_lat_us = {{
      {{{.6, 1.25, 4}, {.6, 1.9, 3.4}, {0, 0, 8.0}, {0, 0, 4.75}, {0, 0, 0}, {0, 0, 0}}},
      {{{1.0, 1.9, 6}, {1.0, 2.5, 5.7}, {0, 0, 8.0}, {0, 0, 8.0}, {0, 0, 0}, {0, 0, 0}}},
      {{{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 10.7}, {0, 0, 14}, {0, 0, 18}, {0, 0, 19}}},
  }};
  // llMaxBws [Volta-N1 or Intel, Ampere-N1 or AMD, Hopper-N1 or AMD][1 node, 2, more]:
  // v2.18.3-1 src/graph/tuning.cc:86-90.
  v.ll_max_bw = {{{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {87.7, 22.5, 19.0}, {87.7, 22.5, 19.0}}};
  v.ring_ll128_bw = kRingLL128;
  v.tree_ll128_bw = kTreeLL128;
  v.tree_bw = kTreeBw;
  v.tree_correction = kTreeCorrection;
  // SMxx_NVLINK_BW and PCI_BW (GB/s per link): v2.18.3-1 src/graph/topo.h:14-19.
  v.nvlink_bw_sm60 = 18.0;
  v.nvlink_bw_sm70 = 20.0;
  v.nvlink_bw_sm80 = 20.0;
  v.nvlink_bw_sm90 = 20.0;
  v.nvlink_bw_sm86 = 12.0;
  v.pci_bw = 12.0;
  v.speed_intra = kSpeedIntra;
  v.speed_inter = kSpeedInter;
  // sm90SpeedArrayIntra/Inter: v2.18.3-1 src/graph/search.cc:794-795.
  v.sm90_speed_intra = {60.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0};
  v.sm90_speed_inter = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 20.0, 17.5,
                        15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  // NCCL_NVLS_NCHANNELS default: v2.18.3-1 src/transport/nvls.cc:231.
  v.nvls_channels = 16;
  return v;
}

NcclVersion v2_23() {
  NcclVersion v;
  v.name = "2.23";
  v.tag = "v2.23.4-1";
  v.rules = NcclRules::V2_23;
  // ncclAlgoStr: v2.23.4-1 src/init.cc:40 (PAT added).
  v.algos = {A::Tree, A::Ring, A::CollNetDirect, A::CollNetChain, A::Nvls, A::NvlsTree, A::Pat};
  // baseLat (us): v2.23.4-1 src/graph/tuning.cc:56-59. Tree/Simple 8.4; CollNet and NVLS 0 (their
  // latency moved into hwLat). PAT has no row: its latency is a formula (tuning.cc:276-281).
  v.base_lat_us = {
      {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}}};
  // hwLat (us) [NVLink, PCI, network]: v2.23.4-1 src/graph/tuning.cc:65-78.
  v.hw_lat_us = {{
      {{{.6, 1.25, 4.0}, {.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0, 0, 0}}},
      {{{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}}},
      {{{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 14}, {0, 0, 0}}},
  }};
  // llMaxBws: v2.23.4-1 src/graph/tuning.cc:86-90 (Hopper's row raised to 141 / 45 / 35).
  v.ll_max_bw = {{{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {141.0, 45.0, 35.0}}};
  v.ring_ll128_bw = kRingLL128;
  v.tree_ll128_bw = kTreeLL128;
  v.tree_bw = kTreeBw;
  v.tree_correction = kTreeCorrection;
  // SMxx_NVLINK_BW and PCI_BW: v2.23.4-1 src/graph/topo.h:14-19 (SM90 20.6).
  v.nvlink_bw_sm60 = 18.0;
  v.nvlink_bw_sm70 = 20.0;
  v.nvlink_bw_sm80 = 20.0;
  v.nvlink_bw_sm90 = 20.6;
  v.nvlink_bw_sm86 = 12.0;
  v.pci_bw = 12.0;
  v.speed_intra = kSpeedIntra;
  v.speed_inter = kSpeedInter;
  // sm90SpeedArrayIntra/Inter: v2.23.4-1 src/graph/search.cc:935-936.
  v.sm90_speed_intra = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
  v.sm90_speed_inter = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                        15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  // NCCL_NVLS_NCHANNELS default: v2.23.4-1 src/transport/nvls.cc:145.
  v.nvls_channels = 16;
  return v;
}

// 2.27: the tables of 2.23 plus Blackwell; the rules change (NcclRules::V2_27, docs/model.md).
NcclVersion v2_27() {
  NcclVersion v = v2_23();
  v.name = "2.27";
  v.tag = "v2.27.7-1";
  v.rules = NcclRules::V2_27;
  v.arch_rows = 4;
  // ncclAlgoStr: v2.27.7-1 src/init.cc:45 (as 2.23). baseLat and hwLat: v2.27.7-1
  // src/graph/tuning.cc:134-156, the same values as 2.23 (PAT's rows absent there, so zero). llMaxBws:
  // v2.27.7-1 src/graph/tuning.cc:165-170: Blackwell's row twice Hopper's.
  v.ll_max_bw = {
      {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {2 * 141.0, 2 * 45.0, 2 * 35.0}}};
  // treeCorrectionFactor: v2.27.7-1 src/graph/tuning.cc:555-559 (unchanged).
  // SM100_NVLINK_BW 40.1: v2.27.7-1 src/graph/topo.h:21 (the others :16-22, as 2.23).
  v.nvlink_bw_sm100 = 40.1;
  // sm100SpeedArrayIntra/Inter: v2.27.7-1 src/graph/search.cc:962-963 (the others :952-958, as 2.23).
  v.sm100_speed_intra = {90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0};
  v.sm100_speed_inter = {96.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0,
                         17.5, 15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  v.max_channels = 64;  // MAXCHANNELS: v2.27.7-1 src/include/device.h:87
  // NVLS_NCHANNELS_SM90 / _SM100 / _SM100_NVL: v2.27.7-1 src/transport/nvls.cc:147-149.
  v.nvls_channels = 16;
  v.nvls_channels_sm100 = 32;
  v.nvls_channels_sm100_nvl = 24;
  return v;
}

// "2.18.3-1", "v2.18.3", "2.18" -> "2.18".
std::string major_minor(std::string name) {
  if (!name.empty() && (name[0] == 'v' || name[0] == 'V')) name.erase(0, 1);
  const auto first = name.find('.');
  if (first == std::string::npos) return name;
  const auto second = name.find('.', first + 1);
  return second == std::string::npos ? name : name.substr(0, second);
}

}  // namespace

double NcclVersion::nvlink_bw(int sm) const {
  // ncclTopoNVLinkBw: topo.h (v2.18.3-1 :204-209, v2.23.4-1 :229-234); 86 is its own row.
  if (sm >= 100 && nvlink_bw_sm100 > 0) return nvlink_bw_sm100;  // 27: topo.h:256-264
  if (sm >= 90) return nvlink_bw_sm90;
  if (sm == 86) return nvlink_bw_sm86;
  if (sm >= 80) return nvlink_bw_sm80;
  if (sm >= 70) return nvlink_bw_sm70;
  if (sm >= 60) return nvlink_bw_sm60;
  return nvlink_bw_sm80;
}

double nvlink_line_per_link(int sm) {
  if (sm >= 100) return 50.0;    // NVLink 5: 18 links, 1.8 TB/s both ways (HGX B200 datasheet)
  if (sm == 86) return 14.0625;  // GA102 bridge: 4 links, 112.5 GB/s both ways (RTX A4500/A40 datasheets)
  if (sm >= 70) return 25.0;     // NVLink 2/3/4: 6, 12, 18 links; 300, 600, 900 GB/s both ways
  return 20.0;                   // NVLink 1: 4 links, 160 GB/s both ways (Tesla P100 datasheet)
}

const std::vector<NcclVersion>& nccl_versions() {
  static const std::vector<NcclVersion> versions = {v2_18(), v2_23(), v2_27()};
  return versions;
}

const NcclVersion& nccl_newest_version() {
  return nccl_versions().back();
}

const NcclVersion& nccl_version(const std::string& name) {
  const std::string want = major_minor(name);
  std::string valid;
  for (const auto& v : nccl_versions()) {
    if (v.name == want) return v;
    valid += (valid.empty() ? "" : ", ") + v.name;
  }
  throw Error(
      fmt::format("unknown NCCL version '{}'; valid: {} (the tuner's tables, docs/model.md)", name, valid));
}

}  // namespace vitsim
