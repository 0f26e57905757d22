#pragma once
// What vitsim asks of the machine it runs on: the host's name, the date, and elapsed time. One function
// each, so that every report, log line and error names the host and the date the same way.
#include <chrono>
#include <string>

namespace vitsim {

// gethostname(), or "unknown-host" when the system does not say.
std::string hostname();

// The current date and time in UTC, ISO 8601 to the second: "2026-12-01T14:38:22Z".
std::string now_utc();

// Seconds from `a` to `b` on the monotonic clock (negative when b comes first).
inline double seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace vitsim
