// `vitsim plan`'s one-line form (commands.hpp, write_one_line_scenario): the platform of `vitsim platform`'s
// flags and a scenario naming it, the model, the dataset and the DeepSpeed config, written as files the
// user can edit and plan again (--save-scenario), so that one command answers the common question.
#include <fmt/format.h>

#include <filesystem>

#include "commands.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim::app {

namespace {

// An attribute value as XML writes it.
std::string xml_attr(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// --nic SPEED[:COUNT]: a catalogue NIC or a rate, and how many per node (default 1).
std::pair<std::string, int> parse_nic(const std::string& text) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) return {text, 1};
  try {
    return {text.substr(0, colon), static_cast<int>(units::parse_integer(text.substr(colon + 1), 1, 64))};
  } catch (const Error& e) {
    throw UsageError(
        fmt::format("--nic '{}': expected SPEED[:COUNT] (ndr:8, 400Gbps:8): {}", echo(text), e.what()));
  }
}

}  // namespace

std::string write_one_line_scenario(const OneLinePlan& q, const std::string& dir) {
  namespace fs = std::filesystem;
  if (q.model.empty() || q.dataset.empty())
    throw UsageError(
        "plan --gpu: give the model and the dataset too (--model vit_l_16 --dataset imagenet1k), or a "
        "scenario");
  if (q.nodes > 1 && q.nic.empty())
    throw UsageError("plan --gpu with more than one node: give --nic SPEED[:COUNT] (ndr:8, 400Gbps:8)");
  const auto [speed, count] = q.nic.empty() ? std::pair<std::string, int>{"", 1} : parse_nic(q.nic);
  const std::string platform = (fs::path(dir) / "platform.xml").string();
  const std::string scenario = (fs::path(dir) / "scenario.xml").string();
  const std::string platform_text = platform_xml_for(q.gpu, q.nodes, q.gpus_per_node, speed, count);
  std::string text = fmt::format(
      "<scenario name=\"{}\">\n"
      "  <!-- Written by vitsim plan's one-line form: edit it and plan again with vitsim plan {} -->\n"
      "  <cluster platform=\"platform.xml\" nodes=\"{}\" gpus_per_node=\"{}\"/>\n"
      "  <model preset=\"{}\"/>\n"
      "  <dataset name=\"{}\"/>\n",
      xml_attr(q.model + "-" + q.dataset), xml_attr(scenario), q.nodes, q.gpus_per_node, xml_attr(q.model),
      xml_attr(q.dataset));
  if (!q.deepspeed.empty())
    text += fmt::format("  <deepspeed config=\"{}\"/>\n", xml_attr(fs::absolute(q.deepspeed).string()));
  text += "</scenario>\n";
  // A file there already is kept unless it is what this command writes: re-running the command wiped the
  // edits made to the saved files since (issue 39 item 5).
  for (const auto& [path, content] : {std::pair<std::string, std::string>{platform, platform_text},
                                      std::pair<std::string, std::string>{scenario, text}}) {
    std::error_code ec;
    if (fs::exists(path, ec) && read_input_file(path, "saved file (--save-scenario)") != content)
      throw Error(
          fmt::format("--save-scenario: {} exists and differs from what this command writes (edited "
                      "since it was saved?): plan it with vitsim plan {}, or give another folder",
                      path, scenario));
  }
  write_file_atomic(platform, platform_text);
  write_file_atomic(scenario, text);
  return scenario;
}

}  // namespace vitsim::app
