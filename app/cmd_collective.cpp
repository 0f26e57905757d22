// `vitsim collective`: its flags are the CLI11 definitions below; their table in docs/collective.md is
// generated from them. nccl-tests' flags where it has them (-b -e -f -i -g -d -o -r, same names and meaning);
// --func names the collective (nccl-tests picks it by binary: all_reduce_perf), because -o/--op is the
// reduction op there.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/model/nccl_tuning.hpp"
#include "vitsim/core/results/nccl_table.hpp"
#include "vitsim/sim/collectives/collective.hpp"
#include "vitsim/sim/predict/collective_bench.hpp"

namespace vitsim::app {

namespace {

struct CollectiveArgs {
  sim::CollectiveBench bench;
  std::string min_bytes = "8", max_bytes = "8G", step_bytes;
  long long step_factor = 2;
  std::string func = "all_reduce";
  std::string max_memory;
  std::string launch_cost;
  std::string format = "table";
  std::string out;
  bool quiet = false;
};

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// A flag's value checked by a core function that throws Error with the message to show.
template <class F>
CLI::Validator checked_by(F check, const std::string& what) {
  return CLI::Validator(
      [check](std::string& text) -> std::string {
        try {
          check(text);
        } catch (const std::exception& e) {
          return e.what();
        }
        return {};
      },
      what);
}

// NCCL's versions whose tuner tables vitsim has ("2.18", ...), for --nccl-version's help.
std::vector<std::string> nccl_version_names() {
  std::vector<std::string> out;
  for (const NcclVersion& v : nccl_versions()) out.push_back(v.name);
  return out;
}

void add_flags(CLI::App* c, CollectiveArgs& a) {
  c->add_option("platform", a.bench.platform,
                "SimGrid platform file (docs/platforms.md); unlike the other commands, no scenario")
      ->required();
  const auto size = checked_by([](const std::string& t) { (void)parse_nccl_size(t); }, "SIZE");
  c->add_option(
       "-b,--minbytes", a.min_bytes,
       "smallest size, bytes with K, M or G (binary, 8G = 8 x 2^30) (default: 8; nccl-tests' own: 32M)")
      ->check(size);
  c->add_option("-e,--maxbytes", a.max_bytes, "largest size (default: 8G; nccl-tests' own: 32M)")
      ->check(size);
  c->add_option("-f,--stepfactor", a.step_factor,
                "multiply the size by this between rows (default: 2; nccl-tests' own: 1)")
      ->check(integer(1, 1 << 20));
  c->add_option("-i,--stepbytes", a.step_bytes,
                "add this to the size between rows: alone it means -f 1, with -f 2 or more it is an error")
      ->check(size);
  CLI::Option* nodes =
      c->add_option("--nodes", a.bench.nodes, "nodes used, in the platform's order (default: all)")
          ->check(integer(1, 1 << 24));
  c->add_option("--hosts", a.bench.hosts, "the nodes used, in rank order (comma list)")
      ->delimiter(',')
      ->excludes(nodes);
  c->add_option("-g,--ngpus,--gpus-per-node", a.bench.gpus_per_node,
                "GPUs used on each node (default: every GPU of the first node; nccl-tests: per process)")
      ->check(integer(1, 1 << 20));
  c->add_option("-d,--datatype", a.bench.type,
                "nccl-tests' type: " + joined(nccl_type_names()) + " (default: float)")
      ->check(checked_by([](const std::string& t) { (void)nccl_type_bytes(t); }, "TYPE"));
  c->add_option(
       "-o,--op", a.bench.redop,
       "reduction op, as nccl-tests' -o: sum, prod, max, min, avg, mulsum (printed; no effect on the time) "
       "(default: sum)")
      ->check(checked_by([](const std::string& t) { check_nccl_redop(t); }, "OP"));
  c->add_option("-r,--root", a.bench.root, "broadcast's root rank (default: 0)")->check(integer(0, 1 << 24));
  c->add_option("--func", a.func,
                "the collective: all_reduce, reduce_scatter, all_gather, alltoall, broadcast (nccl-tests' "
                "binary; not -o, the reduction op) (default: all_reduce)")
      ->check(checked_by([](const std::string& t) { (void)nccl_test(t); }, "NAME"));
  c->add_option("--collective", a.bench.algorithm,
                "the algorithm, as the scenario key parallelism.collective: " +
                    joined(sim::collective_names()) + " (default: auto)")
      ->check(checked_by([](const std::string& t) { (void)sim::make_collective(t); }, "NAME"));
  c->add_option("--nccl-version", a.bench.nccl_version,
                "with --collective auto: NCCL's tuner of this version, as the scenario key nccl.version: " +
                    joined(nccl_version_names()) + " (default: the newest)")
      ->check(checked_by([](const std::string& t) { (void)nccl_version(t); }, "VERSION"));
  c->add_option(
      "--nccl-algo", a.bench.nccl_algo,
      "with --collective auto: NCCL_ALGO in NCCL's syntax (\"ring\", \"^tree\"), as nccl.algo (default: "
      "NCCL's)");
  c->add_option(
      "--nccl-proto", a.bench.nccl_proto,
      "with --collective auto: NCCL_PROTO in NCCL's syntax (\"LL128\", \"^LL\"), as nccl.proto (default: "
      "NCCL's)");
  c->add_option(
       "--nccl-min-channels", a.bench.nccl_min_channels,
       "with --collective auto: NCCL_MIN_NCHANNELS, at least this many channels for rings and trees, as "
       "nccl.min_channels (default: NCCL's)")
      ->check(CLI::Range(0, 64));
  c->add_option(
       "--nccl-max-channels", a.bench.nccl_max_channels,
       "with --collective auto: NCCL_MAX_NCHANNELS, at most this many channels for rings and trees, as "
       "nccl.max_channels (default: NCCL's)")
      ->check(CLI::Range(0, 64));
  c->add_option("--gpus-per-thread", a.bench.gpus_per_thread,
                "the GPUs one host thread launches the calls of, one after another (nccl-tests' -g with "
                "-t 1, where one process drives several GPUs): each size takes at least this many launches "
                "(default: 1, a process per GPU, as mpirun ... -g 1 and training)")
      ->check(integer(1, 1 << 20));
  c->add_option("--launch-cost", a.launch_cost,
                fmt::format("the host's time to launch one GPU's call, with a unit (4.2us): the floor of a "
                            "size is --gpus-per-thread x this (default: {}, docs/sources.md)",
                            units::format_time(sim::kNcclLaunchPerGpuS)))
      ->check(checked_by(
          [](const std::string& t) { (void)units::parse(t, units::Kind::Time, units::non_negative()); },
          "TIME"));
  c->add_option(
       "--max-memory", a.max_memory,
       "the memory the simulation may take, with a unit (32GiB), as predict's simulation.max_memory: "
       "past the estimate vitsim refuses before building anything (default: half of this machine's "
       "memory, or 90% of ulimit -v)")
      ->check(checked_by(
          [](const std::string& t) { (void)units::parse(t, units::Kind::Bytes, units::positive()); },
          "SIZE"));
  c->add_option("--format", a.format, "output format (default: table)")
      ->check(CLI::IsMember({"table", "json"}));
  c->add_option("--out", a.out, "write the output to this file instead of stdout");
  c->add_flag("--quiet,-q", a.quiet, "no progress line on stderr");
}

// The sweep as nccl-tests reads -b, -e, -f and -i; -i alone means a step of bytes (-f 1).
NcclSweep sweep_of(const CollectiveArgs& a, const CLI::App* c) {
  NcclSweep s;
  s.min_bytes = parse_nccl_size(a.min_bytes);
  s.max_bytes = parse_nccl_size(a.max_bytes);
  s.step_factor = a.step_factor;
  const bool factor_given = c->count("--stepfactor") > 0, bytes_given = c->count("--stepbytes") > 0;
  if (bytes_given) {
    if (factor_given && a.step_factor > 1)
      throw UsageError(
          fmt::format("vitsim collective: -i {} steps by bytes and -f {} by a factor: give -f 1 "
                      "with -i, or -f alone",
                      a.step_bytes, a.step_factor));
    s.step_factor = 1;
    s.step_bytes = parse_nccl_size(a.step_bytes);
  }
  try {
    (void)nccl_sizes(s);
  } catch (const Error& e) {
    throw UsageError(fmt::format("vitsim collective: -b {} -e {}: {}", a.min_bytes, a.max_bytes, e.what()));
  }
  return s;
}

}  // namespace

void add_collective(CLI::App& cli, Action& action) {
  auto args = std::make_shared<CollectiveArgs>();
  CLI::App* c = cli.add_subcommand(
      "collective", "predict what nccl-tests' all_reduce_perf (or another *_perf) prints on a platform");
  add_flags(c, *args);
  c->callback([&action, args, c] {
    action = [args, c] {
      args->bench.sweep = sweep_of(*args, c);
      args->bench.func = nccl_test(args->func);
      args->bench.progress = !args->quiet;
      if (!args->launch_cost.empty())
        args->bench.launch_cost_s = units::parse(args->launch_cost, units::Kind::Time, units::non_negative());
      if (!args->max_memory.empty())
        args->bench.max_memory = units::parse(args->max_memory, units::Kind::Bytes, units::positive());
      // Before any work: the output writable and not the platform.
      check_output_paths({{args->out, "--out"}}, {{args->bench.platform, "the platform"}});
      const NcclTable t = sim::run_collective_bench(args->bench);
      const std::string text = args->format == "json" ? nccl_table_json(t) : nccl_table_text(t);
      write_output(args->out, text);
      return 0;
    };
  });
}

}  // namespace vitsim::app
