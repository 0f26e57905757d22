#include <catch2/catch.hpp>

#include "vitsim/core/error.hpp"
#include "vitsim/core/units.hpp"

using vitsim::units::Kind;
using vitsim::units::parse;

TEST_CASE("units: values as SimGrid writes them", "[units]") {
  // Factors from SimGrid's unit tables: decimal prefixes for B and b, binary for Ki/Mi/Gi, bits = bytes/8.
  CHECK(parse("12GBps", Kind::Bandwidth) == Approx(12e9));
  CHECK(parse("10Gbps", Kind::Bandwidth) == Approx(1.25e9));
  CHECK(parse("1GiBps", Kind::Bandwidth) == Approx(1073741824.0));
  CHECK(parse("5us", Kind::Time) == Approx(5e-6));
  CHECK(parse("0.2ms", Kind::Time) == Approx(2e-4));
  CHECK(parse("2h", Kind::Time) == Approx(7200));
  CHECK(parse("8.1Tf", Kind::Flops) == Approx(8.1e12));
  CHECK(parse("16GiB", Kind::Bytes) == Approx(17179869184.0));
  CHECK(parse("16GB", Kind::Bytes) == Approx(16e9));
  CHECK(parse("500MB", Kind::Bytes) == Approx(5e8));
}

TEST_CASE("units: a missing or unknown unit is an error with the valid units", "[units][negative]") {
  CHECK_THROWS_WITH(parse("12", Kind::Bandwidth),
                    Catch::StartsWith("bad bandwidth '12': missing unit; valid units: Bps, kBps, KBps"));
  CHECK_THROWS_WITH(parse("5 parsecs", Kind::Time),
                    "bad time '5 parsecs': unknown unit ' parsecs'; valid units: w, d, h, min, m, s, ms, us, ns, ps");
  CHECK_THROWS_WITH(parse("GBps", Kind::Bandwidth), Catch::StartsWith("bad bandwidth 'GBps': no number"));
  CHECK_THROWS_WITH(parse("", Kind::Bytes), Catch::StartsWith("bad size '': empty value"));
}
