#pragma once
// Each subcommand lives in its own file and registers itself on the CLI here. app/ holds no logic:
// it parses flags, calls the libraries and turns their exceptions into exit codes (main.cpp).
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/scenario.hpp"

namespace vitsim::app {

// The action of the chosen subcommand; returns the process exit status.
using Action = std::function<int()>;

// A bad command line found after CLI11's parse (flags that do not go together, a malformed flag value):
// exit status 2, like CLI11's own errors.
class UsageError : public Error {
 public:
  using Error::Error;
};

// Every subcommand takes its scenario the same way: positional SCENARIO.xml, `--scenario FILE` kept as an
// alias. require_scenario throws UsageError when neither was given (`what`: the rest of the usage line).
void add_scenario(CLI::App* c, std::string& scenario, const std::string& help = "scenario XML file");
void require_scenario(const std::string& command, const std::string& scenario, const std::string& what = "");

// --set KEY=VALUE for every subcommand: an unknown key gets "did you mean" (core/base/suggest.hpp), the rest
// is core's apply_override.
void apply_sets(ScenarioFile& f, const std::vector<std::string>& sets);
// --what-if EDIT (predict, plan): the edits go after the scenario's own whatif.edits, ';'-separated, and
// the key's origin becomes "--what-if". No edits: the file is left as it was.
void add_what_ifs(ScenarioFile& f, const std::vector<std::string>& edits);

// CLI11 checks by core's strict number readers: "--budget: '$100' is not a number", "--jobs: 0 is out of
// range: expected 1 .. 4096", instead of CLI11's conversion errors.
CLI::Validator number(const units::Range& r);
CLI::Validator integer(long long lo, long long hi);

// A command's result onto standard output. Written with fwrite, which never throws: a write that fails (a
// full disk, a closed descriptor) is reported once by main's finish_stdout, "writing standard output: REASON"
// and exit 1 (docs/errors.md). fmt::print threw instead once the text outgrew stdio's buffer, and a plan's
// JSON onto a full standard output exited 3 "internal error" (issue 27).
void print_stdout(const std::string& text);
// The errno of print_stdout's first failed write (0: none), for main's one line.
int stdout_error();
// A command's result: to `out` (written atomically), or to standard output when `out` is empty.
void write_output(const std::string& out, const std::string& text);

// The platform `vitsim platform --gpu GPU --nodes N --gpus-per-node K --nic-speed SPEED --nics C` writes, as
// XML, every other flag at its default (cmd_platform.cpp): `vitsim plan`'s one-line form.
std::string platform_xml_for(const std::string& gpu, int nodes, int gpus_per_node,
                             const std::string& nic_speed, int nics);

// `vitsim plan --gpu ... --model ... --dataset ... [--deepspeed FILE]` (plan_one_line.cpp): the platform and
// the scenario that `vitsim platform` and a hand-written file would give, written into `dir` as platform.xml
// and scenario.xml; returns the scenario's path. A saved scenario already there (the same command run before)
// is kept in `saved` for save_one_line_search to compare.
struct OneLinePlan {
  std::string gpu, nic, model, dataset, deepspeed;
  int nodes = 1, gpus_per_node = 1;
};
// Its flags (--gpu, --nodes, --gpus-per-node, --nic, --model, --dataset, --deepspeed), as `vitsim plan` takes
// them; one definition for the command and its fuzzer (fuzz/fuzz_surfaces.cpp).
void add_one_line_options(CLI::App* c, OneLinePlan& q);
std::string write_one_line_scenario(const OneLinePlan& q, const std::string& dir, std::string* saved);
// The one-line form's scenario read from its temporary folder: each attribute's origin becomes the flag that
// gave it (--gpu, --nodes, --model, --dataset, --deepspeed), so that a message names the user's input, not
// a file that is gone when the command ends (issue 39 item 21).
void name_one_line_origins(ScenarioFile& f);
// A message of the one-line form planned in its temporary folder `dir`: the folder's platform.xml and
// scenario.xml named by the flags that made them ("the platform of --gpu t4"), as a value's path names them
// where no origin does ("no node 'x' in PATH"): the folder is gone when the command ends (issue 39).
std::string name_one_line_files(std::string message, const std::string& dir, const OneLinePlan& q);
// --save-scenario: the one-line search's values (those of origin "--set KEY (the one-line search)") added to
// the saved scenario at `path` as its elements' attributes and <sweep>s; where `saved` (what was there before
// this command) differs from the result, it is put back and the run refused (edited since it was saved).
void save_one_line_search(const ScenarioFile& f, const std::string& path, const std::string& saved);

// Exit status 6 (docs/errors.md): the output was written, but some points have no result (their simulation
// failed: a killed process, an error of their own). Prints one line on stderr naming how many and the first,
// and returns 6; returns `status` when none failed. `first`: "point 3 (...): REASON".
int some_points_failed(const std::string& command, size_t failed, size_t total, const std::string& first,
                       int status);

// The configure line that builds the real trainer (docs/trainer.md, Build): what a build without LibTorch
// says for train, calibrate and validate --run.
inline constexpr const char* kRebuildWithTorch =
    "cmake -S . -B build -DVITSIM_WITH_TORCH=ON -DTorch_DIR=/path/to/libtorch/share/cmake/Torch "
    "&& cmake --build build --target vitsim";

// The executable that runs `train` and a measuring `calibrate` for the full build's `vitsim`
// (app/torch/exec.cpp): $VITSIM_TORCH_EXE when set (tests put a stand-in there), else `vitsim-torch` in the
// folder of /proc/self/exe. Empty when that is not an executable file; `why` then names what was looked for.
std::string torch_executable(std::string* why = nullptr);
// The hidden top-level flag `--usage-json`: prints every subcommand's options as CLI11 holds them (names,
// value type, default, description) as JSON on standard output and exits 0. The one source of the flags
// tables of docs/ (tests/cli/test_usage_docs.cpp renders them); called by every executable that defines
// subcommands, after adding them. A subcommand that takes any arguments unread (prefix_command: a stand-in
// or a command run by another executable) is listed with "flags_here": false and no options.
void add_usage_json(CLI::App& cli);

void add_predict(CLI::App& cli, Action& action);
void add_validate(CLI::App& cli, Action& action);
void add_plot(CLI::App& cli, Action& action);
void add_plan(CLI::App& cli, Action& action);
void add_platform(CLI::App& cli, Action& action);
void add_collective(CLI::App& cli, Action& action);
void add_fit(CLI::App& cli, Action& action);
// `train` and `calibrate`: where LibTorch was found their flags (cmd_train.cpp, cmd_calibrate.cpp; the work
// in vitsim-torch, torch/train_command.hpp), else stand-ins that say how to rebuild (cmd_no_torch.cpp).
void add_train(CLI::App& cli, Action& action);
void add_calibrate(CLI::App& cli, Action& action);

}  // namespace vitsim::app
