#pragma once
// The model's own error on the public corpus (issue 37 item 3; docs/predict.md "The model's own error",
// docs/benchmarks.md "The model's error band, origin by origin"): every row of bench/data/public/*.txt that
// vitsim predicts from the catalogue's figures alone, its measured and predicted time, and the origin (the
// independent source) it belongs to. The table data/corpus_residuals.txt is written by
// bench/public_steps.py --write-residuals and compiled in (core/CMakeLists.txt); the ctest corpus_residuals
// fails when it is stale against the corpus files or today's model.
#include <string>
#include <string_view>
#include <vector>

namespace vitsim {

struct CorpusResidual {
  std::string origin;  // the independent source ("timm", "nemo")
  std::string file;    // the corpus file ("timm_train_rtx3090_pt112.txt")
  int line = 0;        // the row's line in it
  double measured_s = 0, predicted_s = 0;
};

struct CorpusError {
  std::string path;  // where the table was read, for messages
  std::vector<CorpusResidual> rows;
  std::vector<std::string> origins() const;  // sorted, each once
};

// The table's text (columns: origin file line measured_s predicted_s; '#' lines are comments). Throws Error
// naming `path`, the line and the field: a row without an origin or a file, a line or a time that is no
// positive number, a ratio outside the report's range of plausible time ratios, fewer than two origins.
CorpusError read_corpus_error(const std::string& path, std::string_view text);
// data/corpus_residuals.txt as compiled in, read once.
const CorpusError& shipped_corpus_error();

// The band of measured / predicted ratios that the corpus says the model's time falls in, each origin one
// vote (CDF pooling, Dunn, Wasserman and Ramdas, JASA 2023; docs/sources.md "Intervals from the public
// corpus"): the pooled distribution of log(measured / predicted) weighs a row of an origin with n rows 1/(n x
// origins), and the band's ends are its p_low and p_high quantiles (the smallest residual whose pooled weight
// at or below it reaches the level). `leave_out`: an origin left out (the leave-one-origin-out check).
struct CorpusBand {
  double ratio_low = 1, ratio_high = 1;  // measured / predicted
  int rows = 0, origins = 0;             // the rows and origins the band is taken from
};
CorpusBand corpus_band(const CorpusError& e, double p_low, double p_high, std::string_view leave_out = {});

// Leave one origin out: each origin's rows judged in the band of the others. `held` of `rows` fell inside;
// `origins_held` origins had p_high - p_low of their rows or more inside; `median_width` is the median over
// origins of the band's width as a share of the central value (ratio_high - ratio_low).
struct CorpusHoldout {
  int held = 0, rows = 0, origins_held = 0, origins = 0;
  double median_width = 0;
  double level() const { return rows > 0 ? static_cast<double>(held) / rows : 0; }
};
CorpusHoldout corpus_holdout(const CorpusError& e, double p_low, double p_high);

}  // namespace vitsim
