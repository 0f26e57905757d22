// vitsim-plan-mpi: `vitsim plan` across the ranks of an MPI job.
//
//   mpirun -np K vitsim-plan-mpi SCENARIO.xml [vitsim plan options...] [--format F] [--out FILE] [--top N]
//
// Rank r runs `vitsim plan ... --shard r/K --format json` (the vitsim binary next to this one, or
// --vitsim PATH) in a private temporary folder, then every rank sends its shard's JSON to rank 0
// (MPI_Gatherv), which merges and ranks them (core::merge_plans) and writes the result. The same
// output as `vitsim plan` on one machine (a test). This is a separate program because libsimgrid exports
// MPI_* symbols (SMPI): the simulator binary cannot also be an OpenMPI program. Only core is linked here.
#include <fmt/format.h>
#include <mpi.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/mpi_check.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/formats/scenario_inputs.hpp"
#include "vitsim/core/results/plan.hpp"

extern char** environ;

namespace {
namespace fs = std::filesystem;

struct Args {
  std::string vitsim, format = "table", out;
  int top = 20;
  std::vector<std::string> plan;  // passed through to `vitsim plan`
};

// --top as `vitsim plan` reads it: a whole number in 0 .. 2^30 (0: every row).
int top_rows(const std::string& text) {
  try {
    return static_cast<int>(vitsim::units::parse_integer(text, 0, 1 << 30));
  } catch (const vitsim::Error& e) {
    throw vitsim::Error(fmt::format("--top: {}", e.what()));
  }
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&](const char* name) {
      if (i + 1 >= argc) throw vitsim::Error(fmt::format("{} needs a value", name));
      return std::string(argv[++i]);
    };
    if (s == "--vitsim")
      a.vitsim = value("--vitsim");
    else if (s == "--format")
      a.format = value("--format");
    else if (s == "--out")
      a.out = value("--out");
    else if (s == "--top")
      a.top = top_rows(value("--top"));
    else if (s == "--shard" || s == "--merge")
      throw vitsim::Error(fmt::format("{}: vitsim-plan-mpi shards by rank itself", s));
    else
      a.plan.push_back(s);
  }
  if (a.format != "table" && a.format != "json" && a.format != "csv")
    throw vitsim::Error(fmt::format("--format '{}': valid: table, json, csv", a.format));
  if (a.vitsim.empty()) {
    char self[PATH_MAX] = {0};
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) throw vitsim::Error("cannot find the vitsim binary: give --vitsim PATH");
    a.vitsim = (fs::path(std::string(self, n)).parent_path() / "vitsim").string();
  }
  return a;
}

// --out must not be one of the inputs: every pass-through argument that names an existing file, and the
// files a scenario among them reads (its platforms, DeepSpeed configs, what-if specs).
void check_outputs(const Args& a) {
  std::vector<vitsim::NamedPath> inputs;
  for (const auto& s : a.plan) {
    std::error_code ec;
    if (s.empty() || s[0] == '-' || !fs::is_regular_file(s, ec)) continue;
    inputs.push_back({s, "the input"});
    try {
      if (fs::path(s).extension() == ".xml")
        for (auto& in : vitsim::scenario_inputs(vitsim::read_scenario_file(s)))
          inputs.push_back(std::move(in));
    } catch (const vitsim::Error&) {
      // not a scenario (or a broken one, which vitsim plan reports)
    }
  }
  vitsim::check_output_paths({{a.out, "--out"}}, inputs);
}

// Runs `vitsim plan ... --shard rank/size --format json --out FILE` and returns FILE's text, or an error
// line starting with "error: ".
std::string run_shard(const Args& a, int rank, int size) {
  vitsim::TempDir tmp("vitsim-plan-mpi-");  // registered: removed on SIGINT/SIGTERM too
  const std::string out = tmp.path() + "/shard.json";
  std::vector<std::string> args{a.vitsim, "plan"};
  for (const auto& s : a.plan) args.push_back(s);
  for (const std::string& s : {std::string("--shard"), fmt::format("{}/{}", rank, size),
                               std::string("--format"), std::string("json"), std::string("--out"), out})
    args.push_back(s);
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::string result;
  std::fflush(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();  // not posix_spawn: the child must die with this rank (child_after_fork)
  if (pid == 0) {
    vitsim::child_after_fork(parent);
    execv(a.vitsim.c_str(), argv.data());
    std::fprintf(stderr, "vitsim-plan-mpi: cannot start %s: %s\n", a.vitsim.c_str(), std::strerror(errno));
    _exit(127);
  }
  if (pid < 0) {
    result = fmt::format("error: cannot start {}: {}", a.vitsim, std::strerror(errno));
  } else {
    vitsim::register_child(pid);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    vitsim::unregister_child(pid);
    vitsim::stop_if_interrupted();
    // 6: the shard is written, some of its points failed (excluded as "failed: ..."): merged like the rest,
    // so that one failed point does not lose the plan (issue 27).
    if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 6))
      result = fmt::format(
          "error: rank {}: vitsim plan --shard {}/{} failed (exit status {}; its message is above)", rank,
          rank, size, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    else
      result = vitsim::read_file(out);
  }
  return result;
}

int run(int argc, char** argv) {
  VITSIM_MPI_CHECK(MPI_Init(&argc, &argv));
  int rank = 0, size = 1;
  VITSIM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  VITSIM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  int status = 0;
  std::string mine;
  Args a;
  try {
    vitsim::install_interrupt_cleanup("vitsim-plan-mpi");
    a = parse(argc, argv);
    check_outputs(a);  // on every rank (it only reads): none of them starts a shard in vain
    mine = run_shard(a, rank, size);
  } catch (const std::exception& e) {
    mine = std::string("error: ") + e.what();
  }
  // Gather every shard's JSON (or error) on rank 0.
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(size), offsets(size);
  VITSIM_MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  std::string all;
  if (rank == 0) {
    long long total = 0;
    for (int r = 0; r < size; ++r) {
      offsets[r] = static_cast<int>(total);
      total += lens[r];
    }
    if (total > INT_MAX) {
      std::fprintf(stderr, "vitsim-plan-mpi: shards too large to gather (%lld bytes)\n", total);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    all.resize(static_cast<size_t>(total));
  }
  VITSIM_MPI_CHECK(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR,
                               0, MPI_COMM_WORLD));
  if (rank == 0) {
    try {
      std::vector<vitsim::PlanResult> shards;
      for (int r = 0; r < size; ++r) {
        std::string text = all.substr(offsets[r], lens[r]);
        if (text.rfind("error: ", 0) == 0) throw vitsim::Error(text.substr(7));
        shards.push_back(vitsim::plan_from_json(text, fmt::format("rank {}'s shard", r)));
      }
      vitsim::PlanResult plan = vitsim::merge_plans(shards);
      std::string text = a.format == "json"  ? vitsim::plan_to_json(plan)
                         : a.format == "csv" ? vitsim::plan_to_csv(plan)
                                             : vitsim::plan_to_table(plan, a.top);
      if (a.out.empty())
        std::fwrite(text.data(), 1, text.size(), stdout);
      else
        vitsim::write_file_atomic(a.out, text);
      size_t failed = 0;
      for (const auto& p : plan.points) failed += p.excluded.rfind("failed: ", 0) == 0;
      if (failed > 0) {
        std::fflush(stdout);
        std::fprintf(
            stderr,
            "vitsim-plan-mpi: error: %zu of %zu points failed; the plan lists them with their reason\n",
            failed, plan.points.size());
        status = 6;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "vitsim-plan-mpi: error: %s\n", e.what());
      status = 1;
    }
  }
  VITSIM_MPI_CHECK(MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD));
  MPI_Finalize();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // a failed MPI call (VITSIM_MPI_CHECK): the job cannot go on
    std::fprintf(stderr, "vitsim-plan-mpi: error: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 3);
    return 3;
  }
}
