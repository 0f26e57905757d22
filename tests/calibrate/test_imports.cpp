// Issue 15 item 7: measurements users already have as calibration inputs. nccl-tests' all_reduce_perf
// logs (tests/data/all_reduce_perf_*.log) and PyTorch profiler traces (tests/data/torch_profile_*.json).
//
// The fixtures: all_reduce_perf_8x_a100.log is nccl-tests 2.x's layout (13 columns, "#wrong"), 8 ranks on
// two hosts, its times generated from t = 2(n-1) a + 2(n-1)/n S / B with a = 6 us and B = 24 GB/s and
// printed with nccl-tests' formats (%7.2f below 100 us, %7.1f below 10 ms, %7.0f above), in-place 1%
// faster. all_reduce_perf_2x_v100_old.log is the older layout (12 columns, no root, an "error" column),
// 2 ranks on one host, a = 4 us, B = 10 GB/s, with a launcher line and an NCCL INFO line in it.
// torch_profile_cpu_step.json is one ProfilerStep of a CPU run, torch_profile_cuda_step.json one of a CUDA
// run (kernels linked to their ops by "External id", the backward on the autograd thread); the sums the
// tests expect are added up from the spans written in them, listed next to each expectation.
#include <fmt/format.h>

#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.hpp"
#include "vitsim/calibrate/imports.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/model/vit.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/results/nccl_table.hpp"

using namespace vitsim;
using namespace vitsim::calibrate;

namespace {

std::string data(const std::string& name) {
  return vt::source("tests/data/" + name);
}
std::string text_of(const std::string& name) {
  return read_file(data(name));
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}
std::string join_lines(const std::vector<std::string>& v, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to && i < v.size(); ++i) out += v[i] + "\n";
  return out;
}

using vt::error_of;

// ---- GEMM tables (bench/gpu/gemm_shapes.py's schema) ----

// A GPU-like device whose figures a synthetic table's times are made with; every discrete figure on the
// fit's grid (calibrate/src/fits/op_fit.cpp: tiles 8..128, k_half 0..1024, n_half 0..64).
DeviceFigures gemm_truth() {
  DeviceFigures d;
  d.device_type = "gpu-test";
  d.peak_flops = 312e12;  // an A100's dense fp16 (docs/sources.md, Catalogue): any positive peak would do
  d.mem_bw = 2.0e12;
  d.sm_count = 108;
  d.tile_m = d.tile_n = 128;
  d.gemm_efficiency = 0.62;
  d.gemm_k_half = 64;
  d.gemm_n_half = 32;
  d.attn_efficiency = 0.41;
  d.host_op_s = 3e-6;
  d.async = true;
  return d;
}
// What the platform states for it: the same hardware (peak, bandwidth, SMs), other op-model figures.
DeviceFigures gemm_platform() {
  DeviceFigures d = gemm_truth();
  d.gemm_efficiency = 0.9;
  d.gemm_k_half = 0;
  d.gemm_n_half = 0;
  d.attn_efficiency = 0.9;
  d.mem_efficiency = 0.77;
  d.kernel_s = 2e-6;
  d.host_op_s = 9e-6;
  return d;
}

// The matmuls of a ViT's layers at micro-batches `mbs` (core's own ops: pass_ops, the patch convolution
// left out as the script does) and squares `squares`, as the script's rows, each timed by the op model's
// closed form on `truth` (op_sample_time) in `dtype`.
nlohmann::json gemm_table_json(const DeviceFigures& truth, const std::string& dtype,
                               const std::string& preset, const std::vector<int>& mbs,
                               const std::vector<int>& squares) {
  const Workload w = build_workload(vit_preset(preset));
  const double e = dtype == "fp32" ? 4 : 2;
  const int last = static_cast<int>(w.layers.size()) - 1;  // the head
  nlohmann::json rows = nlohmann::json::array();
  auto add = [&](const std::string& op, OpClass cls, Pass pass, nlohmann::json model, nlohmann::json tokens,
                 nlohmann::json mb, double batch, double m, double n, double k) {
    const Op timed = matmul_op(op, pass, cls, batch, m, n, k, e);
    rows.push_back({{"op", op},
                    {"class", op_class_name(cls)},
                    {"pass", pass_name(pass)},
                    {"model", model},
                    {"tokens", tokens},
                    {"micro_batch", mb},
                    {"batch", static_cast<long long>(batch)},
                    {"m", static_cast<long long>(m)},
                    {"n", static_cast<long long>(n)},
                    {"k", static_cast<long long>(k)},
                    {"dtype", dtype},
                    {"median_s", op_sample_time(timed, truth)}});
  };
  for (int b : mbs)
    for (const Op& op : pass_ops(w, b, OpOptions{parse_precision(dtype == "fp32" ? "fp32" : dtype)}))
      if (is_matmul(op) && !is_conv(op.kind) && (op.layer <= 2 || op.layer == last))  // the blocks repeat
        add(op.name, op.cls, op.pass, preset, w.model.tokens(), b, op.batch, op.m, op.n, op.k);
  for (int n : squares) add("square", OpClass::Gemm, Pass::Fwd, nullptr, nullptr, nullptr, 1, n, n, n);
  return {
      {"schema", kGemmTableSchema},
      {"device", {{"name", "test GPU"}, {"kind", "cuda"}, {"sm_count", truth.sm_count}, {"torch", "2.x"}}},
      {"shapes", rows}};
}

// The 8-rank log's line numbers (1-based): rank lines 4-11, column header 14, units 15, rows 16-40.
constexpr int kHeaderLine = 14, kFirstRow = 16, kRows = 25;

}  // namespace

TEST_CASE("nccl-tests 2.x all_reduce_perf log: every row, the ranks, hosts and device", "[imports]") {
  const NcclTestsLog log = parse_nccl_tests("a.log", text_of("all_reduce_perf_8x_a100.log"));
  CHECK(log.ranks == 8);  // "#  Rank  0" .. "#  Rank  7"
  CHECK(log.hosts == std::vector<std::string>{"node-a01", "node-a02"});
  CHECK(log.device == "NVIDIA A100-SXM4-80GB");
  REQUIRE(log.rows.size() == kRows);  // 8 B .. 128 MiB, x2
  CHECK(log.rows.front().line == kFirstRow);
  CHECK(log.rows.front().bytes == 8);
  CHECK(log.rows.front().count == 2);
  CHECK(log.rows.front().type == "float");
  CHECK(log.rows.front().redop == "sum");
  CHECK(log.rows.front().oop_time_s == Approx(84.00e-6).epsilon(1e-12));  // 14 x 6 us
  CHECK(log.rows.front().ip_time_s == Approx(83.16e-6).epsilon(1e-12));
  const NcclTestsRow& last = log.rows.back();
  CHECK(last.bytes == 134217728);
  CHECK(last.oop_time_s == Approx(9870.7e-6).epsilon(1e-12));
  CHECK(last.oop_algbw == Approx(13.60e9).epsilon(1e-12));
  CHECK(last.oop_busbw == Approx(23.80e9).epsilon(1e-12));
  CHECK(last.ip_busbw == Approx(24.04e9).epsilon(1e-12));
  CHECK(log.avg_busbw == Approx(7.1495e9).epsilon(1e-12));
}

TEST_CASE("nccl-tests all_reduce_perf log: the fit recovers the latency and bandwidth it was generated from",
          "[imports]") {
  const NcclTestsLog log = parse_nccl_tests("a.log", text_of("all_reduce_perf_8x_a100.log"));
  const NcclImport all = import_nccl_tests(log, 0, "");
  CHECK(all.fitted == kRows);
  CHECK(all.fitted_up_to == 134217728);
  CHECK(all.link.link_class == "inter_node");  // two hosts
  CHECK(all.link.ranks == 8);
  // Generated with a = 6 us, B = 24 GB/s; the printed times carry 3-4 significant digits.
  CHECK(all.link.latency == Approx(6e-6).epsilon(0.005));
  CHECK(all.link.bandwidth == Approx(24e9).epsilon(0.005));
  // Up to 1 MiB: the rows 8 B .. 1 MiB (18 of them), still the same line.
  const NcclImport small = import_nccl_tests(log, 1048576, "intra_node");
  CHECK(small.fitted == 18);
  CHECK(small.fitted_up_to == 1048576);
  CHECK(small.link.link_class == "intra_node");  // as asked
  CHECK(small.link.latency == Approx(6e-6).epsilon(0.005));
  CHECK(small.link.bandwidth == Approx(24e9).epsilon(0.02));
  // The fit is calibrate's own (fit_ring_allreduce) over the out-of-place times.
  std::vector<AllreduceSample> samples;
  for (const auto& r : log.rows)
    if (r.bytes <= 1048576) samples.push_back({r.bytes, r.oop_time_s});
  const RingFit ref = fit_ring_allreduce(samples, 8);
  CHECK(small.link.latency == ref.latency_s);
  CHECK(small.link.bandwidth == ref.bandwidth);
}

TEST_CASE("older all_reduce_perf log: no root column, an error column, launcher and NCCL INFO lines",
          "[imports]") {
  const NcclTestsLog log = parse_nccl_tests("old.log", text_of("all_reduce_perf_2x_v100_old.log"));
  CHECK(log.ranks == 2);
  CHECK(log.hosts == std::vector<std::string>{"gpu-box"});
  CHECK(log.device == "Tesla V100-SXM2-32GB");
  REQUIRE(log.rows.size() == 4);  // 1 MiB .. 64 MiB, x4
  CHECK(log.rows[0].bytes == 1048576);
  CHECK(log.rows[0].oop_time_s == Approx(112.9e-6).epsilon(1e-12));
  CHECK(log.rows[3].ip_time_s == Approx(6786.1e-6).epsilon(1e-12));
  const NcclImport imp = import_nccl_tests(log, 0, "");
  CHECK(imp.link.link_class == "intra_node");  // one host
  CHECK(imp.link.latency == Approx(4e-6).epsilon(0.01));
  CHECK(imp.link.bandwidth == Approx(10e9).epsilon(0.005));
}

TEST_CASE("malformed all_reduce_perf logs: one line naming the file, the line and the fault", "[imports]") {
  const std::vector<std::string> L = lines_of(text_of("all_reduce_perf_8x_a100.log"));
  const std::string head = join_lines(L, 0, kFirstRow - 1);  // everything before the first row
  const std::string rows8 = join_lines(L, kFirstRow - 1, kFirstRow - 1 + 8);
  auto err = [](const std::string& text) { return error_of([&] { parse_nccl_tests("x.log", text); }); };

  // Truncated: the copy stopped after 8 rows, or in the middle of the 9th.
  CHECK(err(head + rows8) ==
        "x.log:23: the all_reduce_perf table stops after 8 rows without its closing '# Avg bus bandwidth' "
        "line: the log "
        "is truncated");
  CHECK(err(head + rows8 + "        2048           512     float     sum      -1    84.15\n") ==
        "x.log:24: expected 13 columns (size count type redop root time algbw busbw #wrong time algbw busbw "
        "#wrong), "
        "found 6: '2048           512     float     sum      -1    84.15'");
  // No data rows, with and without the summary.
  CHECK(err(head + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0 \n") ==
        "x.log:14: the all_reduce_perf table has no data rows");
  CHECK(err(head) == "x.log:14: the all_reduce_perf table has no data rows");
  // Wrong column count: a row without its root column (12 of 13).
  CHECK(
      err(head +
          "           8             2     float     sum    84.00    0.00    0.00      0    83.16    0.00    "
          "0.00      0\n") ==
      "x.log:16: expected 13 columns (size count type redop root time algbw busbw #wrong time algbw busbw "
      "#wrong), "
      "found 12: '8             2     float     sum    84.00    0.00    0.00      0    83.16    0.00    0.00 "
      "     0'");
  // Not the output of all_reduce_perf at all.
  CHECK(err("") ==
        "x.log: no all_reduce_perf table (no '# size count type redop ...' column header): is this the "
        "output of "
        "nccl-tests' all_reduce_perf?");
  CHECK(err("Segmentation fault (core dumped)\n") == err(""));
  // A value that is not a number, wrong results, a size that is not count x the type's bytes.
  CHECK(
      err(head +
          "           8             2     float     sum      -1    84.O0    0.00    0.00      0    83.16    "
          "0.00    0.00      0\n") == "x.log:16: column 6 (time): '84.O0' is not a number");
  CHECK(
      err(head +
          "           8             2     float     sum      -1    84.00    0.00    0.00      3    83.16    "
          "0.00    0.00      0\n") ==
      "x.log:16: 3 wrong elements in the out-of-place all-reduce of 8 B: the run's results are invalid");
  CHECK(
      err(head +
          "          12             2     float     sum      -1    84.00    0.00    0.00      0    83.16    "
          "0.00    0.00      0\n") == "x.log:16: size 12 B is not count 2 x 4 B of type float");
  // An all_gather_perf log (busbw = algbw (n-1)/n) under the same header.
  CHECK(err(head +
            "   134217728      33554432     float    none      -1   5600.0   23.97   20.97      0   5600.0   "
            "23.97   20.97      0\n# Avg bus bandwidth    : 20.97 \n") ==
        "x.log:16: busbw 20.97 GB/s is not algbw x 2(n-1)/n = 23.97 x 1.75 for 8 ranks: not an "
        "all_reduce_perf table");
  // algbw that is not size / time: the time column is not in microseconds.
  CHECK(err(head +
            "   134217728      33554432     float     sum      -1      9.9   13.60   23.80      0      9.8   "
            "13.73   24.04      0\n# Avg bus bandwidth    : 24 \n") ==
        "x.log:16: algbw 13.60 GB/s is not size / time = 134217728 B / 9.9 us = 13557.35 GB/s");
  // Two runs in one file.
  CHECK(err(head + rows8 + L[kHeaderLine - 1] + "\n") ==
        "x.log:24: a second nccl-tests table (the first starts at line 14): import one all_reduce_perf run "
        "per file");
  // An unknown header layout.
  CHECK(err("#       size         count      type   redop    root     time   algbw   busbw\n") ==
        "x.log:1: unknown all_reduce_perf column header 'size count type redop root time algbw busbw': "
        "expected 'size "
        "count type redop root time algbw busbw #wrong time algbw busbw #wrong' (nccl-tests 2.x) or 'size "
        "count type "
        "redop time algbw busbw error time algbw busbw error'");
}

TEST_CASE("vitsim collective's tables read back whatever nccl-tests' rounding prints", "[imports]") {
  // Issue 39's collective fuzzer: the algbw and busbw checks allowed two decimals' rounding only, and refused
  // tables printed as nccl-tests prints them (src/util.cu getFloatStr: one decimal, none, then an exponent,
  // within the column's width). 4 ranks on 2 nodes (busbw = 1.5 algbw), 32 GiB = 34359738368 B:
  // - in 33 us: algbw 1041204 GB/s printed "1e+06", 4% off (the algbw check refused it);
  // - in 36 us: algbw 954437 GB/s printed whole, busbw 1431656 printed "1e+06" (the busbw check refused it);
  // - 64 GiB in 22.4 s: the time printed "2.2e+07" us, 1.8% below (within the margin before, kept here as the
  //   exponent of the time column).
  NcclTable t;
  t.ranks = 4;
  t.gpus_per_node = 2;
  for (int r = 0; r < 4; ++r)
    t.devices.push_back(
        {r, fmt::format("node{}", r / 2), r % 2, fmt::format("node{}-gpu{}", r / 2, r % 2), "H200"});
  const double gib = 1024.0 * 1024 * 1024;
  for (const auto& [bytes, s] :
       {std::pair<double, double>{32 * gib, 33e-6}, {32 * gib, 36e-6}, {64 * gib, 22.4}})
    t.rows.push_back({bytes, static_cast<long long>(bytes / 4), s, s});
  const std::string text = nccl_table_text(t);
  INFO(text);
  REQUIRE(text.find(" 1e+06 ") != std::string::npos);
  REQUIRE(text.find(" 954437 ") != std::string::npos);
  REQUIRE(text.find(" 2.2e+07 ") != std::string::npos);
  const NcclTestsLog log = parse_nccl_tests("collective.txt", text);
  REQUIRE(log.rows.size() == 3);
  CHECK(log.rows[2].bytes == 64 * gib);
  CHECK(log.ranks == 4);
  // The rounding allowed is the printed digits', no more: an algbw one digit off in the exponent is refused.
  std::string off = text;
  off.replace(off.find(" 1e+06 "), 7, " 1e+07 ");
  CHECK_THAT(error_of([&] { parse_nccl_tests("x.log", off); }),
             Catch::Contains("algbw 1e+07 GB/s is not size / time"));
}

TEST_CASE("all_reduce_perf log without rank lines: ranks from busbw / algbw, link class asked for",
          "[imports]") {
  const std::vector<std::string> L = lines_of(text_of("all_reduce_perf_8x_a100.log"));
  std::string text;
  for (const auto& l : L)
    if (l.find("Rank") == std::string::npos) text += l + "\n";
  const NcclTestsLog log = parse_nccl_tests("x.log", text);
  CHECK(log.ranks == 8);  // busbw / algbw = 23.80 / 13.60 = 1.75 = 2(n-1)/n
  CHECK(log.hosts.empty());
  CHECK(error_of([&] { import_nccl_tests(log, 0, ""); }) ==
        "x.log: no '# Rank ... on HOST' lines say whether the ranks share a node: pass --link-class "
        "intra_node or "
        "inter_node");
  CHECK(import_nccl_tests(log, 0, "inter_node").link.link_class == "inter_node");
}

TEST_CASE("torch profiler trace of a CPU step: op classes, phases and the step", "[imports]") {
  const TorchProfile p = parse_torch_profile("t.json", text_of("torch_profile_cpu_step.json"));
  CHECK_FALSE(p.device);
  CHECK(p.step_s == Approx(10000e-6).epsilon(1e-12));  // ProfilerStep#3: 10000 us
  // gemm: conv2d 300 + linear 400 + linear 300 + mm 280 + mm 290 + convolution_backward 496 us.
  CHECK(p.cls(OpClass::Gemm) == Approx(2066e-6).epsilon(1e-9));
  // attn_matmul: matmul (runs a bmm) 200 + bmm 150 + bmm 140 + bmm 140.
  CHECK(p.cls(OpClass::AttnMatmul) == Approx(630e-6).epsilon(1e-9));
  // norm: layer_norm 100 + softmax 50 + gelu 60 + _log_softmax_backward_data 26 + gelu_backward 86 +
  // native_layer_norm_backward 146.
  CHECK(p.cls(OpClass::Norm) == Approx(468e-6).epsilon(1e-9));
  // memory: flatten 10 + add 20 + cross_entropy_loss 80 + ones_like 10 + nll_loss_backward 36 + t 6 + t 6 +
  // add_ 26 + the optimizer's _foreach ops 200 + 300 + 400; the DataLoader's stack and the aten::empty
  // after the step are left out.
  CHECK(p.cls(OpClass::Memory) == Approx(1094e-6).epsilon(1e-9));
  CHECK(p.ops == 27);
  CHECK(p.fwd_s == Approx(1810e-6).epsilon(1e-9));  // conv2d at 500 .. ones_like ending at 2310
  CHECK(p.bwd_s == Approx(1806e-6).epsilon(1e-9));  // nll_loss_backward at 2322 .. add_ ending at 4128
  CHECK(p.optimizer_s ==
        Approx(920e-6).epsilon(1e-9));  // _foreach_mul_ at 4210 .. _foreach_add_ ending at 5130
}

TEST_CASE("torch profiler trace of a CUDA step: device kernels by the op that launched them", "[imports]") {
  const TorchProfile p = parse_torch_profile("t.json", text_of("torch_profile_cuda_step.json"));
  CHECK(p.device);
  CHECK(p.step_s == Approx(3000e-6).epsilon(1e-12));  // ProfilerStep#7; the last kernel ends at 2555
  CHECK(p.cls(OpClass::Gemm) == Approx(1170e-6).epsilon(1e-9));       // sgemm 400 + 380 + 390
  CHECK(p.cls(OpClass::AttnMatmul) == Approx(435e-6).epsilon(1e-9));  // 150 (matmul's bmm) + 140 + 145
  CHECK(p.cls(OpClass::Norm) == Approx(120e-6).epsilon(1e-9));        // softmax 50 + 25 + 45
  // memcpy 80 + cross_entropy_loss's two kernels 30 + 10 + nll_loss_backward 10 + add_ 15 + optimizer 60 +
  // the fill kernel no op launched 5; the NCCL all-reduce kernel (300) is communication.
  CHECK(p.cls(OpClass::Memory) == Approx(210e-6).epsilon(1e-9));
  CHECK(p.kernels == 16);
  CHECK(p.ops == 14);
  CHECK(p.fwd_s == Approx(770e-6).epsilon(1e-9));       // memcpy at 20 .. nll_loss kernel ending at 790
  CHECK(p.bwd_s == Approx(1200e-6).epsilon(1e-9));      // 800 .. 2000, on the autograd thread's ops
  CHECK(p.optimizer_s == Approx(60e-6).epsilon(1e-9));  // the multi_tensor_apply kernel
}

TEST_CASE("torch op classes by aten:: name", "[imports]") {
  for (const char* n : {"aten::addmm", "aten::mm", "aten::linear", "aten::matmul", "aten::conv2d",
                        "aten::convolution_backward"})
    CHECK(torch_op_class(n) == OpClass::Gemm);
  for (const char* n : {"aten::bmm", "aten::baddbmm", "aten::scaled_dot_product_attention",
                        "aten::_scaled_dot_product_flash_attention", "aten::_efficient_attention_backward"})
    CHECK(torch_op_class(n) == OpClass::AttnMatmul);
  for (const char* n :
       {"aten::softmax", "aten::_softmax_backward_data", "aten::layer_norm", "aten::native_layer_norm",
        "aten::native_layer_norm_backward", "aten::gelu", "aten::gelu_backward"})
    CHECK(torch_op_class(n) == OpClass::Norm);
  for (const char* n :
       {"aten::add", "aten::copy_", "aten::cross_entropy_loss", "aten::_foreach_add_", "aten::view"})
    CHECK(torch_op_class(n) == OpClass::Memory);
}

TEST_CASE("malformed torch profiler traces: one line naming the file and the fault", "[imports]") {
  auto err = [](const std::string& text) { return error_of([&] { parse_torch_profile("t.json", text); }); };
  const std::string cpu = text_of("torch_profile_cpu_step.json");
  // Truncated JSON.
  const std::string cut = err(cpu.substr(0, cpu.size() / 2));
  CHECK(cut.rfind("t.json: malformed JSON: [json.exception.parse_error.101] parse error at line ", 0) == 0);
  CHECK(err("{\"schemaVersion\": 1}") ==
        "t.json: not a PyTorch profiler trace: no \"traceEvents\" array (export it with "
        "prof.export_chrome_trace(...))");
  CHECK(err("[]") == err("{\"schemaVersion\": 1}"));
  CHECK(err(R"({"traceEvents": [{"ph": "X", "name": "aten::mm", "dur": 3}]})") ==
        "t.json: /traceEvents/0: a complete event without a numeric \"ts\"");
  // Several steps: one training step only.
  CHECK(err(R"({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#5", "pid": 1, "tid": 1, "ts": 10, "dur": 10}]})") ==
        "t.json: 2 profiler steps (ProfilerStep#4, ProfilerStep#5): import a trace of one training step "
        "(torch.profiler.schedule(wait=..., warmup=..., active=1))");
  CHECK(err(R"({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 1, "tid": 1, "ts": 0, "dur": 10}]})") ==
        "t.json: no aten:: operator inside ProfilerStep#4: record the trace with "
        "torch.profiler.profile(activities=[ProfilerActivity.CPU, ...])");
  // A forward only (inference): no backward.
  std::string fwd_only;
  for (const auto& l : lines_of(cpu))
    if (l.find("autograd::engine::evaluate_function") == std::string::npos) fwd_only += l + "\n";
  CHECK(err(fwd_only) ==
        "t.json: no backward (no aten:: operator inside an 'autograd::engine::evaluate_function' event): "
        "profile a "
        "whole training step");
}

// Issue 27: imports whose figures are not plausible. A log whose times do not grow with the size fitted
// "1.1e+07 EB/s"; kernels 16 minutes from their 3 ms ProfilerStep made a 16.67-minute forward pass; durations
// of 1e300 us were accepted.
TEST_CASE("imports refused as implausible: a flat all-reduce log, kernels outside their step, endless events",
          "[imports]") {
  // 1 GiB in 84.00 us and 2 GiB in 84.01 us, 8 ranks on 2 hosts: the line through both has c1 = 0.01 us /
  // 2^30 B, so B = 2(n-1)/n / c1 = 1.75 x 2^30 / 1e-8 = 1.88e17 B/s, above 1 PB/s.
  NcclTestsLog flat;
  flat.path = "flat.log";
  flat.ranks = 8;
  flat.hosts = {"a", "b"};
  flat.rows = {{16, 1073741824.0, 268435456, "float", "sum", 84.00e-6},
               {17, 2147483648.0, 536870912, "float", "sum", 84.01e-6}};
  CHECK(
      error_of([&] { import_nccl_tests(flat, 0, ""); }) ==
      "flat.log: the fit gives a bandwidth of 1.88e+17 B/s, outside the plausible 1kBps .. 1PBps: the "
      "out-of-place times do not grow with the size (1.00 GiB in 84.00 us, 2.00 GiB in 84.01 us); is the log "
      "of one run, and its time column in us?");

  auto err = [](const std::string& text) { return error_of([&] { parse_torch_profile("t.json", text); }); };
  const std::string cuda = text_of("torch_profile_cuda_step.json");
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = cuda;
    const size_t at = t.find(from);
    REQUIRE(at != std::string::npos);
    return t.replace(at, from.size(), to);
  };
  // The sgemm kernel of External id 23 (aten::linear from 5271437937050 us) moved 1e9 us (16.7 min) later:
  // it ends 1e9 + 110 + 400 - 3000 = 999,997,510 us after ProfilerStep#7 (5271437937000 + 3000 us) ended.
  CHECK(err(replaced("\"ts\": 5271437937110.0, \"dur\": 400", "\"ts\": 5272437937110.0, \"dur\": 400")) ==
        "t.json: kernel 'ampere_sgemm_128x64_tn' (External id 23) ends 9.99998e+08 us after ProfilerStep#7 "
        "(3000 "
        "us long) ended: outside its step; export the trace of one step as the profiler wrote it");
  // The same kernel starting at 5271437937040 us: 10 us before aten::linear, which launched it.
  CHECK(err(replaced("\"ts\": 5271437937110.0, \"dur\": 400", "\"ts\": 5271437937040.0, \"dur\": 400")) ==
        "t.json: kernel 'ampere_sgemm_128x64_tn' (External id 23) starts 10 us before the operator that "
        "launched it; export the trace of one step as the profiler wrote it");
  // A duration of 1e300 us, and one just over a day (86,400 s = 8.64e10 us).
  for (const std::string dur : {"1e300", "86400000001"}) {
    const std::string t =
        replaced("\"ts\": 5271437937110.0, \"dur\": 400", "\"ts\": 5271437937110.0, \"dur\": " + dur);
    CHECK(err(t).find(": \"dur\" ") != std::string::npos);
    CHECK(err(t).find(" us is over a day: not an event of one training step") != std::string::npos);
  }
  // A day exactly is the limit, not beyond it: the kernel then ends outside its step instead.
  CHECK(
      err(replaced("\"ts\": 5271437937110.0, \"dur\": 400", "\"ts\": 5271437937110.0, \"dur\": 86400000000"))
          .find("outside its step") != std::string::npos);
}

// Issue 27: a calibration's link fit (calibrate --from-nccl-tests) is not what predict simulates (the links
// are the platform's); the table with and without it was byte-identical. Now every point's notes say so.
TEST_CASE("a calibration's link fits: predict says it does not use them", "[imports][cli]") {
  vt::TempDir d;
  const std::string sc = vt::source("scenarios/local/fmnist-vit.xml");
  Calibration none;  // nothing measured: the platform's figures
  Calibration links = none;
  links.links.push_back({"inter_node", 24e9, 6e-6, 8});  // all_reduce_perf_8x_a100.log's generating figures
  d.file("none.json", calibration_to_json(none));
  d.file("links.json", calibration_to_json(links));
  auto without = vt::vitsim("predict " + sc + " -q --calibration " + d / "none.json");
  auto with = vt::vitsim("predict " + sc + " -q --calibration " + d / "links.json");
  REQUIRE(without.status == 0);
  REQUIRE(with.status == 0);
  const std::string note = "note: calibration " + d / "links.json" +
                           ": its link fits are not used (inter_node (8 ranks: 24 GB/s, 6.00 us)): the "
                           "simulated links are the platform's; put the fit into a platform with `vitsim "
                           "calibrate --emit-platform` or a --what-if link:...:bandwidth=...\n";
  // The note follows the others, before the whole-run summary; nothing else differs.
  const auto at = with.out.find(note);
  REQUIRE(at != std::string::npos);
  CHECK(with.out.substr(0, at) + with.out.substr(at + note.size()) == without.out);
  CHECK(with.out.rfind("note: ", at - 1) < at);
  CHECK(with.out.find("note: ", at + note.size()) == std::string::npos);
}

TEST_CASE(
    "calibrate's import: the log and the trace become a link and a compute point of the calibration file",
    "[imports]") {
  vt::TempDir d;
  ScenarioFile f = read_scenario_file(vt::source("scenarios/local/fmnist-vit.xml"));
  const Scenario s = expand(f).front();
  ImportOptions o;
  o.out = d / "calib.json";
  o.nccl_tests = data("all_reduce_perf_8x_a100.log");
  o.torch_profile = data("torch_profile_cpu_step.json");
  o.device_type = "a100";
  o.verbose = false;
  o.command = "vitsim calibrate (test)";
  const Calibration c = import_measurements(s, o);
  REQUIRE(c.links.size() == 1);
  CHECK(c.links[0].link_class == "inter_node");
  CHECK(c.links[0].ranks == 8);
  CHECK(c.links[0].latency == Approx(6e-6).epsilon(0.01));
  REQUIRE(c.devices.size() == 1);
  CHECK(c.devices[0].device_type == "a100");
  CHECK(same_shape(c.devices[0].model, s.model));
  REQUIRE(c.devices[0].points.size() == 1);
  CHECK(c.devices[0].points[0].micro_batch == s.training.micro_batch);  // 64: the scenario's
  CHECK(c.devices[0].points[0].fwd_s == Approx(1810e-6).epsilon(1e-9));
  CHECK(c.devices[0].points[0].bwd_s == Approx(1806e-6).epsilon(1e-9));
  CHECK(c.devices[0].points[0].optimizer_s == Approx(920e-6).epsilon(1e-9));
  CHECK(c.provenance.at("torch_profile")
            .rfind(data("torch_profile_cpu_step.json") + ": one step 10.00 ms (27 CPU aten:: ops); gemm 2.07 "
                                                         "ms (20.7%), attn_matmul 630.00 us (6.3%), norm "
                                                         "468.00 us (4.7%), memory 1.09 ms (10.9%); forward "
                                                         "1.81 ms, backward 1.81 ms, optimizer 920.00 us; "
                                                         "device a100 at micro-batch 64 (sha256 ",
                   0) == 0);
  // An existing file is refused without --force or --append; --append merges (a link of another class).
  CHECK(error_of([&] { import_measurements(s, o); }) ==
        o.out + ": calibration file exists; pass --force to overwrite it (or --append to merge)");
  ImportOptions more = o;
  more.append = true;
  more.torch_profile.clear();
  more.nccl_tests = data("all_reduce_perf_2x_v100_old.log");
  const Calibration merged = import_measurements(s, more);
  CHECK(merged.links.size() == 2);
  CHECK(merged.devices.size() == 1);
  CHECK(merged.provenance.count("appended_to") == 1);
  // A scenario with gradient accumulation: a profiled step holds several passes.
  Scenario acc = s;
  acc.training.grad_accum = 4;
  ImportOptions prof = o;
  prof.force = true;
  prof.nccl_tests.clear();
  CHECK(error_of([&] { import_measurements(acc, prof); }) ==
        "--from-torch-profile: the scenario has training.grad_accum 4: a profiled step then holds 4 forward "
        "and "
        "backward passes; profile (and import with) grad_accum 1");
}

#if VITSIM_TEST_HAVE_REAL
TEST_CASE("vitsim calibrate --from-nccl-tests / --from-torch-profile: imports without measuring",
          "[imports][cli]") {
  vt::TempDir d;
  const std::string sc = vt::source("scenarios/local/fmnist-vit.xml");
  auto r = vt::vitsim("calibrate " + sc + " --out " + d / "c.json" + " --from-nccl-tests " +
                      data("all_reduce_perf_2x_v100_old.log") + " --from-torch-profile " +
                      data("torch_profile_cpu_step.json"));
  INFO(r.out);
  REQUIRE(r.status == 0);
  // The default device: the gpu_model of the scenario platform's first GPU (this-machine.xml: cpu).
  CHECK(r.out.find("recorded as device 'cpu', micro-batch 64, fp32\n") != std::string::npos);
  // The fit stops at the scenario's whole fp32 gradient (vit_fmnist_tiny: under 1.1 MiB), as calibrate's own:
  // of the log's 1, 4, 16, 64 MiB that leaves 1 MiB, and a fit takes at least the two smallest sizes.
  CHECK(
      r.out.find("link class intra_node: fit t = 2(n-1) a + 2(n-1)/n S/B over the 2 sizes up to 4.00 MiB") !=
      std::string::npos);
  const Calibration c = read_calibration(d / "c.json");
  CHECK(c.links.size() == 1);
  CHECK(c.devices.size() == 1);
  // A measuring flag has nothing to act on: a bad command line.
  auto bad = vt::vitsim("calibrate " + sc + " --out " + d / "x.json" +
                        " --micro-batches 8 --from-nccl-tests " + data("all_reduce_perf_2x_v100_old.log"));
  CHECK(bad.status == 2);
  CHECK(bad.out ==
        "vitsim: error: --micro-batches does not go with --from-nccl-tests / --from-torch-profile / "
        "--from-gemm-table: an import measures nothing\n");
  // A malformed file: one line, exit 1, nothing written.
  auto wrong = vt::vitsim("calibrate " + sc + " --out " + d / "y.json" + " --from-nccl-tests " +
                          data("torch_profile_cpu_step.json"));
  CHECK(wrong.status == 1);
  CHECK(wrong.out ==
        "vitsim: error: " + data("torch_profile_cpu_step.json") +
            ": no all_reduce_perf table (no '# size count type redop ...' column header): is this the "
            "output of nccl-tests' all_reduce_perf?\n");
  CHECK_FALSE(vt::fs::exists(d / "y.json"));
}

TEST_CASE("vitsim calibrate --from-gemm-table: each shape measured against the fit, then predict with it",
          "[imports][gemm_table][cli]") {
  vt::TempDir d;
  const std::string sc = vt::source("scenarios/local/fmnist-vit.xml");
  const Scenario s = expand(read_scenario_file(sc)).front();
  DeviceFigures truth =
      device_figures(read_platform_facts(s.cluster.platform).gpu.begin()->second, s.training.precision);
  truth.gemm_efficiency = 0.3;
  truth.gemm_k_half = 16;
  const std::string table =
      d.file("g.json", gemm_table_json(truth, "fp32", "vit_fmnist_tiny", {2, 8}, {64, 128}).dump());
  auto r = vt::vitsim("calibrate " + sc + " --out " + d / "c.json" + " --from-gemm-table " + table);
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("vitsim calibrate: GEMM ") != std::string::npos);  // the per-shape table's header
  CHECK(r.out.find("vit_fmnist_tiny.t17.b2.block0.attn.qkv ") != std::string::npos);
  CHECK(r.out.find("; recorded as device 'cpu' at fp32\n") != std::string::npos);
  CHECK(r.out.find("kept the peak 50 GFLOP/s (the platform's), bandwidth 20 GB/s (the platform's)") !=
        std::string::npos);  // this-machine.xml's gpu_flops_fp32 and gpu_mem_bw
  const Calibration c = read_calibration(d / "c.json");
  REQUIRE(c.op_models.size() == 1);
  CHECK(c.op_models[0].figures.gemm_k_half == 16);
  // predict takes the op model: its compute is the fitted figures'.
  auto p = vt::vitsim("predict " + sc + " --calibration " + d / "c.json" + " --format json");
  REQUIRE(p.status == 0);
  CHECK(p.out.find("op-level model (calibrated figures)") != std::string::npos);
  // A bad table: one line, exit 1, nothing written.
  const std::string bad =
      d.file("bad.json",
             R"({"schema": "vitsim.gemm_table/1", "device": {"name": "x", "kind": "cpu"}, "shapes": []})");
  auto wrong = vt::vitsim("calibrate " + sc + " --out " + d / "y.json" + " --from-gemm-table " + bad);
  CHECK(wrong.status == 1);
  CHECK(wrong.out == "vitsim: error: " + bad + ": /shapes: no shape: the table is empty\n");
  CHECK_FALSE(vt::fs::exists(d / "y.json"));
}
#endif

TEST_CASE("a GEMM table: the fit recovers the figures its times were made with, the platform's others stay",
          "[imports][gemm_table]") {
  // Times from the op model's own closed form on gemm_truth(): the fit (fit_op_model) must find its
  // discrete figures exactly and its continuous ones within 1%; what a GEMM table cannot measure stays the
  // platform's.
  const DeviceFigures truth = gemm_truth(), platform = gemm_platform();
  const std::string text =
      gemm_table_json(truth, "fp16", "vit_b_16", {8, 32, 128}, {1024, 2048, 4096, 8192}).dump();
  const GemmTable t = parse_gemm_table("g.json", text);
  CHECK(t.device_name == "test GPU");
  CHECK(t.sm_count == 108);
  const GemmImport imp = import_gemm_table(t, Precision::FP16, platform);
  CHECK(imp.samples.size() == t.rows.size());
  const DeviceFigures& f = imp.calibration.figures;
  CHECK(imp.calibration.precision == Precision::FP16);
  CHECK(f.tile_m == truth.tile_m);
  CHECK(f.tile_n == truth.tile_n);
  CHECK(f.gemm_k_half == truth.gemm_k_half);
  CHECK(f.gemm_n_half == truth.gemm_n_half);
  CHECK(f.gemm_efficiency == Approx(truth.gemm_efficiency).epsilon(0.01));
  CHECK(f.attn_efficiency == Approx(truth.attn_efficiency).epsilon(0.01));
  CHECK(f.matrix_s < 1e-12);  // none in the truth
  // The fit's per-kernel time: what the truth's 3 us are beyond the platform's kernel_s (2 us), which it
  // keeps.
  CHECK(imp.fitted.host_op_s + platform.kernel_s == Approx(truth.host_op_s).epsilon(0.01));
  CHECK(imp.calibration.max_rel_residual < 1e-6);
  // Kept: the hardware, the per-kernel and memory-bound figures.
  CHECK(f.host_op_s == platform.host_op_s);
  CHECK(f.kernel_s == platform.kernel_s);
  CHECK(f.peak_flops == platform.peak_flops);
  CHECK(f.mem_bw == platform.mem_bw);
  CHECK(f.mem_efficiency == platform.mem_efficiency);
  CHECK(f.sm_count == platform.sm_count);
  // Per row: the fit's time is the measured one; the platform's figures are off (efficiency 0.9 > 0.62).
  for (const GemmFitLine& l : gemm_fit_lines(imp)) {
    CHECK(l.fitted_s == Approx(l.measured_s).epsilon(1e-6));
    CHECK(l.platform_s < l.measured_s);
  }
  // A platform whose peak the table beats: refused (the efficiencies would clamp at 1), naming the row.
  DeviceFigures slow = platform;
  slow.peak_flops = 1e12;  // the truth's square 8192 runs at about 0.62 x 312 TFLOP/s
  CHECK(error_of([&] {
          import_gemm_table(t, Precision::FP16, slow);
        }).rfind("g.json: square.8192 runs at ", 0) == 0);
  CHECK(describe(t, imp).rfind("GEMM table g.json: " + std::to_string(t.rows.size()) +
                                   " rows of fp16 on test GPU (torch 2.x); fitted gemm_efficiency 0.620, "
                                   "attn_efficiency 0.410, tile 128x128, gemm_k_half 64, gemm_n_half 32",
                               0) == 0);
}

TEST_CASE("a GEMM table: the rows of the scenario's precision, tf32 never", "[imports][gemm_table]") {
  nlohmann::json j = gemm_table_json(gemm_truth(), "bf16", "vit_b_16", {8}, {1024});
  nlohmann::json fp32 = gemm_table_json(gemm_truth(), "fp32", "vit_b_16", {8}, {});
  nlohmann::json tf32 = gemm_table_json(gemm_truth(), "fp32", "vit_b_16", {8}, {});
  for (auto& r : tf32["shapes"]) r["dtype"] = "tf32";
  for (auto& r : fp32["shapes"]) j["shapes"].push_back(r);
  const size_t bf16_rows = j["shapes"].size() - fp32["shapes"].size();
  const GemmTable t = parse_gemm_table("g.json", j.dump());
  CHECK(gemm_table_samples(t, Precision::BF16).size() == bf16_rows);
  CHECK(gemm_table_samples(t, Precision::FP32).size() == fp32["shapes"].size());
  CHECK(std::string(gemm_table_dtype(Precision::FP32)) == "fp32");
  CHECK(error_of([&] { gemm_table_samples(t, Precision::FP16); }) ==
        "g.json: /shapes: no row of dtype fp16 (the scenario's precision fp16); the table has bf16, fp32");
  const GemmTable only_tf32 = parse_gemm_table("t.json", tf32.dump());
  CHECK(error_of([&] { gemm_table_samples(only_tf32, Precision::FP32); }) ==
        "t.json: /shapes: no row of dtype fp32 (the scenario's precision fp32); the table has tf32");
}

TEST_CASE("malformed GEMM tables: one line naming the file and the field",
          "[imports][gemm_table][negative]") {
  const nlohmann::json good = gemm_table_json(gemm_truth(), "fp16", "vit_b_16", {8}, {1024});
  struct Case {
    std::string what;
    std::function<void(nlohmann::json&)> edit;
    std::string message;  // after "g.json: "
  };
  const std::vector<Case> cases = {
      {"another schema", [](auto& j) { j["schema"] = "gemms/2"; },
       "/schema: 'gemms/2' is not a GEMM table's schema (vitsim.gemm_table/1, bench/gpu/gemm_shapes.py)"},
      {"a calibration file", [](auto& j) { j["schema"] = "vitsim.calibration/2"; },
       "/: this is a calibration file (vitsim calibrate), not a GEMM table (bench/gpu/gemm_shapes.py writes "
       "one)"},
      {"no schema", [](auto& j) { j.erase("schema"); }, "/schema: missing"},
      {"no device name", [](auto& j) { j["device"].erase("name"); }, "/device/name: missing"},
      {"no shapes", [](auto& j) { j["shapes"] = nlohmann::json::array(); },
       "/shapes: no shape: the table is empty"},
      {"shapes not a list", [](auto& j) { j["shapes"] = 3; },
       "/shapes: expected an array, found a number (3)"},
      {"an unknown class", [](auto& j) { j["shapes"][1]["class"] = "conv"; },
       "/shapes/1/class: unknown class 'conv'; valid: gemm, attn_matmul"},
      {"an unknown pass", [](auto& j) { j["shapes"][0]["pass"] = "step"; },
       "/shapes/0/pass: unknown pass 'step'; valid: fwd, bwd"},
      {"an unknown dtype", [](auto& j) { j["shapes"][2]["dtype"] = "fp8"; },
       "/shapes/2/dtype: unknown dtype 'fp8'; valid: fp16, bf16, fp32, tf32"},
      {"a zero dimension", [](auto& j) { j["shapes"][0]["m"] = 0; },
       "/shapes/0/m: 0 is out of range [1, 1099511627776]"},
      {"a fractional dimension", [](auto& j) { j["shapes"][0]["k"] = 7.5; },
       "/shapes/0/k: expected an integer, found a number (7.5)"},
      {"a negative time", [](auto& j) { j["shapes"][3]["median_s"] = -1e-3; },
       "/shapes/3/median_s: a time must be positive, got -0.001"},
      {"a time in the wrong unit", [](auto& j) { j["shapes"][3]["median_s"] = 12000; },
       "/shapes/3/median_s: 12000 s for one GEMM: the table holds seconds"},
      {"a time as text", [](auto& j) { j["shapes"][3]["median_s"] = "1ms"; },
       "/shapes/3/median_s: expected a number, found a string (\"1ms\")"},
      {"no time", [](auto& j) { j["shapes"][4].erase("median_s"); }, "/shapes/4/median_s: missing"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    nlohmann::json j = good;
    c.edit(j);
    CHECK(error_of([&] { parse_gemm_table("g.json", j.dump()); }) == "g.json: " + c.message);
  }
  CHECK(error_of([&] { parse_gemm_table("g.json", "{\"schema\": "); }).rfind("g.json: malformed JSON: ", 0) ==
        0);
  CHECK(error_of([&] { parse_gemm_table("g.json", "[1, 2]"); }) ==
        "g.json: /: expected an object (a GEMM table of bench/gpu/gemm_shapes.py), found an array");
}

TEST_CASE("calibrate's import: a GEMM table becomes the device's op model, replaced on --append",
          "[imports][gemm_table]") {
  vt::TempDir d;
  ScenarioFile f = read_scenario_file(vt::source("scenarios/local/fmnist-vit.xml"));
  const Scenario s = expand(f).front();  // this-machine.xml: gpu_model cpu, fp32
  // The truth: the platform's figures of its device with other GEMM figures (on the fit's grid).
  const PlatformFacts facts = read_platform_facts(s.cluster.platform);
  const DeviceFigures platform = device_figures(facts.gpu.begin()->second, Precision::FP32);
  DeviceFigures truth = platform;
  truth.tile_m = truth.tile_n = 32;
  truth.gemm_efficiency = 0.35;
  truth.gemm_k_half = 32;
  truth.attn_efficiency = 0.2;
  truth.host_op_s = 5e-6;
  ImportOptions o;
  o.out = d / "calib.json";
  o.gemm_table =
      d.file("g.json", gemm_table_json(truth, "fp32", "vit_fmnist_tiny", {2, 8, 32}, {64, 256}).dump());
  o.verbose = false;
  o.command = "vitsim calibrate (test)";
  const Calibration c = import_measurements(s, o);  // read back from the file it wrote
  REQUIRE(c.op_models.size() == 1);
  const OpModelCalibration& m = c.op_models[0];
  CHECK(m.figures.device_type == "cpu");  // the platform's first GPU
  CHECK(m.precision == Precision::FP32);
  CHECK(m.figures.tile_m == 32);
  CHECK(m.figures.gemm_k_half == 32);
  CHECK(m.figures.gemm_efficiency == Approx(0.35).epsilon(0.01));
  CHECK(m.figures.attn_efficiency == Approx(0.2).epsilon(0.01));
  CHECK(m.figures.host_op_s == platform.host_op_s);
  CHECK(m.figures.async == platform.async);
  CHECK(c.provenance.at("gemm_table").rfind("GEMM table " + o.gemm_table + ": ", 0) == 0);
  // --append with another table of the same device and precision replaces the entry.
  truth.gemm_efficiency = 0.5;
  ImportOptions again = o;
  again.append = true;
  again.gemm_table =
      d.file("g2.json", gemm_table_json(truth, "fp32", "vit_fmnist_tiny", {2, 8, 32}, {64, 256}).dump());
  const Calibration merged = import_measurements(s, again);
  REQUIRE(merged.op_models.size() == 1);
  CHECK(merged.op_models[0].figures.gemm_efficiency == Approx(0.5).epsilon(0.01));
  // A device type the platform does not have: refused, naming its GPUs.
  ImportOptions other = o;
  other.force = true;
  other.device_type = "H100-SXM";
  CHECK(error_of([&] { import_measurements(s, other); }) ==
        s.cluster.platform + ": no GPU of gpu_model 'H100-SXM' (--device-type); its GPUs: cpu");
}
