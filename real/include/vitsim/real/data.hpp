#pragma once
// Datasets for the real trainer, without Torch: readers (gzipped IDX, CIFAR binary, ImageFolder JPEG/PNG,
// synthetic), the per-sample transform (resize, random crop + flip, normalisation), a distributed
// sampler and a prefetching loader whose worker threads hand out float batches in order.
//
// Randomness is keyed on (seed, epoch, sample index), never on the rank or the worker, so a sample is
// augmented the same way whatever the number of ranks, workers or a resume point: 2 ranks with
// micro-batch b see exactly the images 1 rank with batch 2b sees.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "vitsim/core/formats/scenario.hpp"

namespace vitsim::real {

// One decoded image, uint8, channel-major (CHW).
struct Image {
  int channels = 0, height = 0, width = 0;
  std::vector<uint8_t> pixels;
};

// A labelled image collection. get() is called from several loader threads at once.
class Source {
 public:
  virtual ~Source() = default;
  virtual size_t size() const = 0;
  virtual int classes() const = 0;
  virtual int channels() const = 0;
  virtual void get(size_t index, Image& image, int& label) const = 0;
  virtual std::string describe() const = 0;
  // The classes by name, in label order, where the set names them (ImageFolder: its sorted sub-folders);
  // empty where labels are only numbers.
  virtual std::vector<std::string> class_names() const { return {}; }
};

// A training and a test split must label the same classes the same way: ImageFolder's labels are the
// positions of the sorted class folders, so a class missing from one split shifts every label after it.
// Throws Error listing the classes found in only one of them.
void check_same_classes(const Source& train, const Source& test);

// An in-memory set: IDX, CIFAR and tests. All images share one shape.
class MemorySource : public Source {
 public:
  MemorySource(std::string what, int channels, int height, int width, int classes,
               std::vector<uint8_t> pixels, std::vector<int32_t> labels);
  size_t size() const override { return labels_.size(); }
  int classes() const override { return classes_; }
  int channels() const override { return channels_; }
  int height() const { return height_; }
  int width() const { return width_; }
  const std::vector<uint8_t>& pixels() const { return pixels_; }
  const std::vector<int32_t>& labels() const { return labels_; }
  void get(size_t index, Image& image, int& label) const override;
  std::string describe() const override { return what_; }

 private:
  std::string what_;
  int channels_, height_, width_, classes_;
  std::vector<uint8_t> pixels_;
  std::vector<int32_t> labels_;
};

// IDX files (LeCun's MNIST format, also Fashion-MNIST), gzipped or not. Errors name the file and
// what is wrong (bad magic, truncated, label out of range, counts that differ).
MemorySource read_idx(const std::string& images_path, const std::string& labels_path, int classes);
// CIFAR binary batches: records of label byte(s) + 3072 pixel bytes (1024 R, 1024 G, 1024 B).
// label_bytes 1 (CIFAR-10: the label) or 2 (CIFAR-100: coarse then fine; the fine label is used).
MemorySource read_cifar(const std::vector<std::string>& files, int label_bytes, int classes);
// Writers used by the tests (and by anyone preparing a subset): the exact formats the readers take.
void write_idx(const std::string& images_path, const std::string& labels_path, const MemorySource& set,
               bool gzip);
void write_cifar(const std::string& path, const MemorySource& set, int label_bytes);

// Decodes one JPEG or PNG file (by its signature) into CHW uint8 with `channels` (1 or 3) channels.
Image decode_image_file(const std::string& path, int channels);

// Normalisation constants per dataset (mean, std per channel, in [0,1] pixel units).
struct Normalization {
  std::vector<float> mean, stddev;
};

// What a split of the scenario's dataset is, opened from disk (or generated).
struct DatasetSplit {
  std::unique_ptr<Source> source;
  Normalization norm;
};
// split: "train" or "test". Throws Error naming the dataset, path and the file that failed.
DatasetSplit open_dataset(const DatasetSpec& spec, const ViTConfig& model, const std::string& split);

// Per-sample transform into the model's input: resize to image_size (bilinear), then when augmenting a
// random crop with padding image_size/8 (zero fill) and a horizontal flip with probability 1/2, then
// (x/255 - mean) / std.
struct Transform {
  int image_size = 0;
  bool augment = false;
  Normalization norm;
  uint64_t seed = 0;
  // Writes channels*image_size^2 floats to out.
  void apply(const Image& in, int epoch, size_t sample_index, float* out) const;
};

// Distributed sampler: a permutation of [0, n) per epoch from (seed, epoch), dealt round-robin to the
// ranks: rank r gets perm[r], perm[r + world], ... Training drops the tail so every rank gets
// floor(n / world) samples (the same number of steps everywhere); evaluation keeps every sample.
std::vector<size_t> shard_indices(size_t n, int rank, int world, uint64_t seed, int epoch, bool shuffle,
                                  bool drop_tail);
// The training sampler: torch.utils.data.DistributedSampler(shuffle=True, drop_last=False). The epoch's
// permutation is padded with its first samples to a multiple of the ranks, so every rank gets
// ceil(n / world) samples (core/model/epoch.hpp: the steps of an epoch, the same rule as the simulator).
std::vector<size_t> padded_shard(size_t n, int rank, int world, uint64_t seed, int epoch);

struct Batch {
  long long number = 0;  // position of the batch in the epoch
  int size = 0;
  int channels = 0, image_size = 0;
  std::vector<float> images;  // size * channels * image_size^2
  std::vector<int64_t> labels;
};

// Loads the batches of one epoch in order. With workers > 0 each worker thread owns batches
// k = w, w + workers, ... and keeps up to `prefetch` of them ready; next() returns them in order.
// A worker's exception is rethrown by next().
class Loader {
 public:
  Loader(const Source& source, Transform transform, std::vector<size_t> indices, int batch_size, int epoch,
         long long first_batch, int workers, int prefetch);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;
  long long batches() const { return batches_; }
  std::optional<Batch> next();

 private:
  struct Lane {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Batch> ready;
    std::exception_ptr error;
  };
  Batch load(long long number) const;
  void work(int lane);

  const Source& source_;
  Transform transform_;
  std::vector<size_t> indices_;
  int batch_size_, epoch_;
  long long batches_, first_, next_;
  int prefetch_;
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<std::thread> threads_;
};

}  // namespace vitsim::real
