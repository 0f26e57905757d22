// The platform-property table (core/platform/platform_props.hpp): its rows are complete, the reference in
// docs/platform-properties.md is generated from them (VITSIM_UPDATE_DOCS=1 rewrites it), and the platform
// reader, the what-ifs and the writer apply each row's range and defaults.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "test_util.hpp"
#include "vitsim/core/formats/whatif.hpp"
#include "vitsim/core/platform/platform.hpp"
#include "vitsim/core/platform/platform_props.hpp"
#include "vitsim/core/platform/platform_writer.hpp"
#include "vitsim/core/platform/transport.hpp"

using namespace vitsim;

namespace {

// One node of one GPU whose cluster carries `extra` after the GPU's props (a later <prop> of the same id
// wins).
std::string one_gpu(const std::string& extra) {
  // A <prop> given twice is refused (issue 27): a prop of `extra` replaces the default of the same id.
  std::string props = vt::gpu_props("G", "1Tf");
  if (const size_t id = extra.find("id=\""); id != std::string::npos) {
    const std::string key = extra.substr(id, extra.find('"', id + 4) + 1 - id);
    if (const size_t at = props.find("<prop " + key); at != std::string::npos)
      props.erase(at, props.find("/>", at) + 2 - at);
  }
  return "<?xml version=\"1.0\"?>\n<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\">\n"
         "<cluster id=\"n0\" prefix=\"n0-gpu\" suffix=\"\" radical=\"0-0\" speed=\"1Tf\" bw=\"12GBps\" "
         "lat=\"1us\">" +
         props + extra + "</cluster>\n</zone></platform>\n";
}

// A value of a row written in its unit ("0GBps" for a bandwidth, "-1us" for a time).
std::string with_unit(const PlatformProp& p, double v) {
  const char* unit = "";
  if (p.type == PropType::Quantity) {
    switch (p.unit) {
      case units::Kind::Time:
        unit = "s";
        break;
      case units::Kind::Bandwidth:
        unit = "GBps";
        break;
      case units::Kind::Flops:
        unit = "Tf";
        break;
      case units::Kind::Bytes:
        unit = "GiB";
        break;
    }
  }
  if (p.type == PropType::Integer) return std::to_string(static_cast<long long>(v));
  return fmt::format("{}{}", v, unit);
}

}  // namespace

TEST_CASE("platform properties: docs/platform-properties.md is generated from the table",
          "[platform_props]") {
  const std::string md = platform_props_markdown();
  CHECK(vt::doc_section(vt::source("docs/platform-properties.md"), "platform-properties", md) == md);
  for (const auto& p : platform_props())
    CHECK(md.find("| `" + std::string(p.key) + "` |") != std::string::npos);
}

TEST_CASE("platform properties: every row names its key once and documents itself", "[platform_props]") {
  std::set<std::string> keys;
  for (const auto& p : platform_props()) {
    const std::string key(p.key);
    INFO(key);
    CHECK(keys.insert(key).second);
    CHECK(find_platform_prop(key) == &p);
    CHECK_FALSE(p.doc.empty());
    CHECK_FALSE(p.default_text.empty());
    CHECK_FALSE(p.source.empty());
    CHECK_FALSE(p.spec.empty());
    CHECK(p.choices.empty() == (p.type != PropType::Choice));
    CHECK(p.transports.empty() == (p.owner != PropOwner::Link || p.type == PropType::Choice));
    // A constant default is the figure its text says (one in parentheses is none: nic_count's inference).
    if (p.type == PropType::Integer && p.default_text.front() != '(')
      CHECK(p.default_text == std::to_string(static_cast<long long>(p.default_value)));
    if (p.type == PropType::Quantity && p.default_value != 0)
      CHECK(units::parse(std::string(p.default_text), p.unit) == Approx(p.default_value).epsilon(1e-12));
    if (p.type == PropType::Integer || p.type == PropType::Quantity || p.type == PropType::Number) {
      if (p.default_value != 0) CHECK(p.range.contains(p.default_value));
      CHECK_FALSE(prop_range_text(p).empty());
    }
  }
  CHECK(find_platform_prop("no_such_prop") == nullptr);
  CHECK_THROWS_WITH(platform_prop("no_such_prop"), Catch::Contains("no platform property 'no_such_prop'"));
}

TEST_CASE("platform properties: the transport rows are core/platform/transport.hpp's defaults and names",
          "[platform_props]") {
  CHECK(platform_prop("tcp_mtu").default_value == transport_defaults::tcp_mtu);
  CHECK(platform_prop("ib_mtu").default_value == transport_defaults::ib_mtu);
  CHECK(platform_prop("nccl_socket_nthreads").default_value == transport_defaults::socket_nthreads);
  CHECK(platform_prop("nccl_nsocks_perthread").default_value == transport_defaults::nsocks_perthread);
  CHECK(platform_prop("socket_bw").default_value == transport_defaults::socket_bw);
  CHECK(platform_prop("tcp_stack_latency").default_value == transport_defaults::tcp_stack_latency);
  CHECK(platform_prop("ib_stack_latency").default_value == transport_defaults::ib_stack_latency);
  CHECK(platform_prop("staging_bw").default_value == transport_defaults::staging_bw);
  // The writer states every setting of a NIC transport with its default, in the table's order.
  CHECK(nic_transport_props("tcp") == Props{{"transport", "tcp"},
                                            {"tcp_mtu", "1500"},
                                            {"nccl_socket_nthreads", "1"},
                                            {"nccl_nsocks_perthread", "1"},
                                            {"socket_bw", "2GBps"},
                                            {"tcp_stack_latency", "20us"}});
  CHECK(nic_transport_props("roce") ==
        Props{{"transport", "ib"}, {"ib_mtu", "4096"}, {"ib_stack_latency", "1us"}});
  // The choices are the names the transport parser takes: its message lists them.
  const Origin o{"p.xml", 3};
  CHECK_THROWS_WITH(parse_transport("x", o, "transport"),
                    "p.xml:3: property transport: unknown transport 'x'; valid: " +
                        std::string(platform_prop("transport").choices));
  CHECK_THROWS_WITH(parse_transport("x", o, "intranode_transport",
                                    {Transport::NvLink, Transport::PcieHost, Transport::PcieP2p}),
                    "p.xml:3: property intranode_transport: unknown transport 'x'; valid: " +
                        std::string(platform_prop("intranode_transport").choices));
}

TEST_CASE("platform properties: the reader and a prop what-if apply the same range, the row's",
          "[platform_props]") {
  vt::TempDir dir;
  int checked = 0;
  for (const auto& p : platform_props()) {
    if (p.owner != PropOwner::Gpu && p.owner != PropOwner::Node) continue;
    if (p.type != PropType::Quantity && p.type != PropType::Number && p.type != PropType::Integer) continue;
    const std::string key(p.key);
    ++checked;
    // Just outside the range at each finite end, and at an end inside it.
    std::vector<double> out, in;
    const double step = p.type == PropType::Integer ? 1 : 0.5;
    if (std::isfinite(p.range.lo)) {
      out.push_back(p.range.lo_open ? p.range.lo : p.range.lo - step);
      in.push_back(p.range.lo_open ? p.range.lo + step : p.range.lo);
    }
    if (std::isfinite(p.range.hi)) {
      out.push_back(p.type == PropType::Integer ? p.range.hi + 1
                    : p.range.hi_open           ? p.range.hi
                                                : p.range.hi + std::max(step, p.range.hi));
      in.push_back(p.range.hi_open ? p.range.hi / 2 : p.range.hi);  // gpu_step_cv: [0, 1)
    }
    for (double v : out) {
      const std::string value = with_unit(p, v);
      INFO(key << "=" << value);
      const std::string path =
          dir.file("p.xml", one_gpu("<prop id=\"" + key + "\" value=\"" + value + "\"/>"));
      const std::string read = vt::error_of([&] { read_platform_facts(path); });
      CHECK_THAT(read, Catch::StartsWith(path + ":3: property " + key + ": "));
      if (p.type != PropType::Integer)
        CHECK_THAT(read, Catch::Contains(p.range.str()));
      else
        CHECK_THAT(read, Catch::EndsWith(fmt::format("in {} .. {}", p.int_low(), p.int_high())));
      const std::string edit = "prop:vec*:" + key + "=" + value;
      CHECK_THAT(vt::error_of([&] { apply_what_ifs(vt::source("platforms/vector.xml"), {edit}); }),
                 Catch::StartsWith("what-if '" + edit + "': "));
    }
    for (double v : in) {
      const std::string value = with_unit(p, v);
      INFO(key << "=" << value);
      const std::string path =
          dir.file("p.xml", one_gpu("<prop id=\"" + key + "\" value=\"" + value + "\"/>"));
      CHECK(vt::error_of([&] { read_platform_facts(path); }) == "");
      CHECK(vt::error_of([&] {
              apply_what_ifs(vt::source("platforms/vector.xml"), {"prop:vec*:" + key + "=" + value});
            }) == "");
    }
  }
  CHECK(checked == 21);  // GPU and node rows: 13 with a unit, 6 plain numbers, 2 whole numbers
}
