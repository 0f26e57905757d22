// `vitsim plot`: its flags are the CLI11 definitions below; their table in docs/study.md is generated from
// them.
#include <fmt/format.h>

#include <memory>

#include "commands.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/results/plan.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/plot/plan_plot.hpp"
#include "vitsim/plot/plot.hpp"

namespace vitsim::app {

namespace {
struct PlotArgs {
  std::vector<std::string> reports;
  std::string out;
  std::string kind = "auto";
  std::string gnuplot = "gnuplot";
  std::string measured;
};
}  // namespace

void add_plot(CLI::App& cli, Action& action) {
  auto args = std::make_shared<PlotArgs>();
  CLI::App* c = cli.add_subcommand("plot",
                                   "draw a report as an SVG, PNG or PDF with gnuplot: time and efficiency "
                                   "against GPUs, or per-sample time "
                                   "against micro-batch");
  c->add_option(
       "reports", args->reports,
       "report JSON from `vitsim predict --format json`; several are drawn together, one set of curves each")
      ->required();
  c->add_option("--out", args->out,
                "image to write: .svg, .png or .pdf (gnuplot's svg, pngcairo or pdfcairo)")
      ->required();
  c->add_option(
       "--kind", args->kind,
       "scaling, batch, or auto (x axis: whichever of micro-batch and GPU count has more values); for a plan "
       "from `vitsim plan --format json`: nodes, pareto, memory, or auto (default: auto)")
      ->check(CLI::IsMember(plot::plot_kind_names()));
  c->add_option("--gnuplot", args->gnuplot, "the gnuplot program (default: gnuplot on PATH)");
  c->add_option("--measured", args->measured,
                "a measured report (`vitsim train --out`) drawn as points over the prediction");
  c->callback([&action, args] {
    action = [args] {
      std::vector<NamedPath> inputs;
      for (const auto& r : args->reports) inputs.push_back({r, "the report"});
      inputs.push_back({args->measured, "--measured"});
      check_output_paths({{args->out, "--out"}}, inputs);
      try {
        plot::output_format(args->out);  // before reading the reports
      } catch (const Error& e) {
        throw UsageError(fmt::format("--out {}", e.what()));
      }
      plot::Options opt;
      opt.gnuplot = args->gnuplot;
      // A capacity plan ("vitsim.plan/2") gets the plan plots.
      if (args->reports.size() == 1) {
        const std::string text = read_input_file(args->reports[0], "report");
        plot::check_plot_input(text, args->reports[0]);
        if (text.find("\"vitsim.plan/") != std::string::npos) {
          if (!args->measured.empty())
            throw UsageError("--measured draws a measured run over a report's plot, not over a plan's");
          PlanResult plan = plan_from_json(text, args->reports[0]);
          if (plan.ranked)
            rank_plan(plan);  // ranks and the Pareto front from the figures, not as the file says
          plot::plot_plan(plan, args->out, plot::parse_plan_kind(args->kind), opt);
          return 0;
        }
      }
      std::vector<Report> reports;
      auto read_report = [](const std::string& path) {
        const std::string text = read_input_file(path, "report");
        plot::check_plot_input(text, path);
        return report_from_json(text, path);
      };
      for (const auto& path : args->reports) reports.push_back(read_report(path));
      const Report r = plot::merge_reports(reports);
      opt.kind = plot::parse_kind(args->kind);
      Report measured;
      if (!args->measured.empty()) {
        measured = read_report(args->measured);
        require_report_kind(measured, "measured", "vitsim plot --measured");
        opt.measured = &measured;
      }
      plot::plot_report(r, args->out, opt);
      return 0;
    };
  });
}

}  // namespace vitsim::app
