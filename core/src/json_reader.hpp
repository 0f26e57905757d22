#pragma once
// A JSON value and where it sits (file and JSON pointer), with typed accessors whose errors are one line:
// "FILE: /points/3/epoch_time_s: expected a number, found a string". Used by the report and plan readers.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "vitsim/core/error.hpp"

namespace vitsim::detail {

class JsonField {
 public:
  JsonField(const nlohmann::json& j, const std::string& origin, std::string pointer)
      : j_(&j), origin_(&origin), ptr_(std::move(pointer)) {}

  const nlohmann::json& raw() const { return *j_; }
  const std::string& pointer() const { return ptr_; }
  std::string where() const { return fmt::format("{}: {}", *origin_, ptr_.empty() ? "/" : ptr_); }
  [[noreturn]] void fail(const std::string& what) const { throw Error(fmt::format("{}: {}", where(), what)); }

  bool is_null() const { return j_->is_null(); }
  bool has(const std::string& key) const { return j_->is_object() && j_->contains(key); }
  JsonField at(const std::string& key) const {
    if (!j_->is_object()) fail(fmt::format("expected an object, found {}", type_of(*j_)));
    auto it = j_->find(key);
    if (it == j_->end()) throw Error(fmt::format("{}: {}/{}: missing", *origin_, ptr_, escaped(key)));
    return JsonField(*it, *origin_, ptr_ + "/" + escaped(key));
  }
  size_t size() const {  // of an array
    if (!j_->is_array()) fail(fmt::format("expected an array, found {}", type_of(*j_)));
    return j_->size();
  }
  JsonField operator[](size_t i) const { return JsonField((*j_)[i], *origin_, fmt::format("{}/{}", ptr_, i)); }

  double number() const {
    if (!j_->is_number()) fail(fmt::format("expected a number, found {}", type_of(*j_)));
    const double v = j_->get<double>();
    if (!std::isfinite(v)) fail("not a finite number");
    return v;
  }
  // A number in [lo, hi]; `what` names the quantity for the message.
  double number(double lo, double hi, const char* what) const {
    const double v = number();
    if (v < lo || v > hi) fail(fmt::format("{} {:.6g} is out of range [{:.6g}, {:.6g}]", what, v, lo, hi));
    return v;
  }
  double non_negative(const char* what) const {
    const double v = number();
    if (v < 0) fail(fmt::format("{} is negative ({:.6g})", what, v));
    return v;
  }
  long long integer(long long lo, long long hi) const {
    if (!j_->is_number_integer()) fail(fmt::format("expected an integer, found {}", type_of(*j_)));
    long long v = 0;
    if (j_->is_number_unsigned()) {
      const auto u = j_->get<unsigned long long>();
      if (u > static_cast<unsigned long long>(std::numeric_limits<long long>::max()))
        fail(fmt::format("{} is out of range [{}, {}]", u, lo, hi));
      v = static_cast<long long>(u);
    } else {
      v = j_->get<long long>();
    }
    if (v < lo || v > hi) fail(fmt::format("{} is out of range [{}, {}]", v, lo, hi));
    return v;
  }
  bool boolean() const {
    if (!j_->is_boolean()) fail(fmt::format("expected true or false, found {}", type_of(*j_)));
    return j_->get<bool>();
  }
  std::string string() const {
    if (!j_->is_string()) fail(fmt::format("expected a string, found {}", type_of(*j_)));
    return j_->get<std::string>();
  }
  std::map<std::string, std::string> string_map() const {
    if (!j_->is_object()) fail(fmt::format("expected an object of strings, found {}", type_of(*j_)));
    std::map<std::string, std::string> out;
    for (auto it = j_->begin(); it != j_->end(); ++it) out[it.key()] = at(it.key()).string();
    return out;
  }
  std::vector<std::string> strings() const {
    std::vector<std::string> out;
    for (size_t i = 0, n = size(); i < n; ++i) out.push_back((*this)[i].string());
    return out;
  }

 private:
  static std::string type_of(const nlohmann::json& j) {
    if (j.is_null()) return "null";
    if (j.is_boolean()) return "a boolean";
    if (j.is_number()) return "a number";
    if (j.is_string()) return "a string";
    if (j.is_array()) return "an array";
    return "an object";
  }
  static std::string escaped(const std::string& key) {  // RFC 6901, and no control bytes in a message
    std::string out;
    for (char c : key) {
      if (c == '~') out += "~0";
      else if (c == '/') out += "~1";
      else if (static_cast<unsigned char>(c) < 0x20) out += '?';
      else out += c;
    }
    return out.size() > 80 ? out.substr(0, 80) + "..." : out;
  }
  const nlohmann::json* j_;
  const std::string* origin_;
  std::string ptr_;
};

// Parses `text`; a syntax error or a number beyond double is one line naming `origin`.
inline nlohmann::json parse_json(const std::string& text, const std::string& origin) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: malformed JSON: {}", origin, e.what()));
  }
}

// What a vitsim JSON file with `schema` is, for "this is X, not Y" messages; "" when not vitsim's.
inline std::string what_schema(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string()) return "";
  const std::string s = j["schema"].get<std::string>();
  const std::string kind = j.contains("kind") && j["kind"].is_string() ? j["kind"].get<std::string>() : "";
  if (s.rfind("vitsim.report/", 0) == 0)
    return kind == "measured" || (j.contains("source") && j["source"] == "measured")
               ? "a measured report (vitsim train)"
               : "a predicted report (vitsim predict)";
  if (s.rfind("vitsim.plan/", 0) == 0) return "a capacity plan (vitsim plan)";
  if (s.rfind("vitsim.validation/", 0) == 0) return "a validation (vitsim validate)";
  if (s.rfind("vitsim.calibration/", 0) == 0) return "a calibration file (vitsim calibrate)";
  return "";
}

}  // namespace vitsim::detail
