// `vitsim plan`'s one-line form (commands.hpp, write_one_line_scenario): the platform of `vitsim platform`'s
// flags and a scenario naming it, the model, the dataset and the DeepSpeed config, written as files the
// user can edit and plan again (--save-scenario), so that one command answers the common question.
#include <fmt/format.h>

#include <filesystem>
#include <map>

#include "commands.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/core/formats/scenario_limits.hpp"

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

// The first line of the search's block in a saved scenario (save_one_line_search).
constexpr const char* kSearchMarker =
    "  <!-- The one-line form's search (docs/plan.md \"The one-line form\"): -->\n";

// A saved scenario without the search's block: what write_one_line_scenario wrote.
std::string without_search(std::string xml) {
  const size_t at = xml.find(kSearchMarker);
  const size_t end = xml.rfind("</scenario>");
  if (at != std::string::npos && end != std::string::npos && end > at) xml.erase(at, end - at);
  return xml;
}

Error edited_since(const std::string& path, const std::string& scenario) {
  return Error(
      fmt::format("--save-scenario: {} exists and differs from what this command writes (edited "
                  "since it was saved?): plan it with vitsim plan {}, or give another folder",
                  path, scenario));
}

}  // namespace

void add_one_line_options(CLI::App* c, OneLinePlan& q) {
  c->add_option("--gpu", q.gpu, "one-line form: a catalogue GPU (vitsim platform --list-gpus)");
  c->add_option("--nodes", q.nodes, "one-line form: nodes")->check(integer(1, kMaxScenarioNodes));
  c->add_option("--gpus-per-node", q.gpus_per_node, "one-line form: GPUs per node")
      ->check(integer(1, kMaxGpusPerNode));
  c->add_option("--nic", q.nic, "one-line form: NIC speed and count per node, SPEED[:COUNT] (ndr:8)");
  c->add_option("--model", q.model, "one-line form: a model preset (vit_l_16)");
  c->add_option("--dataset", q.dataset, "one-line form: a dataset name (imagenet1k)");
  c->add_option("--deepspeed", q.deepspeed, "one-line form: a DeepSpeed config (ds_config.json)");
}

std::string write_one_line_scenario(const OneLinePlan& q, const std::string& dir, std::string* saved) {
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
  // The saved scenario holds the search too (save_one_line_search): compared without it here, and its
  // search where the search is known (`saved` keeps the file as it was, restored there if it differs).
  std::error_code ec;
  for (const auto& [path, content] : {std::pair<std::string, std::string>{platform, platform_text},
                                      std::pair<std::string, std::string>{scenario, text}}) {
    if (!fs::exists(path, ec)) continue;
    const std::string old = read_input_file(path, "saved file (--save-scenario)");
    if (without_search(old) != content) throw edited_since(path, scenario);
    if (path == scenario && saved) *saved = old;
  }
  write_file_atomic(platform, platform_text);
  write_file_atomic(scenario, text);
  return scenario;
}

void save_one_line_search(const ScenarioFile& f, const std::string& path, const std::string& saved) {
  auto searched = [](const Origin& o) { return o.file.find("(the one-line search)") != std::string::npos; };
  std::map<std::string, std::string> elements;  // element -> its attributes, as XML writes them
  for (const auto& [key, attr] : f.attrs) {
    const std::string element = key.substr(0, key.find('.'));
    if (!searched(attr.origin) || element == "cluster") continue;  // <cluster> holds the nodes already
    elements[element] += fmt::format(" {}=\"{}\"", key.substr(element.size() + 1), xml_attr(attr.value));
  }
  std::string text = kSearchMarker;
  for (const auto& [element, attrs] : elements) text += fmt::format("  <{}{}/>\n", element, attrs);
  for (const Sweep& s : f.sweeps)
    if (searched(s.origin)) {
      std::string values;
      for (const auto& v : s.values) values += (values.empty() ? "" : ",") + v;
      text += fmt::format("  <sweep param=\"{}\" values=\"{}\"/>\n", xml_attr(s.key), xml_attr(values));
    }
  std::string xml = read_file(path);
  xml.insert(xml.rfind("</scenario>"), text);
  if (!saved.empty() && saved != xml) {
    write_file_atomic(path, saved);  // saved before, its search edited since: kept as it was
    throw edited_since(path, path);
  }
  write_file_atomic(path, xml);
}

std::string name_one_line_files(std::string message, const std::string& dir, const OneLinePlan& q) {
  namespace fs = std::filesystem;
  const std::pair<std::string, std::string> names[] = {
      {(fs::path(dir) / "platform.xml").string(), fmt::format("the platform of --gpu {}", q.gpu)},
      {(fs::path(dir) / "scenario.xml").string(), "the one-line form's scenario"}};
  for (const auto& [path, name] : names)
    for (size_t at = message.find(path); at != std::string::npos; at = message.find(path, at + name.size()))
      message.replace(at, path.size(), name);
  return message;
}

void name_one_line_origins(ScenarioFile& f) {
  static const std::map<std::string, std::string> flag_of{{"cluster.platform", "--gpu"},
                                                          {"cluster.nodes", "--nodes"},
                                                          {"cluster.gpus_per_node", "--gpus-per-node"},
                                                          {"model.preset", "--model"},
                                                          {"dataset.name", "--dataset"},
                                                          {"deepspeed.config", "--deepspeed"},
                                                          {"scenario.name", "--model/--dataset"}};
  for (auto& [key, attr] : f.attrs)
    if (attr.origin.file == f.path) {
      const auto it = flag_of.find(key);
      // A relative path is read beside its origin's file: the platform's, written beside the scenario,
      // becomes absolute before its origin is the flag.
      if (key == "cluster.platform")
        attr.value = (std::filesystem::path(f.path).parent_path() / attr.value).string();
      attr.origin = Origin{it == flag_of.end() ? "the one-line form" : it->second, 0};
    }
}

}  // namespace vitsim::app
