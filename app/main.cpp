// vitsim: predict (and, where built, train) distributed ViT training.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "commands.hpp"
#include "vitsim/core/error.hpp"

int main(int argc, char** argv) {
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
    return cli.exit(e);
  }
  try {
    return action ? action() : 2;
  } catch (const vitsim::Error& e) {
    fmt::print(stderr, "vitsim: error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "vitsim: internal error: {}\n", e.what());
    return 3;
  }
}
