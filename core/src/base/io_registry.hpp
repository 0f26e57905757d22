#pragma once
// The registry of what an interruption removes and ends (interrupt.cpp), shared with the output writer
// (io.cpp), which registers its temporary files there. Paths live under a mutex (a normal thread, the
// watcher, reads them).
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace vitsim::detail {

struct Registry {
  std::mutex mu;
  std::vector<std::string> dirs, files;
  std::function<std::optional<std::string>()> note;  // set_interrupt_note
};
Registry& registry();
// Removes `p` from `v` (the caller holds the registry's mutex).
void forget(std::vector<std::string>& v, const std::string& p);

}  // namespace vitsim::detail
