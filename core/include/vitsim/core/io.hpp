#pragma once
#include <string>

namespace vitsim {
// Writes to "<path>.tmp.<pid>" then renames over `path`, so a reader never sees half a file.
// Throws Error naming the path when it cannot be written.
void write_file_atomic(const std::string& path, const std::string& content);
std::string read_file(const std::string& path);  // throws Error naming the path
}  // namespace vitsim
