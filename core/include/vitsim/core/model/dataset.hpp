#pragma once
// The datasets vitsim knows, one row each: the published facts the scenario resolver fills in, the
// per-channel normalisation, which reader of the trainer opens the files and where they lie. The scenario
// (dataset.name's valid names), the memory and epoch models and real/'s readers all read this table;
// adding a dataset is adding a row here (and, for a new file format, its reader in real/src/data/data.cpp).
// Sources of every figure: docs/sources.md "Datasets".
#include <optional>
#include <string>
#include <vector>

namespace vitsim {

// How real/ reads a dataset's files.
enum class DatasetReader {
  Idx,          // gzip'd IDX images + labels (MNIST's format)
  CifarBinary,  // CIFAR's binary records: label byte(s) + 3x32x32 pixel bytes
  ImageFolder,  // torchvision's ImageFolder tree: one folder per class of JPEG/PNG files
  Synthetic,    // generated in memory, no files
};

// Published sizes of a dataset; a dataset without them takes dataset.train_samples etc. from the scenario.
struct DatasetFacts {
  long long train = 0, test = 0;
  int image = 0, channels = 0, classes = 0;
};

struct DatasetInfo {
  std::string name{};
  std::optional<DatasetFacts> facts{};
  // Per-channel mean and standard deviation of the training set, on pixels scaled to [0, 1]. `fill_*`
  // stands for every channel where there are no statistics, and where `stats_need_channels` asks the
  // model to have exactly as many channels as there are statistics.
  std::vector<float> mean{}, std{};
  bool stats_need_channels = false;
  float fill_mean = 0.5f, fill_std = 0.5f;
  DatasetReader reader = DatasetReader::Synthetic;
  int label_bytes = 0;  // CifarBinary: label bytes before each record's pixels (the last one is the class)
  std::string default_path{};  // where the files are when dataset.path is empty; "": dataset.path is required
  std::string path_help{};     // what dataset.path holds, for "dataset X needs dataset.path: ..."
  std::vector<std::string> train_files{}, test_files{};  // under dataset.path; {images, labels} for Idx

  // The normalisation for a model with `channels` input channels: `mean`/`std`, or `fill_*` on each.
  std::pair<std::vector<float>, std::vector<float>> normalization(int channels) const;
};

// Every dataset, in the order messages list them.
const std::vector<DatasetInfo>& datasets();
std::vector<std::string> dataset_names();
// The row of `name`, or nullptr.
const DatasetInfo* find_dataset(const std::string& name);
// The row of `name`; throws Error("unknown dataset 'X'; valid: ...") when there is none.
const DatasetInfo& dataset(const std::string& name);

}  // namespace vitsim
