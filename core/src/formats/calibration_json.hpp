#pragma once
// What the two files of the calibration's JSON mapping share (calibration_json.cpp: the head and the devices;
// calibration_json_ops.cpp: the op models, links, loaders and host-to-device copies).
#include <climits>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/json_reader.hpp"
#include "vitsim/core/formats/calibration.hpp"

namespace vitsim::detail {

// The JSON mapping of each struct of a calibration (vitsim/core/base/json_reader.hpp): calibration_to_json
// writes it, read_calibration reads it back with its checks, in the order listed (the first fault a file has
// is the first one listed). A key read with a default is optional (JsonIn::present) and always written.
// Whole numbers are JSON integers within int's range: the JSON library would cast 16.5 to 16 and 1e300 to
// whatever the hardware makes of it (undefined behaviour).
inline bool fits_int(const nlohmann::json& v) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) return v.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT_MAX);
  const std::int64_t x = v.get<std::int64_t>();
  return x >= INT_MIN && x <= INT_MAX;
}

// A precision by its name; a name it does not know fails at the object holding it.
template <class Io, class P>
void precision_field(Io& io, P& precision) {
  std::string name = precision_name(precision);
  io.string("precision", name);
  if constexpr (!Io::writing)
    io.check([&](const JsonField& f) {
      try {
        precision = parse_precision(name);
      } catch (const Error& e) {
        f.fail(e.what());
      }
    });
}

// The op models, links, loaders and host-to-device copies of `c` (calibration_json_ops.cpp); `c` holds the
// devices read before them.
void calibration_op_fields(JsonOut& io, const Calibration& c);
void calibration_op_fields(JsonIn& io, Calibration& c);

}  // namespace vitsim::detail
