// The tables of `vitsim platform --list-gpus` / `--list-links` (platform_writer.hpp), from the catalogue
// platform_catalogue.cpp parses.
#include <fmt/format.h>

#include "platform/platform_writer_detail.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/platform/platform_writer.hpp"

namespace vitsim {

using namespace platform_detail;

// Tables for `vitsim platform --list-gpus` / `--list-links`.
std::string catalogue_gpu_table(const Catalogue& cat) {
  std::string out = fmt::format(
      "{:<15} {:<14} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>9} {:>10} {:>5} {:>6} {:<10} {:<24} {}\n", "name",
      "arch", "fp32", "tf32", "fp16", "bf16", "fp8", "sold", "memory", "mem_bw", "SMs", "TDP", "host",
      "GPU link/direction", "aliases");
  auto f = [](const CatalogueGpu& g, const char* p) {
    return g.flops.count(p) ? g.flops.at(p) : std::string("-");
  };
  for (const auto& g : cat.gpus) {
    const double gib = units::parse(g.memory, units::Kind::Bytes) / (1024.0 * 1024 * 1024);
    out += fmt::format(
        "{:<15} {:<14} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>9} {:>10} {:>5} {:>6} {:<10} {:<24} {}\n",
        g.name, g.arch, f(g, "fp32"), f(g, "tf32"), f(g, "fp16"), f(g, "bf16"), f(g, "fp8"), g.memory_sold,
        fmt::format("{:.1f}GiB", gib), g.mem_bw, g.sm_count, g.tdp, g.host_link,
        g.gpu_link.empty() ? "-" : g.gpu_link + " " + g.gpu_link_bw, join(g.aliases));
  }
  out +=
      "Dense peaks (no sparsity); memory as vitsim uses it (GiB); sources: data/catalogue.json, "
      "docs/sources.md.\n";
  return out;
}

std::string catalogue_link_table(const Catalogue& cat) {
  std::string out = fmt::format("{:<15} {:<10} {:<22} {:<22} {:<10} {}\n", "name", "kind", "line rate",
                                "vitsim writes", "transport", "aliases");
  for (const auto& l : cat.links)
    out += fmt::format("{:<15} {:<10} {:<22} {:<22} {:<10} {}\n", l.name, l.kind, l.line_rate, l.effective,
                       l.transport, join(l.aliases));
  out += "Rates per direction; sources: data/catalogue.json, docs/sources.md.\n";
  return out;
}

}  // namespace vitsim
