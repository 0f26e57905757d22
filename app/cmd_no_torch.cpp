// `vitsim train` and `vitsim calibrate` in a build without LibTorch: the subcommands exist and say how to
// get them (exit 2), instead of an unknown command falling through to the top-level help.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include "commands.hpp"

namespace vitsim::app {

namespace {
void add_missing(CLI::App& cli, Action& action, const std::string& name, const std::string& help) {
  CLI::App* c = cli.add_subcommand(name, help + " (not in this build: it needs LibTorch)");
  c->prefix_command();  // whatever follows is accepted: the answer is the same for every command line
  c->set_help_flag();   // `vitsim train --help` gets the rebuild line too
  c->callback([&action, name] {
    action = [name] {
      fmt::print(stderr, "vitsim {}: built without LibTorch: rebuild with {}\n", name, kRebuildWithTorch);
      return 2;
    };
  });
}
}  // namespace

void add_train(CLI::App& cli, Action& action) {
  add_missing(cli, action, "train", "train the scenario's ViT for real, data-parallel");
}

void add_calibrate(CLI::App& cli, Action& action) {
  add_missing(cli, action, "calibrate",
              "measure compute, all-reduce, copies and loading on this job's ranks");
}

}  // namespace vitsim::app
