#pragma once
// The JSON files vitsim writes of its own (report, plan, validation, fit): the keys each begins with and
// the one writer of their text, over the struct's JSON mapping (vitsim/core/base/json_reader.hpp).
#include <nlohmann/json.hpp>
#include <string>

#include "vitsim/core/base/json_reader.hpp"

namespace vitsim {

// The keys every JSON file vitsim writes (report, plan, validation, fit) begins with: "schema", "kind" and
// "vitsim_version" (this vitsim's).
nlohmann::json json_file_head(const std::string& schema, const std::string& kind);

// The file's content as JSON (json_file_text without the text: what a forked child hands its parent).
// The file's text: its head, then `v` through its mapping `fields` (a JsonOut: keys sorted), indented by 2,
// with a newline at the end. The caller writes it (write_file_atomic, or standard output).
template <class T, class Fields>
nlohmann::json json_file_value(const std::string& schema, const std::string& kind, const T& v,
                               Fields fields) {
  nlohmann::json j = json_file_head(schema, kind);
  detail::JsonOut out(j);
  fields(out, v);
  return j;
}
template <class T, class Fields>
std::string json_file_text(const std::string& schema, const std::string& kind, const T& v, Fields fields) {
  return json_file_value(schema, kind, v, fields).dump(2) + "\n";
}

}  // namespace vitsim
