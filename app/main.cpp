// vitsim: predict (and, where built, train) distributed ViT training.
#include <fmt/format.h>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/identity.hpp"

namespace {

using vitsim::did_you_mean;
using vitsim::echo;

// A command line error on one line: CLI11's text without its second line, a value longer than 48
// characters cut to its start (a 10^6-digit number is not echoed back).
std::string one_line(const std::string& what) {
  std::string out, word;
  auto flush = [&] {
    out += word.size() > 48 ? word.substr(0, 24) + fmt::format("... ({} characters)", word.size()) : word;
    word.clear();
  };
  for (char ch : what) {
    if (ch == '\n' || ch == '\r' || ch == ' ' || ch == '\t') {
      flush();
      out += ' ';
    } else {
      word += ch;
    }
  }
  flush();
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// The long and short names ("--calibration", "-j") of a command's options and flags.
std::vector<std::string> option_names(const CLI::App* app) {
  std::vector<std::string> out;
  for (const CLI::Option* o : app->get_options()) {
    for (const auto& n : o->get_lnames()) out.push_back("--" + n);
    for (const auto& n : o->get_snames()) out.push_back("-" + n);
  }
  return out;
}

// What CLI11 failed on, said the way vitsim says it: an unknown command or flag named with the closest
// known one ("did you mean"), else CLI11's own line. Finds the first word of argv that the command line
// does not know, scanning as CLI11 does (the first non-flag word is the subcommand).
std::string usage_error(const CLI::App& cli, int argc, char** argv, const CLI::ParseError& e) {
  std::vector<std::string> commands;
  for (const CLI::App* sub : cli.get_subcommands([](const CLI::App*) { return true; }))
    commands.push_back(sub->get_name());
  const CLI::App* sub = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") break;
    if (!sub) {
      if (word.empty() || word[0] != '-') {
        for (const CLI::App* c : cli.get_subcommands([](const CLI::App*) { return true; }))
          if (c->get_name() == word) sub = c;
        if (!sub) {
          std::string list;
          for (const auto& c : commands) list += (list.empty() ? "" : ", ") + c;
          return fmt::format("unknown command '{}'{}; commands: {}", echo(word), did_you_mean(word, commands),
                             list);
        }
      } else if (word != "--help" && word != "-h" && word != "--version") {
        return fmt::format("unknown option '{}' before the command{}", echo(word),
                           did_you_mean(word, {"--help", "--version"}));
      }
      continue;
    }
    if (word.size() < 2 || word[0] != '-' ||
        (word[1] != '-' && std::isdigit(static_cast<unsigned char>(word[1]))))
      continue;  // a value (or a negative number)
    // "--name=value", "-j4" and "-qj" (short flags take their value or more flags attached).
    const std::string name = word[1] == '-' ? word.substr(0, word.find('=')) : word.substr(0, 2);
    if (name == "--help" || name == "-h") continue;
    bool known = false;
    for (const CLI::Option* o : sub->get_options()) known = known || o->check_name(name);
    if (!known) {
      const std::vector<std::string> names = option_names(sub);
      return fmt::format("vitsim {}: unknown option '{}'{} (vitsim {} --help lists them)", sub->get_name(),
                         echo(name), did_you_mean(name, names), sub->get_name());
    }
  }
  if (!sub && e.get_name() == "RequiredError")
    return "a command is required: vitsim COMMAND ...; commands: " + [&] {
      std::string list;
      for (const auto& c : commands) list += (list.empty() ? "" : ", ") + c;
      return list;
    }();
  const std::string what = one_line(e.what());
  if (sub && what.rfind("scenario excludes --scenario", 0) == 0)  // app/common.cpp add_scenario
    return fmt::format("vitsim {}: the scenario given twice (SCENARIO.xml and --scenario): give it once",
                       sub->get_name());
  // A flag's value refused by its check (core's number readers) says what is expected already.
  if (e.get_name() == "ValidationError") return what;
  return fmt::format("{} (vitsim {}--help lists the options)", what, sub ? sub->get_name() + " " : "");
}

// Output to stdout that could not be written (a full disk, a closed pipe) is an error, not a success:
// flush and close it and report the first failure.
int finish_stdout(int status) {
  // std::cout shares stdio's buffer: its flush may be the write that fails (ENOSPC on a full file system),
  // and the fflush below then has nothing left to say why.
  errno = 0;
  std::cout.flush();
  const int cout_errno = std::ferror(stdout) ? errno : 0;
  int err = 0;
  bool failed = std::cout.fail();  // CLI11's --help and --version write through std::cout
  errno = 0;
  if (std::fflush(stdout) != 0) err = errno;
  failed = failed || err != 0 || std::ferror(stdout);
  if (failed && err == 0) err = vitsim::app::stdout_error();
  if (failed && err == 0) err = cout_errno;
  // A write that failed earlier (inside fwrite) left no errno behind: a write of nothing asks the file
  // again (a full device answers ENOSPC, a closed descriptor EBADF).
  if (failed && err == 0 && write(fileno(stdout), "", 0) < 0) err = errno;
  errno = 0;
  if (std::fclose(stdout) != 0 && !failed) {
    failed = true;
    err = errno;
  }
  if (!failed) return status;
  if (err == 0) err = EIO;
  fmt::print(stderr, "vitsim: error: writing standard output: {}\n", std::strerror(err));
  return status == 0 ? 1 : status;
}

}  // namespace

int main(int argc, char** argv) {
  vitsim::reserve_standard_fds();  // before anything opens a file
  CLI::App cli{"vitsim: predict and measure data-parallel Vision Transformer training"};
  cli.require_subcommand(1);
  cli.set_version_flag("--version",
                       fmt::format("vitsim {}", vitsim::vitsim_version()));  // CMake's project(VERSION)
  vitsim::app::add_usage_json(cli);  // hidden: the flags tables of docs/ (app/commands.hpp)
  vitsim::app::Action action;
#if defined(VITSIM_TRAINER_ONLY)
  // The trainer-only build (cmake -DVITSIM_TRAINER_ONLY=ON): no simulator, no calibration.
  vitsim::app::add_train(cli, action);
#elif defined(VITSIM_TORCH_HELPER)
  // vitsim-torch: what the full build's vitsim becomes for these two, by execv() with its own arguments
  // (app/torch/exec.cpp); the same flags, parsed again here.
  vitsim::app::add_train(cli, action);
  vitsim::app::add_calibrate(cli, action);
#else
  vitsim::app::add_predict(cli, action);
  vitsim::app::add_validate(cli, action);
  vitsim::app::add_plot(cli, action);
  vitsim::app::add_plan(cli, action);
  vitsim::app::add_platform(cli, action);
  vitsim::app::add_collective(cli, action);
  vitsim::app::add_fit(cli, action);
  // With LibTorch these two run in vitsim-torch (app/torch/exec.cpp); without it they say how to rebuild
  // (app/cmd_no_torch.cpp).
  vitsim::app::add_train(cli, action);
  vitsim::app::add_calibrate(cli, action);
#endif
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return finish_stdout(cli.exit(e));  // --help, --version
    fmt::print(stderr, "vitsim: error: {}\n", usage_error(cli, argc, argv, e));
    return 2;
  }
  int status = 3;
  try {
    // Ctrl-C, SIGTERM, SIGHUP: children ended, temporary folders removed, one line, exit 128 + signal.
    // `train` too (mpirun passes Ctrl-C on to its ranks as SIGTERM): its line says at which step the run
    // stopped and what was saved (real/src/trainer/trainer.cpp).
    vitsim::install_interrupt_cleanup("vitsim");
    // The action's status: 0, 4 validate over its tolerance, 5 plan with no feasible point, 6 some points of
    // a sweep failed and the rest were written (docs/errors.md).
    status = action ? action() : 2;
  } catch (const vitsim::app::UsageError& e) {  // a bad command line found after parsing
    fmt::print(stderr, "vitsim: error: {}\n", e.what());
    status = 2;
  } catch (const vitsim::Error& e) {
    vitsim::stop_if_interrupted();  // an interruption's consequence, reported by its watcher
    fmt::print(stderr, "vitsim: error: {}\n", e.what());
    status = 1;
  } catch (const std::exception& e) {
    vitsim::stop_if_interrupted();
    fmt::print(stderr, "vitsim: internal error: {}\n", e.what());
    status = 3;
  }
  vitsim::stop_if_interrupted();
  return finish_stdout(status);
}
