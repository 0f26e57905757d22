// vitsim: predict (and, where built, train) distributed ViT training.
#include <fmt/format.h>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>

#include "commands.hpp"
#include "vitsim/core/error.hpp"
#include "vitsim/core/io.hpp"

namespace {

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

// Output to stdout that could not be written (a full disk, a closed pipe) is an error, not a success:
// flush and close it and report the first failure.
int finish_stdout(int status) {
  std::cout.flush();
  int err = 0;
  bool failed = std::cout.fail();  // CLI11's --help and --version write through std::cout
  errno = 0;
  if (std::fflush(stdout) != 0) err = errno;
  failed = failed || err != 0 || std::ferror(stdout);
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
  cli.set_version_flag("--version", "vitsim 0.1.0");
  vitsim::app::Action action;
#ifdef VITSIM_TRAINER_ONLY
  // The trainer-only build (cmake -DVITSIM_TRAINER_ONLY=ON): no simulator, no calibration.
  vitsim::app::add_train(cli, action);
#else
  vitsim::app::add_predict(cli, action);
  vitsim::app::add_validate(cli, action);
  vitsim::app::add_plot(cli, action);
  vitsim::app::add_plan(cli, action);
  vitsim::app::add_platform(cli, action);
#ifdef VITSIM_HAVE_REAL
  vitsim::app::add_train(cli, action);
  vitsim::app::add_calibrate(cli, action);
#endif
#endif
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return finish_stdout(cli.exit(e));  // --help, --version
    fmt::print(stderr, "vitsim: error: {} (vitsim --help lists the options)\n", one_line(e.what()));
    return 2;
  }
  int status = 3;
  try {
    // Ctrl-C, SIGTERM, SIGHUP: children ended, temporary folders removed, exit 128 + signal. `train` is
    // left to mpirun, which ends its ranks itself.
    bool train = false;
    for (const CLI::App* sub : cli.get_subcommands()) train = train || sub->get_name() == "train";
    if (!train) vitsim::install_interrupt_cleanup("vitsim");
    status = action ? action() : 2;
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
