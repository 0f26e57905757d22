#pragma once
// The trainer's checkpoints (internal to real/): what a checkpoint holds (model, optimizer state, the run's
// position, the fp16 loss scaler, the CPU generator), written by rank 0 through core's atomic writer in
// the envelope of vitsim/real/checkpoint_file.hpp, and read back by every rank with each tensor checked
// against its own CRC32.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "vitsim/core/formats/scenario.hpp"
#include "vitsim/real/optim.hpp"

namespace vitsim::real {

// Where a run stands: what a checkpoint records besides the tensors.
struct Position {
  int epoch = 0;                 // epoch in progress
  long long step_in_epoch = 0;   // optimizer steps done in it
  long long global_step = 0;     // optimizer steps done in the whole run
  std::vector<double> accuracy;  // test accuracy of the epochs finished
  double loss_scale = 65536.0;   // fp16 loss scaler state
  long long good_steps = 0;
};

// What must be equal for a checkpoint to continue this run: the model, data, batch, ranks and optimizer.
std::string fingerprint(const Scenario& s, int world);
std::string checkpoint_path(const Scenario& s);  // run.checkpoint_dir/checkpoint.pt

// Makes run.checkpoint_dir and checks the checkpoint can be written there: at the start of a run, not at
// the first checkpoint an hour in. Throws Error.
void prepare_checkpoint_dir(const Scenario& s);

// previous_step: the global step of the checkpoint already in place (-1: none), for the error message.
void save_checkpoint(const Scenario& s, int world, torch::nn::Module& model, const FlatOptimizer& opt,
                     const Position& pos, long long previous_step);

struct Loaded {
  Position pos;
  bool legacy = false;           // a bare archive (no envelope: an older vitsim's, or one stripped of it)
  bool tensors_checked = false;  // each tensor matched its own CRC32 (false: the archive has none)
};
// Loads the model and optimizer state in place (the model's parameters are rebound to new storage: the
// caller binds them to the flat buffer again) and restores the CPU generator. Throws Error naming the file
// and what is wrong: missing, another run's, damaged (which tensor), unreadable.
Loaded load_checkpoint(const Scenario& s, int world, torch::nn::Module& model, FlatOptimizer& opt,
                       const torch::Device& device);

}  // namespace vitsim::real
