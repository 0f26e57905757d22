#pragma once
// The 2-GPU scenario of the tiny CIFAR ViT on p.xml (one node of two T4s, `vitsim platform --gpu t4 --nodes 1
// --gpus-per-node 2`) that the robustness tests run their cases against: six short steps, so a case's
// simulation (or an interval's few) takes well under a second.
#include <string>

namespace vt {

inline std::string tiny_cifar_scenario(const std::string& name) {
  return R"(<scenario name=")" + name + R"(">
  <cluster platform="p.xml" nodes="1" gpus_per_node="2"/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="6400" image_size="32" channels="3"/>
  <training micro_batch="32" precision="fp32"/>
  <simulation steps="6" warmup="1"/>
</scenario>
)";
}

}  // namespace vt
