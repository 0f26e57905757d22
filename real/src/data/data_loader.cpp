// The loader stage of the data path (vitsim/real/data.hpp): each sample's transform (resize, augmentation,
// normalisation), the epoch's order and each rank's shard, and the Loader's worker threads.
#include <algorithm>
#include <cstdint>

#include "data/data_random.hpp"
#include "vitsim/real/data.hpp"

namespace vitsim::real {
using data_random::key;
using data_random::mix;

void Transform::apply(const Image& in, int epoch, size_t sample_index, float* out) const {
  const int S = image_size, C = in.channels;
  // Bilinear resize (align_corners=false, as torch's interpolate) when the stored size differs.
  std::vector<float> img(size_t(C) * S * S);
  if (in.height == S && in.width == S) {
    for (size_t i = 0; i < img.size(); ++i) img[i] = in.pixels[i];
  } else {
    const float sy = float(in.height) / S, sx = float(in.width) / S;
    for (int y = 0; y < S; ++y) {
      float fy = std::max(0.f, (y + 0.5f) * sy - 0.5f);
      int y0 = std::min(int(fy), in.height - 1), y1 = std::min(y0 + 1, in.height - 1);
      float wy = fy - y0;
      for (int x = 0; x < S; ++x) {
        float fx = std::max(0.f, (x + 0.5f) * sx - 0.5f);
        int x0 = std::min(int(fx), in.width - 1), x1 = std::min(x0 + 1, in.width - 1);
        float wx = fx - x0;
        for (int c = 0; c < C; ++c) {
          const uint8_t* p = in.pixels.data() + size_t(c) * in.height * in.width;
          float v = (1 - wy) * ((1 - wx) * p[y0 * in.width + x0] + wx * p[y0 * in.width + x1]) +
                    wy * ((1 - wx) * p[y1 * in.width + x0] + wx * p[y1 * in.width + x1]);
          img[(size_t(c) * S + y) * S + x] = v;
        }
      }
    }
  }
  int dy = 0, dx = 0;
  bool flip = false;
  if (augment) {
    const int pad = std::max(1, S / 8);
    uint64_t r = key(seed, static_cast<uint64_t>(epoch), sample_index);
    dy = static_cast<int>(r % (2 * pad + 1)) - pad;
    dx = static_cast<int>((r >> 16) % (2 * pad + 1)) - pad;
    flip = (r >> 32) & 1;
  }
  for (int c = 0; c < C; ++c) {
    const float m = norm.mean[c % norm.mean.size()], s = norm.stddev[c % norm.stddev.size()];
    const float zero = (0.f - m) / s;
    for (int y = 0; y < S; ++y)
      for (int x = 0; x < S; ++x) {
        int sy = y + dy, sx = flip ? (S - 1 - x) + dx : x + dx;
        float v = (sy < 0 || sy >= S || sx < 0 || sx >= S)
                      ? zero
                      : (img[(size_t(c) * S + sy) * S + sx] / 255.f - m) / s;
        out[(size_t(c) * S + y) * S + x] = v;
      }
  }
}

namespace {
std::vector<size_t> epoch_order(size_t n, uint64_t seed, int epoch, bool shuffle) {
  std::vector<size_t> perm(n);
  for (size_t i = 0; i < n; ++i) perm[i] = i;
  if (shuffle) {
    // Fisher-Yates with our own generator: the order is the same on every platform and standard library.
    uint64_t s = key(seed, 0x5a3d1e, static_cast<uint64_t>(epoch));
    for (size_t i = n; i > 1; --i) {
      s = mix(s);
      std::swap(perm[i - 1], perm[s % i]);
    }
  }
  return perm;
}
}  // namespace

std::vector<size_t> shard_indices(size_t n, int rank, int world, uint64_t seed, int epoch, bool shuffle,
                                  bool drop_tail) {
  const std::vector<size_t> perm = epoch_order(n, seed, epoch, shuffle);
  const size_t per_rank = drop_tail ? n / world : (n + world - 1 - rank) / world;
  std::vector<size_t> out;
  out.reserve(per_rank);
  for (size_t k = 0; k < per_rank; ++k) out.push_back(perm[rank + k * world]);
  return out;
}

std::vector<size_t> padded_shard(size_t n, int rank, int world, uint64_t seed, int epoch) {
  if (n == 0) return {};
  const std::vector<size_t> perm = epoch_order(n, seed, epoch, true);
  const size_t per_rank = (n + world - 1) / world;
  std::vector<size_t> out;
  out.reserve(per_rank);
  // DistributedSampler: indices += indices[:padding]; rank r takes indices[r::world].
  for (size_t k = 0; k < per_rank; ++k) out.push_back(perm[(rank + k * world) % n]);
  return out;
}

Loader::Loader(const Source& source, Transform transform, std::vector<size_t> indices, int batch_size,
               int epoch, long long first_batch, int workers, int prefetch)
    : source_(source),
      transform_(std::move(transform)),
      indices_(std::move(indices)),
      batch_size_(batch_size),
      epoch_(epoch),
      first_(first_batch),
      next_(first_batch),
      prefetch_(std::max(1, prefetch)) {
  batches_ = static_cast<long long>(indices_.size() / batch_size_);
  if (indices_.size() % batch_size_ != 0 && batch_size_ > 0) {
    // Evaluation keeps a last partial batch; training passes whole multiples.
    batches_ += 1;
  }
  for (int w = 0; w < workers; ++w) lanes_.push_back(std::make_unique<Lane>());
  for (int w = 0; w < workers; ++w) threads_.emplace_back([this, w] { work(w); });
}

Loader::~Loader() {
  for (auto& l : lanes_) {
    std::lock_guard<std::mutex> g(l->mu);
    stop_ = true;
  }
  for (auto& l : lanes_) l->cv.notify_all();
  for (auto& t : threads_) t.join();
}

Batch Loader::load(long long number) const {
  Batch b;
  b.number = number;
  const size_t begin = static_cast<size_t>(number) * batch_size_;
  const size_t end = std::min(indices_.size(), begin + batch_size_);
  b.size = static_cast<int>(end - begin);
  b.channels = source_.channels();
  b.image_size = transform_.image_size;
  const size_t per = size_t(b.channels) * b.image_size * b.image_size;
  b.images.resize(per * b.size);
  b.labels.resize(b.size);
  Image img;
  for (size_t i = begin; i < end; ++i) {
    int label = 0;
    source_.get(indices_[i], img, label);
    transform_.apply(img, epoch_, indices_[i], b.images.data() + (i - begin) * per);
    b.labels[i - begin] = label;
  }
  return b;
}

void Loader::work(int lane_id) {
  Lane& lane = *lanes_[lane_id];
  const int workers = static_cast<int>(lanes_.size());
  // This worker's first batch at or after next_.
  long long k = first_ + ((lane_id - first_ % workers) % workers + workers) % workers;
  for (; k < batches_; k += workers) {
    {
      std::unique_lock<std::mutex> g(lane.mu);
      lane.cv.wait(g, [&] { return stop_ || static_cast<int>(lane.ready.size()) < prefetch_; });
      if (stop_) return;
    }
    try {
      Batch b = load(k);
      std::lock_guard<std::mutex> g(lane.mu);
      lane.ready.push_back(std::move(b));
    } catch (...) {
      std::lock_guard<std::mutex> g(lane.mu);
      lane.error = std::current_exception();
      lane.cv.notify_all();
      return;
    }
    lane.cv.notify_all();
  }
}

std::optional<Batch> Loader::next() {
  if (next_ >= batches_) return std::nullopt;
  if (lanes_.empty()) return load(next_++);
  Lane& lane = *lanes_[next_ % lanes_.size()];
  std::unique_lock<std::mutex> g(lane.mu);
  lane.cv.wait(g, [&] { return !lane.ready.empty() || lane.error; });
  if (lane.ready.empty()) std::rethrow_exception(lane.error);
  Batch b = std::move(lane.ready.front());
  lane.ready.pop_front();
  g.unlock();
  lane.cv.notify_all();
  ++next_;
  return b;
}

}  // namespace vitsim::real