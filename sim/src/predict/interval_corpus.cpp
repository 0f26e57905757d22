// The public corpus' part of an interval (predict/interval_corpus.hpp).
#include "predict/interval_corpus.hpp"

#include "vitsim/core/formats/calibration.hpp"
#include "vitsim/core/results/corpus_error.hpp"

namespace vitsim::sim {

bool point_calibrated(const Scenario& s, const Calibration* calib, const std::set<std::string>& gpu_models) {
  if (!calib || gpu_models.empty()) return false;
  for (const std::string& m : gpu_models)
    if (!calib->find(m, s.model, s.training.precision) && !calib->op_model(m, s.training.precision))
      return false;
  return true;
}

CorpusSpread corpus_spread(double p_low, double p_high) {
  const CorpusError& e = shipped_corpus_error();
  const CorpusBand b = corpus_band(e, p_low, p_high);
  CorpusSpread c;
  c.rows = b.rows;
  c.origins = b.origins;
  c.ratio_low = b.ratio_low;
  c.ratio_high = b.ratio_high;
  c.held_out = corpus_holdout(e, p_low, p_high).level();
  return c;
}

}  // namespace vitsim::sim
