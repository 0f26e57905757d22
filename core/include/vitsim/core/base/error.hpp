#pragma once
// One exception type for every input problem. Libraries throw; only app/ maps it to an exit code.
#include <stdexcept>
#include <string>

namespace vitsim {

// Where a value came from: "scenario.xml:12", "--set training.micro_batch", "ds_config.json".
struct Origin {
  std::string file;
  int line = 0;  // 0 when there is no line (a command-line override, a JSON key)
  std::string str() const { return line > 0 ? file + ":" + std::to_string(line) : file; }
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
  Error(const Origin& where, const std::string& what) : std::runtime_error(where.str() + ": " + what) {}
};

}  // namespace vitsim
