#pragma once
// The one-line form's default search (`vitsim plan --gpu ... --model ... --dataset ...`, docs/plan.md "The
// one-line form", issue 38 item 1): the axes a user asking "how many nodes, which micro-batch, which ZeRO
// stage" means, opened on the scenario the form wrote, each left as the user pinned it with a --set.
#include <optional>
#include <string>
#include <vector>

#include "vitsim/core/formats/scenario.hpp"

namespace vitsim::sim {

struct OneLineSearch {
  std::vector<std::string> lines;         // the searched space in words (PlanOptions::space_notes)
  std::optional<long long> global_batch;  // --global-batch, else the DeepSpeed config's train_batch_size
};

// Opens on `f`, as --set lists do (so that they win over a DeepSpeed config's values, as a user's --set
// does: merge_deepspeed), every axis no --set pinned:
// - cluster.nodes: 1, 2, 4, ... below `max_nodes`, and `max_nodes`;
// - training.micro_batch: 1, 2, 4, ... up to the largest that fits at any searched ZeRO stage on the most
//   nodes (the memory model: plan_memory.hpp); a point that does not fit at its own nodes and stage is then
//   excluded before simulating, at no cost;
// - parallelism.zero: 0 to 3;
// - training.precision, unless the DeepSpeed config enables fp16 or bf16: the GPU's fastest (bf16 where its
//   bf16 figure is above fp32, else fp16 where that is, else fp32);
// overlap is the framework's own (parallelism.overlap's default), the accumulation follows the global batch
// (--global-batch, else the config's train_batch_size; else 1). Throws Error as resolve() does.
OneLineSearch open_one_line_search(ScenarioFile& f, int max_nodes, std::optional<long long> global_batch);

}  // namespace vitsim::sim
