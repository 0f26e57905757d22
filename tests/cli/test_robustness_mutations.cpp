// Issue 39: seeded mutations of the new surfaces' command lines, in every suite. `vitsim collective`'s flags
// (sizes, --func, the --nccl-* flags, -b/-e/-f/-i, rank counts), the one-line plan (`vitsim plan --gpu ...
// --nodes ... --model ...` and --set values) and the interval flags (--interval, --p-low/--p-high,
// --interval-seed, --samples, --runs). Each case starts from a command line that runs, replaces, drops,
// repeats or garbles its tokens with a fixed seed, runs it under a CPU-time and a wall-clock limit and
// requires what docs/errors.md promises: an exit status of the command's documented set, a refusal as one
// line `vitsim: error: ...` (nothing else on the terminal, no "internal error"), no crash, no hang, and
// nothing written on a refusal. The fuzzers (fuzz/fuzz_surfaces.cpp, bench/fuzz.sh) drive the same readers
// in process, for longer.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <random>
#include <set>

#include "test_util.hpp"
#include "tiny_scenario.hpp"

namespace fs = std::filesystem;

namespace {

// A token as the shell passes it, whatever it holds.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Every file of the folder with its size and content's hash: what a refused command must leave as it was.
std::map<std::string, std::string> listing(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string rel = fs::relative(e.path(), dir).string();
    out[rel] = e.is_regular_file() ? std::to_string(std::hash<std::string>{}(vitsim::read_file(e.path())))
                                   : std::string("folder");
  }
  return out;
}

// A flag and values to give it: values that run, the ends of its range and just past them, and garbage.
struct Flag {
  std::string name;
  std::vector<std::string> values;  // empty: a flag without a value
};

// Tokens any value may be replaced with: a number's hostile forms (issue 12's classes: nan, inf, 1e300,
// 2^63, hexadecimal, a comma list, a unit where none goes), an empty value, a flag where a value goes.
const std::vector<std::string> kHostile{"",
                                        "-1",
                                        "0",
                                        "nan",
                                        "inf",
                                        "1e300",
                                        "1e-300",
                                        "0x10",
                                        "1,2",
                                        "2.5",
                                        "abc",
                                        "-",
                                        "--",
                                        "9223372036854775808",
                                        "18446744073709551616",
                                        "8X",
                                        "--quiet",
                                        "=",
                                        "ring",
                                        "^",
                                        " 4",
                                        "4 "};

struct Surface {
  std::string name;
  std::vector<std::string> base;  // the command line that runs (after `vitsim`)
  std::vector<Flag> flags;        // what a mutation adds or gives another value
  std::set<int> statuses;         // docs/errors.md: the command's exit statuses
  int mutations;
};

// One mutation of `argv`: a flag of the surface set to one of its values (or a hostile one; added where the
// line lacks it), a value replaced by a hostile one or garbled (a character replaced or inserted, the value
// cut), or a flag dropped with its value. Most stay well-formed command lines, so that the mutations reach
// the readers behind the flags (a repeated or unknown flag is CLI11's refusal and ends there).
std::vector<std::string> mutate(std::vector<std::string> argv, const Surface& s, std::mt19937& gen) {
  const auto pick = [&gen](const auto& v) -> const auto& {
    return v[gen() % v.size()];
  };
  const size_t fixed = s.name == "collective" ? 2 : 1;  // the subcommand (and the platform) stay
  // The values of the line: tokens after the fixed ones that are not flags.
  std::vector<size_t> values;
  for (size_t i = fixed; i < argv.size(); ++i)
    if (argv[i].rfind("-", 0) != 0) values.push_back(i);
  switch (gen() % 8) {
    case 0:
    case 1:
    case 2:
    case 3: {  // a flag set to one of its values, 1 in 5 a hostile one
      const Flag& f = pick(s.flags);
      const std::string value = f.values.empty() ? "" : gen() % 5 ? pick(f.values) : pick(kHostile);
      const auto at = std::find(argv.begin(), argv.end(), f.name);
      if (at == argv.end()) {
        argv.push_back(f.name);
        if (!f.values.empty()) argv.push_back(value);
      } else if (!f.values.empty() && at + 1 != argv.end()) {
        *(at + 1) = value;
      }
      break;
    }
    case 4:  // a value replaced by a hostile one
      if (!values.empty()) argv[pick(values)] = pick(kHostile);
      break;
    case 5:
    case 6: {  // a value garbled: a character replaced or inserted, or the value cut
      if (values.empty()) break;
      std::string& t = argv[pick(values)];
      const std::string chars = ",:^=.-eEKMG0 x\"'\\";
      const size_t at = t.empty() ? 0 : gen() % t.size();
      if (t.empty() || gen() % 3 == 0)
        t.insert(at, 1, chars[gen() % chars.size()]);
      else if (gen() % 2)
        t[at] = chars[gen() % chars.size()];
      else
        t.erase(at);
      break;
    }
    default: {  // a flag dropped with its value
      std::vector<size_t> flags;
      for (size_t i = fixed; i < argv.size(); ++i)
        if (argv[i].rfind("-", 0) == 0) flags.push_back(i);
      if (flags.empty()) break;
      const size_t at = pick(flags);
      const bool valued = at + 1 < argv.size() && argv[at + 1].rfind("-", 0) != 0;
      argv.erase(argv.begin() + static_cast<long>(at), argv.begin() + static_cast<long>(at + 1 + valued));
    }
  }
  return argv;
}

// Runs `mutations` seeded mutations of the surface in a folder made by `setup`; returns how many ran (exit
// 0) and how many were refused.
void check_surface(const Surface& s, const std::function<void(const vt::TempDir&)>& setup) {
  const vt::TempDir d;
  setup(d);
  // The cores are shared in CI: the wall-clock limit is generous, the CPU-time limit is what bounds a run.
  // A hang or a run past them is killed (status 137 or 152), which no documented status is. The address-space
  // limit is left out of a build with AddressSanitizer (the sanitize presets), which reserves terabytes of
  // shadow memory at start: under 4 GB every run died before main ("failed to allocate 0xdfff0001000").
#if defined(__SANITIZE_ADDRESS__)
  const std::string limits = "ulimit -t 20; exec timeout -s KILL 60 ";
#else
  const std::string limits = "ulimit -t 20; ulimit -v 4000000; exec timeout -s KILL 60 ";
#endif
  std::mt19937 gen(39);  // the number: any fixed seed, the sequence is fixed by the C++ standard
  int ran = 0, refused = 0;
  for (int i = 0; i < s.mutations; ++i) {
    std::vector<std::string> argv = s.base;
    for (int k = 1 + gen() % 3; k > 0; --k) argv = mutate(argv, s, gen);
    std::string cmd;
    for (const auto& t : argv) cmd += " " + quoted(t);
    const auto before = listing(d.path);
    const auto r = vt::run("cd " + quoted(d.path.string()) + " && (" + limits + VITSIM_BINARY + cmd + ")");
    INFO(s.name << " mutation " << i << ": vitsim" << cmd << "\nstatus " << r.status << "\n" << r.out);
    REQUIRE(s.statuses.count(r.status) == 1);
    CHECK(r.out.find("internal error") == std::string::npos);
    if (r.status == 0) {
      ++ran;
      continue;
    }
    ++refused;
    // One line on the terminal (outputs go to --out, -q stands): `vitsim: error: ...`.
    CHECK(r.out.rfind("vitsim: error: ", 0) == 0);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
    if (r.status == 1 || r.status == 2) CHECK(listing(d.path) == before);  // nothing written on a refusal
  }
  // Both sides reached: the mutations are neither all refused nor all harmless.
  CHECK(ran > 0);
  CHECK(refused > 0);
}

// The catalogue's T4 (16 GB, PCIe): two nodes of two GPUs, the smallest platform with a network.
void t4_platform(const vt::TempDir& d) {
  const auto r = vt::vitsim("platform --gpu t4 --nodes 2 --gpus-per-node 2 --nic-speed 100gbe --out " +
                            quoted(d / "p.xml"));
  if (r.status != 0) throw std::runtime_error("vitsim platform: " + r.out);
}

}  // namespace

TEST_CASE("seeded mutations of vitsim collective's flags: refused in one line or answered",
          "[robustness][mutations]") {
  // Sizes up to 1 KiB on 4 ranks: each run is a few simulated transfers; mutations reach 8G (refused on a
  // 16 GB T4 by its buffers) and past it, and the rank counts past the platform's.
  const Surface s{
      "collective",
      {"collective", "p.xml", "-b", "8", "-e", "1K", "-q", "--out", "o.txt"},
      {{"-b", {"8", "1K", "32M", "0", "7", "1G"}},
       {"-e", {"64", "1K", "8G", "64G", "0", "1025"}},
       {"-f", {"2", "1", "1048576", "1048577", "0"}},
       {"-i", {"8", "1K", "0"}},
       {"--func", {"all_reduce", "alltoall", "broadcast", "all_gather", "reduce_scatter", "bogus"}},
       {"--collective", {"auto", "ring", "tree", "bogus"}},
       {"--nccl-version", {"2.18", "2.23", "2.27", "2.99", "2.18.3"}},
       {"--nccl-algo", {"ring", "^tree", "Tree,Ring", "ring;allreduce:tree", "bogus", ""}},
       {"--nccl-proto", {"LL128", "^LL", "simple", "bogus"}},
       {"--nccl-min-channels", {"0", "1", "64", "65"}},
       {"--nccl-max-channels", {"0", "2", "64", "65"}},
       {"--nodes", {"1", "2", "3", "16777216", "16777217"}},
       {"--hosts", {"node0", "node1,node0", "node0,node0", "nope"}},
       {"-g", {"1", "2", "3", "1048576"}},
       {"-d", {"float", "half", "bfloat16", "int8", "bogus"}},
       {"-o", {"sum", "avg", "mulsum", "bogus"}},
       {"-r", {"0", "3", "4", "16777217"}},
       {"--max-memory", {"1GiB", "1B", "0", "1e300GiB"}},
       {"--format", {"table", "json", "csv"}},
       {"--out", {"o.txt", "p.xml", "", "missing/o.txt", "."}}},
      {0, 1, 2},
      90};
  check_surface(s, t4_platform);
}

TEST_CASE("seeded mutations of the one-line plan and its --set values: refused in one line or planned",
          "[robustness][mutations]") {
  // vit_cifar_tiny on CIFAR-10 on one node of two T4s: the search is a handful of points; mutations reach
  // the counts' ends (2^20 nodes, 1024 GPUs a node: the scenario keys' own ends, scenario_limits.hpp), names
  // off the catalogue and --set values of every kind.
  const Surface s{"plan",
                  {"plan", "--gpu", "t4", "--gpus-per-node", "2", "--model", "vit_cifar_tiny", "--dataset",
                   "cifar10", "-q", "--out", "o.txt"},
                  {{"--gpu", {"t4", "h100-sxm", "a100-sxm-80gb", "T4", "bogus"}},
                   {"--nodes", {"1", "2", "0", "1048576", "1048577"}},
                   {"--gpus-per-node", {"1", "2", "1025", "65536"}},
                   {"--nic", {"100gbe", "ndr:8", "400Gbps:2", "ndr:0", "ndr:65", "ndr:", ":8", "bogus"}},
                   {"--model", {"vit_cifar_tiny", "vit_b_16", "vit_tiny_patch4_32", "bogus"}},
                   {"--dataset", {"cifar10", "synthetic", "imagenet1k", "bogus"}},
                   {"--deepspeed", {"missing.json", "p.xml", "ds.json"}},
                   {"--set",
                    {"training.micro_batch=8", "training.micro_batch=8,16", "training.micro_batch=0",
                     "training.micro_batch=1e300", "training.precision=fp16", "training.precision=bogus",
                     "training.epochs=1", "training.micro_bach=8", "simulation.steps=3", "zero.stage=3", "=",
                     "x", "cluster.nodes=2", "parallelism.collective=ring"}},
                   {"--global-batch", {"64", "1", "0", "1099511627777"}},
                   {"--top", {"1", "0", "-1"}},
                   {"--objective", {"cost", "energy", "bogus"}},
                   {"--save-scenario", {"saved", "p.xml", "ds.json"}},
                   {"--out", {"o.txt", "ds.json", "missing/o.txt", "."}},
                   {"--format", {"json", "csv", "xml"}}},
                  {0, 1, 2, 5, 6},
                  60};
  check_surface(s, [](const vt::TempDir& d) {
    t4_platform(d);
    d.file("ds.json", "{\"train_micro_batch_size_per_gpu\": 8, \"gradient_accumulation_steps\": 1}\n");
  });
}

TEST_CASE("seeded mutations of the interval flags: refused in one line or predicted with an interval",
          "[robustness][mutations]") {
  // The tiny CIFAR ViT on two T4s, two samples: an interval is a few simulations of a short run. Mutations
  // reach just past the flags' ends (1 and 4097 samples, quantiles 0 and 1, the seed 2^63), the quantiles
  // out of order, and --runs files that are no measured times; the values that run stay small (4096
  // samples would be a long run, not a fault).
  const Surface s{
      "interval",
      {"predict", "s.xml", "--interval", "--samples", "2", "-q", "--format", "json", "--out", "o.json"},
      {{"--interval", {}},
       {"--samples", {"2", "3", "1", "4097", "0"}},
       {"--p-low", {"0.2", "0.05", "0", "1", "0.95"}},
       {"--p-high", {"0.8", "0.95", "1", "0", "0.05"}},
       {"--interval-seed", {"5", "0", "9223372036854775807", "9223372036854775808", "-1"}},
       {"--runs", {"m.csv", "r.json", "empty.json", "s.xml", "missing.csv", "p.xml"}},
       {"--set", {"training.micro_batch=16", "training.micro_batch=16,32", "simulation.steps=4"}},
       {"--out", {"o.json", "m.csv", "s.xml", "missing/o.json"}}},
      {0, 1, 2, 6},
      60};
  check_surface(s, [](const vt::TempDir& d) {
    t4_platform(d);
    d.file("s.xml", vt::tiny_cifar_scenario("mutations"));
    // docs/fit.md's CSV form, and a measured report of the wrong kind (a prediction, which --runs refuses).
    d.file("m.csv", "training.micro_batch,step_time_s\n32,0.02\n16,0.012\n");
    d.file("empty.json", "[]\n");
    const auto r =
        vt::vitsim("predict " + quoted(d / "s.xml") + " -q --format json --out " + quoted(d / "r.json"));
    if (r.status != 0) throw std::runtime_error("vitsim predict: " + r.out);
  });
}
