// The full build's `vitsim` links no LibTorch and no MPI (their dynamic loading cost every command ~0.9 s,
// issue 35 item 7): `vitsim train` and a measuring `vitsim calibrate`, once their flags have parsed here,
// become `vitsim-torch` by execv() with the same arguments and environment, as git starts its subcommands.
// An exec, not a child: the process id, the MPI rank's environment (mpirun starts `vitsim train`), signals,
// standard streams and the exit status are vitsim-torch's own.
#include <fmt/format.h>
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "commands.hpp"
#include "torch/calibrate_command.hpp"
#include "torch/train_command.hpp"
#include "vitsim/core/base/error.hpp"

namespace vitsim::app {

std::string torch_executable(std::string* why) {
  std::string path;
  if (const char* env = std::getenv("VITSIM_TORCH_EXE"); env && *env) {
    path = env;
  } else {
    char buf[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) {
      path.assign(buf, static_cast<size_t>(n));
      path = path.substr(0, path.rfind('/') + 1) + "vitsim-torch";
    }
  }
  if (!path.empty() && access(path.c_str(), X_OK) == 0) return path;
  if (why) *why = path.empty() ? "vitsim-torch beside this vitsim (/proc/self/exe cannot be read)" : path;
  return "";
}

namespace {
// This process's arguments as the kernel keeps them (/proc/self/cmdline: each one ends in a NUL), argv[0]
// included, so that vitsim-torch sees exactly what vitsim was given (and calibrate's provenance says
// `vitsim calibrate ...`).
std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t a = 0; a < all.size();) {
    const size_t b = all.find('\0', a);
    args.push_back(all.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) break;
    a = b + 1;
  }
  return args;
}

int exec_torch(const std::string& command) {
  std::string why;
  const std::string exe = torch_executable(&why);
  if (exe.empty()) {
    fmt::print(stderr, "vitsim {}: {} is missing (it runs train and calibrate): rebuild with {}\n", command,
               why, kRebuildWithTorch);
    return 2;
  }
  std::vector<std::string> args = own_arguments();
  if (args.empty()) throw Error("cannot read this process's arguments (/proc/self/cmdline)");
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  execv(exe.c_str(), argv.data());
  throw Error(fmt::format("cannot start {} (it runs `vitsim {}`): {}", exe, command, std::strerror(errno)));
}
}  // namespace

int run_train(const TrainArgs&, const CLI::App*) {
  return exec_torch("train");
}

int run_calibrate(const CalibrateArgs&, const CLI::App*) {
  return exec_torch("calibrate");
}

}  // namespace vitsim::app
