#include "vitsim/real/data.hpp"
// The datasets (vitsim/real/data.hpp): in-memory and on-demand sources, the reader each row of core's
// dataset table names (open_reader: IDX in data_idx.cpp, CIFAR in data_cifar.cpp, ImageFolder over
// data_image.cpp's decoders, synthetic), the split opened against the model, and the class check of an
// ImageFolder pair. The loader stage (transform, shards, Loader) is data_loader.cpp.

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iterator>

#include "data/data_random.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/model/dataset.hpp"

namespace vitsim::real {
namespace fs = std::filesystem;
using data_random::key;
using data_random::mix;

MemorySource::MemorySource(std::string what, int channels, int height, int width, int classes,
                           std::vector<uint8_t> pixels, std::vector<int32_t> labels)
    : what_(std::move(what)),
      channels_(channels),
      height_(height),
      width_(width),
      classes_(classes),
      pixels_(std::move(pixels)),
      labels_(std::move(labels)) {
  if (pixels_.size() != labels_.size() * channels_ * height_ * width_)
    throw Error(fmt::format("{}: {} pixel bytes for {} images of {}x{}x{}", what_, pixels_.size(),
                            labels_.size(), channels_, height_, width_));
}

void MemorySource::get(size_t index, Image& image, int& label) const {
  const size_t n = static_cast<size_t>(channels_) * height_ * width_;
  image.channels = channels_;
  image.height = height_;
  image.width = width_;
  image.pixels.assign(pixels_.begin() + index * n, pixels_.begin() + (index + 1) * n);
  label = labels_[index];
}

namespace {

// ImageFolder: root/<class>/<image>, classes in sorted order, decoded on demand by the loader threads.
class FolderSource : public Source {
 public:
  FolderSource(const std::string& root, int channels) : root_(root), channels_(channels) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) throw Error(fmt::format("{}: not a directory (ImageFolder root)", root));
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(root))
      if (e.is_directory()) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (size_t c = 0; c < dirs.size(); ++c) {
      std::vector<std::string> imgs;
      for (const auto& e : fs::directory_iterator(dirs[c])) {
        std::string ext = e.path().extension().string();
        std::transform(ext.begin(), ext.end(), ext.begin(),
                       [](unsigned char ch) { return std::tolower(ch); });
        if (e.is_regular_file() && (ext == ".jpg" || ext == ".jpeg" || ext == ".png"))
          imgs.push_back(e.path().string());
      }
      std::sort(imgs.begin(), imgs.end());
      for (auto& p : imgs) files_.push_back({std::move(p), static_cast<int>(c)});
    }
    classes_ = static_cast<int>(dirs.size());
    for (const auto& d : dirs) class_names_.push_back(d.filename().string());
    if (files_.empty())
      throw Error(fmt::format(
          "{}: no .jpg/.jpeg/.png files in class subfolders (ImageFolder layout: root/<class>/<image>)",
          root));
  }
  size_t size() const override { return files_.size(); }
  int classes() const override { return classes_; }
  int channels() const override { return channels_; }
  void get(size_t index, Image& image, int& label) const override {
    image = decode_image_file(files_[index].first, channels_);
    label = files_[index].second;
  }
  std::string describe() const override { return root_; }
  std::vector<std::string> class_names() const override { return class_names_; }

 private:
  std::string root_;
  int channels_, classes_ = 0;
  std::vector<std::string> class_names_;
  std::vector<std::pair<std::string, int>> files_;
};

// Synthetic: pixels and labels are a pure function of (index, seed); for benchmarks, not for learning.
class SyntheticSource : public Source {
 public:
  SyntheticSource(size_t n, int channels, int size, int classes, uint64_t seed)
      : n_(n), channels_(channels), size_(size), classes_(classes), seed_(seed) {}
  size_t size() const override { return n_; }
  int classes() const override { return classes_; }
  int channels() const override { return channels_; }
  void get(size_t index, Image& image, int& label) const override {
    image.channels = channels_;
    image.height = image.width = size_;
    image.pixels.resize(size_t(channels_) * size_ * size_);
    uint64_t s = key(seed_, index, 0x5f);
    for (size_t i = 0; i < image.pixels.size(); i += 8) {
      s = mix(s);
      for (size_t k = 0; k < 8 && i + k < image.pixels.size(); ++k)
        image.pixels[i + k] = static_cast<uint8_t>(s >> (8 * k));
    }
    label = static_cast<int>(key(seed_, index, 0x1ab) % static_cast<uint64_t>(classes_));
  }
  std::string describe() const override { return "synthetic"; }

 private:
  size_t n_;
  int channels_, size_, classes_;
  uint64_t seed_;
};

std::string need_file(const std::string& dir, const std::string& name, const std::string& dataset) {
  fs::path p = fs::path(dir) / name;
  std::error_code ec;
  if (!fs::exists(p, ec))
    throw Error(fmt::format("dataset {}: {} does not exist (dataset.path = '{}')", dataset, p.string(), dir));
  return p.string();
}

// The reader the dataset's row (core/model/dataset.hpp) names, over the split's files under `dir`.
std::unique_ptr<Source> open_reader(const DatasetInfo& info, const DatasetSpec& spec, const ViTConfig& model,
                                    const std::string& dir, bool train) {
  std::vector<std::string> files;
  if (info.reader != DatasetReader::Synthetic)
    for (const auto& f : train ? info.train_files : info.test_files)
      files.push_back(need_file(dir, f, spec.name));  // in order: the first missing one is named
  switch (info.reader) {
    case DatasetReader::Idx:
      return std::make_unique<MemorySource>(read_idx(files.at(0), files.at(1), info.facts->classes));
    case DatasetReader::CifarBinary:
      return std::make_unique<MemorySource>(read_cifar(files, info.label_bytes, info.facts->classes));
    case DatasetReader::ImageFolder:
      return std::make_unique<FolderSource>(files.at(0), model.channels);
    case DatasetReader::Synthetic: {
      const long long n = train ? spec.train_samples : (spec.test_samples > 0 ? spec.test_samples : 0);
      return std::make_unique<SyntheticSource>(static_cast<size_t>(n), model.channels, spec.image_size,
                                               model.classes, train ? 1 : 2);
    }
  }
  throw Error(fmt::format("dataset {}: no reader", spec.name));
}

}  // namespace

DatasetSplit open_dataset(const DatasetSpec& spec, const ViTConfig& model, const std::string& split) {
  const bool train = split == "train";
  const DatasetInfo& info = dataset(spec.name);  // unknown: "unknown dataset 'X'; valid: ..."
  DatasetSplit out;
  auto [mean, stddev] = info.normalization(model.channels);
  out.norm = {std::move(mean), std::move(stddev)};
  std::string dir = spec.path.empty() ? info.default_path : spec.path;
  if (dir.empty() && info.reader != DatasetReader::Synthetic)
    throw Error(fmt::format("dataset {} needs dataset.path: {}", spec.name, info.path_help));
  out.source = open_reader(info, spec, model, dir, train);
  if (out.source->channels() != model.channels)
    throw Error(fmt::format("dataset {}: {} channels but the model takes {}", spec.name,
                            out.source->channels(), model.channels));
  if (out.source->classes() > model.classes)
    throw Error(fmt::format("dataset {} ({}): {} classes but the model's head has {}", spec.name,
                            out.source->describe(), out.source->classes(), model.classes));
  return out;
}

void check_same_classes(const Source& train, const Source& test) {
  const auto a = train.class_names(), b = test.class_names();
  if (a == b) return;
  std::vector<std::string> only_train, only_test;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(only_train));
  std::set_difference(b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(only_test));
  auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (size_t i = 0; i < v.size() && i < 8; ++i) out += (i ? ", " : "") + v[i];
    if (v.size() > 8) out += fmt::format(" and {} more", v.size() - 8);
    return v.empty() ? std::string("none") : out;
  };
  throw Error(
      fmt::format("{} and {} have different classes (labels are the sorted class folders, so they would not "
                  "match): only in {}: {}; only in {}: {}",
                  train.describe(), test.describe(), train.describe(), list(only_train), test.describe(),
                  list(only_test)));
}

}  // namespace vitsim::real
