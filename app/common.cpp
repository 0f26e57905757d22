// Shared by the subcommands: how the scenario is taken, --set checked with "did you mean", numeric flags
// read by core's strict reader (a short message, not CLI11's range dump).
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim::app {

void add_scenario(CLI::App* c, std::string& scenario, const std::string& help) {
  CLI::Option* pos = c->add_option("scenario", scenario, help);
  // The older spelling (calibrate took --scenario), kept as an alias; required-ness is checked by
  // require_scenario (either spelling satisfies it).
  CLI::Option* flag =
      c->add_option("--scenario", scenario, "the same as the positional SCENARIO (older spelling)");
  pos->excludes(flag);
}

void require_scenario(const std::string& command, const std::string& scenario, const std::string& what) {
  if (scenario.empty())
    throw UsageError(
        fmt::format("vitsim {} needs a scenario: vitsim {} SCENARIO.xml{}", command, command, what));
}

void apply_sets(ScenarioFile& f, const std::vector<std::string>& sets) {
  const std::vector<std::string> keys = scenario_keys();
  for (const auto& s : sets) {
    const auto eq = s.find('=');
    if (eq != std::string::npos && eq > 0) {
      const std::string key = s.substr(0, eq);
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        std::string valid;
        for (const auto& k : keys) valid += (valid.empty() ? "" : ", ") + k;
        throw Error(
            fmt::format("--set {}: unknown key{}; valid: {}", echo(key), did_you_mean(key, keys), valid));
      }
    }
    apply_override(f, s);
  }
}

void add_what_ifs(ScenarioFile& f, const std::vector<std::string>& edits) {
  if (edits.empty()) return;
  std::string all = f.attrs.count("whatif.edits") ? f.attrs["whatif.edits"].value : "";
  for (const auto& w : edits) {
    // An empty edit did nothing, silently (issue 27): a script's unset variable, not a what-if.
    if (w.find_first_not_of(" \t") == std::string::npos)
      throw Error(
          fmt::format("--what-if '{}': an empty edit; give KIND:TARGET=VALUE (kinds: gpu, link, loader, "
                      "nodes, prop, zone), e.g. link:n0-nic:bandwidth=10GBps",
                      w));
    all += (all.empty() ? "" : ";") + w;
  }
  f.attrs["whatif.edits"] = Attribute{all, Origin{"--what-if", 0}};
}

CLI::Validator number(const units::Range& r) {
  return CLI::Validator(
      [r](std::string& text) -> std::string {
        try {
          units::parse_number(text, r);
        } catch (const std::exception& e) {
          return e.what();
        }
        return {};
      },
      "NUMBER");
}

CLI::Validator integer(long long lo, long long hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        try {
          units::parse_integer(text, lo, hi);
        } catch (const std::exception& e) {
          return e.what();
        }
        return {};
      },
      "INT");
}

namespace {
// Why the first write to standard output failed (stdout is process-wide state already): a full file system
// answers ENOSPC to the write, but a later probe of a regular file succeeds, and the reason was lost
// ("Input/output error", issue 27).
int stdout_write_errno = 0;
}  // namespace

void print_stdout(const std::string& text) {
  errno = 0;
  // Its failure also stays on stdout's error flag for main.
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() && stdout_write_errno == 0)
    stdout_write_errno = errno != 0 ? errno : EIO;
}

int stdout_error() {
  return stdout_write_errno;
}

void write_output(const std::string& out, const std::string& text) {
  if (out.empty())
    print_stdout(text);
  else
    write_file_atomic(out, text);
}

namespace {
nlohmann::json option_json(const CLI::Option* o) {
  nlohmann::json j;
  const bool positional = !o->nonpositional();
  std::vector<std::string> names;
  if (positional) names.push_back(o->get_name(true, false));
  for (const auto& n : o->get_lnames()) names.push_back("--" + n);
  for (const auto& n : o->get_snames()) names.push_back("-" + n);
  j["names"] = names;
  j["positional"] = positional;
  // A flag takes no value; an option its CLI11 type name ("TEXT", "INT", with its checks' names).
  j["value"] = o->get_type_size() == 0 ? "" : o->get_type_name();
  j["repeatable"] = o->get_expected_max() >= CLI::detail::expected_max_vector_size;
  j["required"] = o->get_required();
  j["default"] = o->get_default_str();
  j["description"] = o->get_description();
  return j;
}

nlohmann::json usage_json(const CLI::App& cli) {
  nlohmann::json commands = nlohmann::json::array();
  for (const CLI::App* sub : cli.get_subcommands([](const CLI::App*) { return true; })) {
    nlohmann::json c;
    c["name"] = sub->get_name();
    c["description"] = sub->get_description();
    c["flags_here"] = !sub->get_prefix_command();
    c["options"] = nlohmann::json::array();
    if (!sub->get_prefix_command())
      for (const CLI::Option* o : sub->get_options())
        if (o != sub->get_help_ptr()) c["options"].push_back(option_json(o));
    commands.push_back(c);
  }
  return nlohmann::json{{"commands", commands}};
}
}  // namespace

void add_usage_json(CLI::App& cli) {
  cli.add_flag_callback(
         "--usage-json",
         [&cli] {
           print_stdout(usage_json(cli).dump(1) + "\n");
           throw CLI::Success();
         },
         "every command's options as JSON (the flags tables of docs/)")
      ->group("");  // hidden from --help
}

int some_points_failed(const std::string& command, size_t failed, size_t total, const std::string& first,
                       int status) {
  if (failed == 0) return status;
  std::fflush(stdout);  // the output first, then the line that says it is incomplete
  fmt::print(stderr, "vitsim: error: {}: {} of {} failed, the output lists {} with {} reason ({}{})\n",
             command, failed, count_noun(static_cast<long long>(total), "point"), failed == 1 ? "it" : "them",
             failed == 1 ? "its" : "their", first, failed > 1 ? "; ..." : "");
  return 6;
}

}  // namespace vitsim::app
