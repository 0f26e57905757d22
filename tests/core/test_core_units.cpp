#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <ctime>
#include <string>

#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/system.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/identity.hpp"

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
  CHECK_THROWS_WITH(
      parse("5 parsecs", Kind::Time),
      "bad time '5 parsecs': unknown unit ' parsecs'; valid units: w, d, h, min, m, s, ms, us, ns, ps");
  CHECK_THROWS_WITH(parse("GBps", Kind::Bandwidth), Catch::StartsWith("bad bandwidth 'GBps': no number"));
  CHECK_THROWS_WITH(parse("", Kind::Bytes), Catch::StartsWith("bad size '': empty value"));
}

// --- vitsim/core/base/system.hpp: the one hostname(), now_utc() and seconds() ---

TEST_CASE("system: hostname is gethostname's answer", "[system]") {
  char buf[256] = {0};
  REQUIRE(gethostname(buf, sizeof buf - 1) == 0);
  CHECK(vitsim::hostname() == buf);
  CHECK_FALSE(vitsim::hostname().empty());
}

TEST_CASE("system: now_utc is ISO 8601 to the second in UTC", "[system]") {
  const std::time_t before = std::time(nullptr);
  const std::string t = vitsim::now_utc();
  const std::time_t after = std::time(nullptr);
  // "YYYY-MM-DDTHH:MM:SSZ": 20 characters.
  REQUIRE(t.size() == 20);
  for (size_t i : {4u, 7u}) CHECK(t[i] == '-');
  CHECK(t[10] == 'T');
  for (size_t i : {13u, 16u}) CHECK(t[i] == ':');
  CHECK(t[19] == 'Z');
  std::tm parsed{};
  REQUIRE(strptime(t.c_str(), "%Y-%m-%dT%H:%M:%SZ", &parsed) != nullptr);
  const std::time_t back = timegm(&parsed);  // read back as UTC: between the two clock readings
  CHECK(back >= before);
  CHECK(back <= after);
}

TEST_CASE("system: seconds between two steady-clock points", "[system]") {
  using std::chrono::milliseconds;
  const auto a = std::chrono::steady_clock::time_point{} + milliseconds(1500);
  const auto b = a + milliseconds(250);
  CHECK(vitsim::seconds(a, b) == Approx(0.25));
  CHECK(vitsim::seconds(b, a) == Approx(-0.25));
  CHECK(vitsim::seconds(a, a) == 0);
}

TEST_CASE("version: vitsim --version and vitsim_version() are CMake's project(VERSION)", "[system]") {
  // The version as CMakeLists.txt declares it: project(vitsim VERSION x.y.z ...).
  const std::string cmake = vitsim::read_file(vt::source("CMakeLists.txt"));
  const std::string key = "project(vitsim VERSION ";
  const size_t at = cmake.find(key);
  REQUIRE(at != std::string::npos);
  const std::string declared =
      cmake.substr(at + key.size(), cmake.find(' ', at + key.size()) - at - key.size());
  CHECK(std::string(vitsim::vitsim_version()) == declared);
  const auto r = vt::vitsim("--version");
  CHECK(r.status == 0);
  CHECK(r.out == "vitsim " + declared + "\n");
}

TEST_CASE("strict whole numbers: what core's parse_integer refuses", "[units][negative]") {
  // The readers routed here (--shard, --top, what-if counts, --fault, preset names) refuse what
  // std::stoi/strtol/sscanf let through.
  using vitsim::units::parse_integer;
  CHECK(parse_integer("12", 0, 100) == 12);
  CHECK(parse_integer(" 12 ", 0, 100) == 12);  // surrounding blanks only
  for (const char* bad : {"12x", "1.0", "1e1", "+12", "0x0c", "", "twelve", "1 2"})
    CHECK_THROWS_WITH(parse_integer(bad, 0, 100),
                      Catch::StartsWith(std::string("'") + bad + "' is not an integer in 0 .. 100"));
  CHECK_THROWS_WITH(parse_integer("101", 0, 100), "101 is out of range (expected 0 .. 100)");
  CHECK_THROWS_WITH(parse_integer("99999999999999999999999", 0, 100),
                    Catch::EndsWith("is out of range (expected 0 .. 100)"));
}

TEST_CASE("strict whole numbers on the command line: vitsim plan --shard", "[units][negative][cli]") {
  // --shard I/K goes through parse_integer: sscanf's leniencies (a sign, trailing text) are refused, and the
  // message is the one usage line (exit 2).
  const std::string scen = vt::source("scenarios/whatif/tesla-nic-10gbe.xml");
  for (const char* bad : {"0/2x", "+0/2", "0/+2", "0x0/2", "1/1", "0/0", "0/2/3", "/2", "0/", "1.0/2"}) {
    INFO(bad);
    const auto r = vt::vitsim(fmt::format("plan {} -q --shard '{}'", scen, bad));
    CHECK(r.status == 2);
    CHECK(r.out == fmt::format("vitsim: error: --shard '{}': expected I/K with 0 <= I < K, e.g. 0/2\n", bad));
  }
}
