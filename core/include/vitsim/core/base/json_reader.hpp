#pragma once
// The one JSON field reader of core: a JSON value and where it sits (the file and the path to it), with typed
// accessors whose errors are one line, in one wording for every file: "FILE: PATH: expected a number, found a
// string ("12")", "FILE: PATH: missing". The path is written as a JSON pointer (/points/3/epoch_time_s) in
// the files vitsim writes and reads back (reports, plans, validations: the other messages about them use
// pointers too), or dotted (devices[0] ('T4').points[1].fwd_s, gpu_types.X.catalogue) in the calibration and
// platform spec files. Also the one JSON mapping per struct that both its writer and its reader use (JsonOut,
// JsonIn below): the report, plan, calibration, validation and fit formats, and DeepSpeed's config (written
// by OrderedJsonOut, read in DeepSpeed's words by its own reader: core/src/formats/deepspeed_json.cpp); the
// platform spec and catalogue (platform) read their fields through BasicJsonField.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/json_depth.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim::detail {

// How a path to a value is written: /points/3/gpus (a JSON pointer) or points[3].gpus (dotted).
enum class JsonPath { Pointer, Dotted };

template <class J>
class BasicJsonField {
 public:
  BasicJsonField(const J& j, const std::string& origin, std::string path, JsonPath style = JsonPath::Pointer)
      : j_(&j), origin_(&origin), ptr_(std::move(path)), style_(style) {}

  const J& raw() const { return *j_; }
  const std::string& pointer() const { return ptr_; }
  // "FILE: PATH"; the whole file is "FILE: /" as a pointer, "FILE" dotted.
  std::string where() const {
    if (style_ == JsonPath::Dotted) return ptr_.empty() ? *origin_ : fmt::format("{}: {}", *origin_, ptr_);
    return fmt::format("{}: {}", *origin_, ptr_.empty() ? "/" : ptr_);
  }
  [[noreturn]] void fail(const std::string& what) const { throw Error(fmt::format("{}: {}", where(), what)); }
  // "expected EXPECTED, found a number (40.5)": the one wording of a value of the wrong type.
  [[noreturn]] void mismatch(const char* expected) const {
    fail(fmt::format("expected {}, found {}", expected, found(*j_)));
  }
  // The same value, its path followed by a note that names it: devices[0] ('T4').
  BasicJsonField named(const std::string& note) const {
    return BasicJsonField(*j_, *origin_, fmt::format("{} ('{}')", ptr_, note), style_);
  }

  bool is_null() const { return j_->is_null(); }
  bool has(const std::string& key) const { return j_->is_object() && j_->contains(key); }
  BasicJsonField at(const std::string& key) const {
    if (!j_->is_object()) mismatch("an object");
    auto it = j_->find(key);
    const std::string path = child(key);
    if (it == j_->end()) BasicJsonField(*j_, *origin_, path, style_).fail("missing");
    return BasicJsonField(*it, *origin_, path, style_);
  }
  size_t size() const {  // of an array
    if (!j_->is_array()) mismatch("an array");
    return j_->size();
  }
  BasicJsonField operator[](size_t i) const {
    return BasicJsonField(
        (*j_)[i], *origin_,
        style_ == JsonPath::Dotted ? fmt::format("{}[{}]", ptr_, i) : fmt::format("{}/{}", ptr_, i), style_);
  }

  double number() const {
    if (!j_->is_number()) mismatch("a number");
    const double v = j_->template get<double>();
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
    if (!j_->is_number_integer()) mismatch("an integer");
    long long v = 0;
    if (j_->is_number_unsigned()) {
      const auto u = j_->template get<unsigned long long>();
      if (u > static_cast<unsigned long long>(std::numeric_limits<long long>::max()))
        fail(fmt::format("{} is out of range [{}, {}]", u, lo, hi));
      v = static_cast<long long>(u);
    } else {
      v = j_->template get<long long>();
    }
    if (v < lo || v > hi) fail(fmt::format("{} is out of range [{}, {}]", v, lo, hi));
    return v;
  }
  bool boolean() const {
    if (!j_->is_boolean()) mismatch("true or false");
    return j_->template get<bool>();
  }
  std::string string() const {
    if (!j_->is_string()) mismatch("a string");
    return j_->template get<std::string>();
  }
  std::map<std::string, std::string> string_map() const {
    if (!j_->is_object()) mismatch("an object of strings");
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
  static std::string type_of(const J& j) {
    if (j.is_null()) return "null";
    if (j.is_boolean()) return "a boolean";
    if (j.is_number()) return "a number";
    if (j.is_string()) return "a string";
    if (j.is_array()) return "an array";
    return "an object";
  }
  // The type, and a scalar's value as written (shortened): a string ("8"), a number (40.5).
  static std::string found(const J& j) {
    if (j.is_null() || j.is_array() || j.is_object()) return type_of(j);
    std::string v = j.dump(-1, ' ', false, J::error_handler_t::replace);
    for (char& c : v)
      if (static_cast<unsigned char>(c) < 0x20) c = '?';
    if (v.size() > 40) v = v.substr(0, 40) + "...";
    return fmt::format("{} ({})", type_of(j), v);
  }
  std::string child(const std::string& key) const {
    if (style_ == JsonPath::Dotted) return ptr_.empty() ? escaped(key) : ptr_ + "." + escaped(key);
    return ptr_ + "/" + escaped(key);
  }
  std::string escaped(const std::string& key) const {  // RFC 6901 in a pointer, and no control bytes
    std::string out;
    for (char c : key) {
      if (c == '~' && style_ == JsonPath::Pointer)
        out += "~0";
      else if (c == '/' && style_ == JsonPath::Pointer)
        out += "~1";
      else if (static_cast<unsigned char>(c) < 0x20)
        out += '?';
      else
        out += c;
    }
    return out.size() > 80 ? out.substr(0, 80) + "..." : out;
  }
  const J* j_;
  const std::string* origin_;
  std::string ptr_;
  JsonPath style_;
};
using JsonField = BasicJsonField<nlohmann::json>;

// Parses `text` (into J: nlohmann::ordered_json keeps the key order); a syntax error or a number beyond
// double is one line naming `origin`.
template <class J = nlohmann::json>
J parse_json(const std::string& text, const std::string& origin) {
  if (const std::string deep = json_depth_problem(text); !deep.empty())
    throw Error(fmt::format("{}: {}", origin, deep));
  try {
    return J::parse(text);
  } catch (const typename J::exception& e) {
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

// How a number is read back: its range and the noun its messages use ("a time").
struct JsonNumber {
  double lo = 0, hi = 0;
  const char* what = "";
  bool range = false;  // false: any number >= 0
  bool any = false;    // any finite number (the format checks its range itself, in its own words)
  double read(const JsonField& f) const {
    return any ? f.number() : range ? f.number(lo, hi, what) : f.non_negative(what);
  }
};
inline JsonNumber non_negative(const char* what) {
  return {0, 0, what, false};
}
inline JsonNumber within(double lo, double hi, const char* what) {
  return {lo, hi, what, true};
}
inline JsonNumber finite() {
  return {0, 0, "", false, true};
}

// One JSON mapping per struct: a function template `fields(io, value)` lists the struct's keys once, each
// with its member and how it is read back (type, range, the noun of the message), and is called with a
// JsonOut to write the struct or a JsonIn to read it. Reading follows the listed order, so the first fault
// a file has is the first one listed; cross-field checks (io.check) run only when reading, where they are
// listed; io.put writes a derived figure the reader does not read back. JsonOut writes into nlohmann::json,
// whose objects keep their keys sorted (the order of the list does not change what is written);
// OrderedJsonOut into nlohmann::ordered_json, whose objects keep the list's order (a file of another
// program's format, as DeepSpeed's config, written in the order its documentation gives).
template <class J>
class BasicJsonOut {
 public:
  static constexpr bool writing = true;
  explicit BasicJsonOut(J& j) : j_(&j) {}

  void number(const char* key, double v, JsonNumber) { (*j_)[key] = v; }
  template <class T>
  void integer(const char* key, const T& v, long long, long long) {
    (*j_)[key] = v;
  }
  void boolean(const char* key, bool v) { (*j_)[key] = v; }
  void string(const char* key, const std::string& v) { (*j_)[key] = v; }
  void strings(const char* key, const std::vector<std::string>& v) { (*j_)[key] = v; }
  void string_map(const char* key, const std::map<std::string, std::string>& v) { (*j_)[key] = v; }
  void numbers(const char* key, const std::vector<double>& v, JsonNumber) { (*j_)[key] = v; }
  // Optional keys: written when set, read when present.
  void optional_integer(const char* key, const std::optional<long long>& v, long long, long long) {
    if (v) (*j_)[key] = *v;
  }
  void optional_number(const char* key, const std::optional<double>& v, JsonNumber) {
    if (v) (*j_)[key] = *v;
  }
  void optional_boolean(const char* key, const std::optional<bool>& v) {
    if (v) (*j_)[key] = *v;
  }
  template <class T, class Fields>
  void object(const char* key, const T& v, Fields fields) {
    (*j_)[key] = write(v, fields);
  }
  template <class T, class Fields>
  void list(const char* key, const std::vector<T>& v, Fields fields) {
    J a = J::array();
    for (const T& x : v) a.push_back(write(x, fields));
    (*j_)[key] = std::move(a);
  }
  // An optional part: written when `when_writing`; read when the file has any of `keys`.
  bool present(bool when_writing, std::initializer_list<const char*>) const { return when_writing; }
  // A key that is null when its value is absent: written null unless `when_writing`; read unless null.
  bool non_null(const char* key, bool when_writing) {
    if (!when_writing) (*j_)[key] = nullptr;
    return when_writing;
  }
  template <class Check>
  void check(Check&&) const {}
  template <class V>
  void put(const char* key, const V& v) {
    (*j_)[key] = v;
  }
  // An object whose keys are exactly its mapping's (read: another key is refused, listing the valid ones).
  template <class T, class Fields>
  void closed_object(const char* key, const T& v, Fields fields) {
    object(key, v, fields);
  }
  // A value of its own shape: written as `write(v)` gives it, read by `read(parent, key, v)`.
  template <class V, class Write, class Read>
  void custom(const char* key, const V& v, Write write, Read) {
    (*j_)[key] = write(v);
  }
  // Read: the paths of the keys after this are the object's followed by the note (BasicJsonField::named).
  void named(const std::string&) {}

  template <class T, class Fields>
  static J write(const T& v, Fields fields) {
    J o = J::object();
    BasicJsonOut out(o);
    fields(out, v);
    return o;
  }

 private:
  J* j_;
};
using JsonOut = BasicJsonOut<nlohmann::json>;
using OrderedJsonOut = BasicJsonOut<nlohmann::ordered_json>;

// The keys a mapping lists (every optional part included), in its order: what a closed object accepts.
class JsonKeys {
 public:
  static constexpr bool writing = true;  // takes the writer's branches; assigns nothing
  std::vector<std::string> keys;

  template <class... A>
  void number(const char* key, A&&...) {
    keys.push_back(key);
  }
  template <class... A>
  void integer(const char* key, A&&...) {
    keys.push_back(key);
  }
  template <class... A>
  void boolean(const char* key, A&&...) {
    keys.push_back(key);
  }
  template <class... A>
  void string(const char* key, A&&...) {
    keys.push_back(key);
  }
  template <class... A>
  void object(const char* key, A&&...) {
    keys.push_back(key);
  }
  template <class... A>
  void closed_object(const char* key, A&&...) {
    keys.push_back(key);
  }
  template <class... A>
  void custom(const char* key, A&&...) {
    keys.push_back(key);
  }
  bool present(bool, std::initializer_list<const char*>) const { return true; }
  template <class Check>
  void check(Check&&) const {}
  void named(const std::string&) {}
};

class JsonIn {
 public:
  static constexpr bool writing = false;
  explicit JsonIn(const JsonField& f) : f_(f) {}

  void number(const char* key, double& v, JsonNumber n) const { v = n.read(f_.at(key)); }
  template <class T>
  void integer(const char* key, T& v, long long lo, long long hi) const {
    v = static_cast<T>(f_.at(key).integer(lo, hi));
  }
  void boolean(const char* key, bool& v) const { v = f_.at(key).boolean(); }
  void string(const char* key, std::string& v) const { v = f_.at(key).string(); }
  void strings(const char* key, std::vector<std::string>& v) const { v = f_.at(key).strings(); }
  void string_map(const char* key, std::map<std::string, std::string>& v) const {
    v = f_.at(key).string_map();
  }
  void numbers(const char* key, std::vector<double>& v, JsonNumber n) const {
    const JsonField a = f_.at(key);
    for (size_t i = 0, size = a.size(); i < size; ++i) v.push_back(n.read(a[i]));
  }
  void optional_integer(const char* key, std::optional<long long>& v, long long lo, long long hi) const {
    if (f_.has(key)) v = f_.at(key).integer(lo, hi);
  }
  void optional_number(const char* key, std::optional<double>& v, JsonNumber n) const {
    if (f_.has(key)) v = n.read(f_.at(key));
  }
  template <class T, class Fields>
  void object(const char* key, T& v, Fields fields) const {
    JsonIn in(f_.at(key));
    fields(in, v);
  }
  template <class T, class Fields>
  void list(const char* key, std::vector<T>& v, Fields fields) const {
    const JsonField a = f_.at(key);
    for (size_t i = 0, size = a.size(); i < size; ++i) {
      T x;
      JsonIn in(a[i]);
      fields(in, x);
      v.push_back(std::move(x));
    }
  }
  bool present(bool, std::initializer_list<const char*> keys) const {
    for (const char* k : keys)
      if (f_.has(k)) return true;
    return false;
  }
  bool non_null(const char* key, bool) const { return !f_.at(key).is_null(); }
  template <class Check>
  void check(Check&& c) const {
    c(f_);
  }
  template <class V>
  void put(const char*, const V&) const {}
  template <class T, class Fields>
  void closed_object(const char* key, T& v, Fields fields) const {
    JsonIn in(f_.at(key));
    in.closed<T>(fields);
    fields(in, v);
  }
  // Refuses a key of this object that `fields` does not list: "unknown key 'x'; valid: a, b".
  template <class T, class Fields>
  void closed(Fields fields) const {
    if (!f_.raw().is_object()) f_.mismatch("an object");
    JsonKeys listed;
    const T blank{};
    fields(listed, blank);
    for (auto it = f_.raw().begin(); it != f_.raw().end(); ++it) {
      if (std::find(listed.keys.begin(), listed.keys.end(), it.key()) != listed.keys.end()) continue;
      std::string valid;
      for (const auto& k : listed.keys) valid += (valid.empty() ? "" : ", ") + k;
      f_.fail(fmt::format("unknown key '{}'; valid: {}", echo(it.key()), valid));
    }
  }
  template <class V, class Write, class Read>
  void custom(const char* key, V& v, Write, Read read) const {
    read(f_, key, v);
  }
  void named(const std::string& note) { f_ = f_.named(note); }

 private:
  JsonField f_;
};

// Holds for T and const T: a mapping's value type, read (T&) or written (const T&).
template <class S, class T>
concept MappedAs = std::is_same_v<std::remove_const_t<S>, T>;

}  // namespace vitsim::detail
