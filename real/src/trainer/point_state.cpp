// The replicas' state of one scenario point (point_trainer.hpp): resume from a checkpoint, the
// checkpoints written as it trains (checkpoint.cpp holds their format), and the check that every rank
// holds the same parameters.
#include <cmath>

#include <fmt/format.h>

#include "trainer/point_trainer.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/real/gather.hpp"

namespace vitsim::real {

namespace {

// Two sums that any divergence between replicas changes (a swap of values changes the weighted one).
struct ReplicaChecksum {
  double plain = 0, weighted = 0;
};
ReplicaChecksum checksum(const std::vector<torch::Tensor>& params) {
  ReplicaChecksum c;
  double k = 1;
  for (const auto& p : params) {
    auto d = p.detach().to(torch::kCPU, torch::kFloat64);
    c.plain += d.sum().item<double>();
    c.weighted += k * d.abs().sum().item<double>();
    k += 1;
  }
  return c;
}

}  // namespace

// --resume: the checkpoint's model, optimizer, position and loss scale.
void PointTrainer::resume() {
  Loaded loaded = load_checkpoint(s_, nranks_, *model_, *optimizer_, device_);
  pos_ = loaded.pos;
  bind_flat_parameters(params_, flat_.offsets, flat_.params);
  if (loaded.legacy) {
    const std::string warning =
        loaded.tensors_checked
            ? fmt::format(
                  "{} has no envelope (a bare archive): each tensor matched its own CRC32, but the "
                  "file's position and scalars are unverified",
                  checkpoint_path(s_))
            : fmt::format("{} was written by an older vitsim without checksums: resumed from it unverified",
                          checkpoint_path(s_));
    if (rank_ == 0) fmt::print(stderr, "vitsim: warning: {}\n", warning);
    notes_.push_back(warning);
  }
  scaler_.scale = pos_.loss_scale;
  scaler_.good_steps = pos_.good_steps;
  if (rank_ == 0 && opt_.verbose)
    fmt::print("vitsim train: resumed {} at epoch {} step {} (global step {})\n", checkpoint_path(s_),
               pos_.epoch + 1, pos_.step_in_epoch, pos_.global_step);
  checkpointed_ = pos_.global_step;
  progress().checkpoint_step = checkpointed_;
}

void PointTrainer::checkpoint() {
  if (s_.run.checkpoint_dir.empty()) return;
  pos_.loss_scale = scaler_.scale;
  pos_.good_steps = scaler_.good_steps;
  if (rank_ == 0) save_checkpoint(s_, nranks_, *model_, *optimizer_, pos_, checkpointed_);
  checkpointed_ = pos_.global_step;
  progress().checkpoint_step = checkpointed_;
  world_.barrier("checkpoint barrier");
}

void PointTrainer::check_replicas(const char* when) {
  if (nranks_ == 1) return;
  const auto all = allgather_record(world_, checksum(params_), "replica checksum");
  for (int r = 0; r < nranks_; ++r)
    if (!std::isfinite(all[r].plain) || !std::isfinite(all[r].weighted))
      throw Error(fmt::format("training diverged ({} global step {}): rank {}'s parameters are not finite",
                              when, pos_.global_step, r));
  for (int r = 1; r < nranks_; ++r)
    if (all[r].plain != all[0].plain || all[r].weighted != all[0].weighted)
      throw Error(fmt::format(
          "replicas diverged ({} global step {}): rank {} parameter checksums {:.17g} / {:.17g} "
          "differ from rank 0's {:.17g} / {:.17g}",
          when, pos_.global_step, r, all[r].plain, all[r].weighted, all[0].plain, all[0].weighted));
}

}  // namespace vitsim::real
