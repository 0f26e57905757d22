#include "vitsim/core/model/dataset.hpp"

#include <fmt/format.h>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/suggest.hpp"
#include "vitsim/core/base/units.hpp"

namespace vitsim {

namespace {

// Facts and statistics: docs/sources.md "Datasets". Normalisation: the values torchvision's examples and
// the usual references quote (CIFAR-10 0.4914/0.4822/0.4465 and 0.2470/0.2435/0.2616, CIFAR-100
// 0.5071/0.4865/0.4409 and 0.2673/0.2564/0.2762, ImageNet 0.485/0.456/0.406 and 0.229/0.224/0.225,
// Fashion-MNIST 0.2860 and 0.3530).
std::vector<DatasetInfo> make_table() {
  const std::vector<float> imagenet_mean{0.485f, 0.456f, 0.406f}, imagenet_std{0.229f, 0.224f, 0.225f};
  std::vector<std::string> cifar10_train;
  for (int i = 1; i <= 5; ++i) cifar10_train.push_back(fmt::format("data_batch_{}.bin", i));
  const std::string folder_help = "a folder with train/ and val/ ImageFolder trees";
  return {
      {.name = "cifar10",
       .facts = DatasetFacts{50000, 10000, 32, 3, 10},
       .mean = {0.4914f, 0.4822f, 0.4465f},
       .std = {0.2470f, 0.2435f, 0.2616f},
       .reader = DatasetReader::CifarBinary,
       .label_bytes = 1,
       .path_help = "the folder holding data_batch_1..5.bin, test_batch.bin",
       .train_files = cifar10_train,
       .test_files = {"test_batch.bin"}},
      // Records of a coarse, then a fine label byte: the fine label is the class.
      {.name = "cifar100",
       .facts = DatasetFacts{50000, 10000, 32, 3, 100},
       .mean = {0.5071f, 0.4865f, 0.4409f},
       .std = {0.2673f, 0.2564f, 0.2762f},
       .reader = DatasetReader::CifarBinary,
       .label_bytes = 2,
       .path_help = "the folder holding train.bin, test.bin",
       .train_files = {"train.bin"},
       .test_files = {"test.bin"}},
      // ImageNet-1k (ILSVRC-2012's classification set), JPEGs of varying size; 256 px typical after the
      // usual short-side resize. Listed before imagenet100 so that "imagenet" is taken for it.
      {.name = "imagenet1k",
       .facts = DatasetFacts{1281167, 50000, 256, 3, 1000},
       .mean = imagenet_mean,
       .std = imagenet_std,
       .reader = DatasetReader::ImageFolder,
       .path_help = folder_help,
       .train_files = {"train"},
       .test_files = {"val"}},
      // JPEGs of varying size; 256 px typical after the usual short-side resize.
      {.name = "imagenet100",
       .facts = DatasetFacts{126689, 5000, 256, 3, 100},
       .mean = imagenet_mean,
       .std = imagenet_std,
       .reader = DatasetReader::ImageFolder,
       .path_help = folder_help,
       .train_files = {"train"},
       .test_files = {"val"}},
      // Debian's dataset-fashion-mnist package installs the files in its default folder.
      {.name = "fashion_mnist",
       .facts = DatasetFacts{60000, 10000, 28, 1, 10},
       .mean = {0.2860f},
       .std = {0.3530f},
       .reader = DatasetReader::Idx,
       .default_path = "/usr/share/datasets/fashion-mnist",
       .train_files = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"},
       .test_files = {"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}},
      // The user's own ImageFolder tree: ImageNet's statistics when it is RGB.
      {.name = "imagefolder",
       .mean = imagenet_mean,
       .std = imagenet_std,
       .stats_need_channels = true,
       .reader = DatasetReader::ImageFolder,
       .path_help = folder_help,
       .train_files = {"train"},
       .test_files = {"val"}},
      // Bytes uniform on [0, 255]: mean 0.5, standard deviation 1/sqrt(12) ~ 0.2887.
      {.name = "synthetic", .fill_mean = 0.5f, .fill_std = 0.2887f, .reader = DatasetReader::Synthetic},
  };
}

}  // namespace

std::pair<std::vector<float>, std::vector<float>> DatasetInfo::normalization(int channels) const {
  if (!mean.empty() && (!stats_need_channels || static_cast<int>(mean.size()) == channels))
    return {mean, std};
  return {std::vector<float>(channels, fill_mean), std::vector<float>(channels, fill_std)};
}

const std::vector<DatasetInfo>& datasets() {
  static const std::vector<DatasetInfo> table = make_table();
  return table;
}

std::vector<std::string> dataset_names() {
  std::vector<std::string> out;
  for (const auto& d : datasets()) out.push_back(d.name);
  return out;
}

const DatasetInfo* find_dataset(const std::string& name) {
  for (const auto& d : datasets())
    if (d.name == name) return &d;
  return nullptr;
}

const DatasetInfo& dataset(const std::string& name) {
  if (const DatasetInfo* d = find_dataset(name)) return *d;
  std::string valid;
  for (const auto& n : dataset_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw Error(fmt::format("unknown dataset '{}'; valid: {}{}", echo(name), valid,
                          did_you_mean(name, dataset_names())));
}

}  // namespace vitsim
