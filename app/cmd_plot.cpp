// `vitsim plot`: its flags are the CLI11 definitions below; their table in docs/study.md is generated from
// them.
#include <fmt/format.h>

#include <memory>

#include "commands.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/core/results/plan.hpp"
#include "vitsim/core/results/report.hpp"
#include "vitsim/core/results/validation.hpp"
#include "vitsim/plot/plan_plot.hpp"
#include "vitsim/plot/plot.hpp"
#include "vitsim/plot/validation_plot.hpp"

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
                                   "against micro-batch; a plan or a validation");
  c->add_option("reports", args->reports,
                "report JSON from `vitsim predict --format json` (with its p10-p90 band after --interval); "
                "several are drawn together, one set of curves each, labelled by what tells them apart "
                "(scenario, what-ifs, --set); or one plan (`vitsim plan --format json`, with its baseline "
                "after --baseline) or one validation (`vitsim validate --format json`: predicted beside "
                "measured)")
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
      // Each file read once (a FIFO gives its text once): a plan or a validation is plotted alone.
      std::vector<std::string> texts;
      for (const auto& path : args->reports) {
        texts.push_back(read_input_file(path, "report"));
        plot::check_plot_input(texts.back(), path);
      }
      const std::string& first = args->reports[0];
      // A capacity plan ("vitsim.plan/2") gets the plan plots.
      if (args->reports.size() == 1 && texts[0].find("\"vitsim.plan/") != std::string::npos) {
        if (!args->measured.empty())
          throw UsageError("--measured draws a measured run over a report's plot, not over a plan's");
        PlanResult plan = plan_from_json(texts[0], first);
        if (plan.ranked)
          rank_plan(plan);  // ranks and the Pareto front from the figures, not as the file says
        if (plan.baseline && plan.baseline->ranked) rank_plan(*plan.baseline);
        plot::plot_plan(plan, args->out, plot::parse_plan_kind(args->kind), opt);
        return 0;
      }
      // A validation ("vitsim.validation/2"): predicted beside measured, which it holds both of.
      for (size_t i = 0; i < texts.size(); ++i) {
        if (texts[i].find("\"vitsim.validation/") == std::string::npos) continue;
        if (args->reports.size() > 1 || !args->measured.empty())
          throw UsageError(fmt::format(
              "{}: a validation holds the predicted and the measured times: plot it alone, without other "
              "files or --measured",
              args->reports[i]));
        if (args->kind != "auto")
          throw UsageError(fmt::format("--kind {}: a validation has one plot; leave --kind out", args->kind));
        plot::plot_validation(validation_from_json(texts[i], args->reports[i]), args->out, opt);
        return 0;
      }
      std::vector<Report> reports;
      for (size_t i = 0; i < texts.size(); ++i)
        reports.push_back(report_from_json(texts[i], args->reports[i]));
      const Report r = plot::merge_reports(reports);
      opt.kind = plot::parse_kind(args->kind);
      Report measured;
      if (!args->measured.empty()) {
        const std::string text = read_input_file(args->measured, "report");
        plot::check_plot_input(text, args->measured);
        measured = report_from_json(text, args->measured);
        require_report_kind(measured, "measured", "vitsim plot --measured");
        opt.measured = &measured;
      }
      plot::plot_report(r, args->out, opt);
      return 0;
    };
  });
}

}  // namespace vitsim::app
