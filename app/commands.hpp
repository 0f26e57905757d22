#pragma once
// Each subcommand lives in its own file and registers itself on the CLI here. app/ holds no logic:
// it parses flags, calls the libraries and turns their exceptions into exit codes (main.cpp).
#include <CLI/CLI.hpp>
#include <functional>

namespace vitsim::app {

// The action of the chosen subcommand; returns the process exit status.
using Action = std::function<int()>;

void add_predict(CLI::App& cli, Action& action);
void add_validate(CLI::App& cli, Action& action);
void add_plot(CLI::App& cli, Action& action);
void add_plan(CLI::App& cli, Action& action);
void add_platform(CLI::App& cli, Action& action);
#ifdef VITSIM_HAVE_REAL
void add_train(CLI::App& cli, Action& action);
void add_calibrate(CLI::App& cli, Action& action);
#endif

}  // namespace vitsim::app
