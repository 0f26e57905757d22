#pragma once
// The tiny CIFAR ViT's scenario the tests run their cases against: six short steps, so a case's simulation
// (or an interval's few) takes well under a second. By default 2 GPUs on p.xml (the robustness tests' one
// node of two T4s, `vitsim platform --gpu t4 --nodes 1 --gpus-per-node 2`, or `platform`); `extra` goes in
// before <simulation> (a <parallelism> or <loader> line).
#include <string>

namespace vt {

inline std::string tiny_cifar_scenario(const std::string& name, int gpus = 2, const std::string& extra = "",
                                       const std::string& platform = "p.xml") {
  return R"(<scenario name=")" + name + R"(">
  <cluster platform=")" +
         platform + R"(" nodes="1" gpus_per_node=")" + std::to_string(gpus) + R"("/>
  <model preset="vit_cifar_tiny"/>
  <dataset name="synthetic" train_samples="6400" image_size="32" channels="3"/>
  <training micro_batch="32" precision="fp32"/>
)" + extra +
         R"(  <simulation steps="6" warmup="1"/>
</scenario>
)";
}

}  // namespace vt
