#pragma once
// The shape of one training epoch: how many optimizer steps, and how the last one is filled. One rule
// for the simulator (sim/src/point/simulate.cpp) and the real trainer (real/src/trainer/trainer.cpp), so that
// a prediction and a measurement of the same scenario count the same steps.
//
// The rule is PyTorch's and DeepSpeed's default:
//   - torch.utils.data.DistributedSampler(drop_last=False) pads the epoch to a multiple of the replicas
//     by repeating its first samples, so every replica gets ceil(samples / replicas) samples;
//   - DataLoader(drop_last=False) (DeepSpeed's dataloader_drop_last defaults to false) keeps the last,
//     partial micro-batch: ceil(per_replica / micro_batch) micro-batches;
//   - an optimizer step every grad_accum micro-batches, the last step of the epoch taking what is left:
//     ceil(micro_batches / grad_accum) steps.
// Fewer samples than one global batch (micro_batch x grad_accum x replicas) is an error: the one step
// would be mostly padding and a throughput of global_batch / step time would count images that do not
// exist.
#include <string>

namespace vitsim {

struct EpochShape {
  long long samples = 0;            // the epoch's samples (before padding)
  long long per_replica = 0;        // samples each data-parallel replica sees, padding included
  long long micro_batches = 0;      // per replica, the last one possibly partial
  long long steps = 0;              // optimizer steps
  long long last_micro_batch = 0;   // samples in the last micro-batch (= micro_batch when it is full)
  int last_step_micro_batches = 0;  // micro-batches of the last step (= grad_accum when it is full)
  int grad_accum = 1;
  // Steps as a fraction: micro_batches / grad_accum (the last, shorter step counted by its share).
  double exact_steps() const;
};

// samples: the epoch's training samples (DatasetSpec::effective_train_samples); replicas: data-parallel
// ranks. Throws Error ("`what`: N training samples are fewer than one global batch of G ...") when the
// samples do not fill one global batch, or on a non-positive argument.
EpochShape epoch_shape(long long samples, int replicas, int micro_batch, int grad_accum,
                       const std::string& what = "");

}  // namespace vitsim
