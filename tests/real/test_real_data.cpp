// Readers, transform, sampler and loader of the real trainer (no Torch, no MPI).
#include <sched.h>
#include <sys/stat.h>
#include <zlib.h>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <thread>

#include "image_files.hpp"
#include "test_util.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/model/dataset.hpp"
#include "vitsim/real/data.hpp"
#include "vitsim/real/train.hpp"

using namespace vitsim;
using namespace vitsim::real;

namespace {

// A small labelled set with pixel values that differ everywhere (index-dependent pattern).
MemorySource pattern_set(int n, int c, int h, int w, int classes) {
  std::vector<uint8_t> px(size_t(n) * c * h * w);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 37 + i / 7) % 256);
  std::vector<int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = (i * 3) % classes;
  return MemorySource("pattern", c, h, w, classes, px, labels);
}

void truncate_file(const std::string& path, size_t keep) {
  std::filesystem::resize_file(path, keep);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("IDX files written by the test read back exactly, gzipped or not", "[real][data]") {
  vt::TempDir dir;
  auto set = pattern_set(13, 1, 28, 28, 10);
  for (bool gz : {true, false}) {
    std::string img = dir / (gz ? "i.gz" : "i.idx"), lab = dir / (gz ? "l.gz" : "l.idx");
    write_idx(img, lab, set, gz);
    auto back = read_idx(img, lab, 10);
    CHECK(back.size() == 13);
    CHECK(back.height() == 28);
    CHECK(back.width() == 28);
    CHECK(back.pixels() == set.pixels());
    CHECK(back.labels() == set.labels());
  }
}

TEST_CASE("gzip: bytes after the last member are refused with their offset, more members are read",
          "[real][data][negative]") {
  // A gzip file is members (RFC 1952 2.2) and nothing else; zlib's gzread ignores what follows the
  // last member, so an appended or damaged tail went unseen. The offset is the clean file's size.
  vt::TempDir dir;
  auto set = pattern_set(5, 1, 28, 28, 10);
  const std::string img = dir / "i.gz", lab = dir / "l.gz";
  auto append = [](const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::app) << bytes;
  };
  for (const std::string& junk :
       {std::string("JUNK!"), std::string(1, '\0'), std::string(70000, 'x'), std::string("\x1f")}) {
    INFO(junk.size() << " bytes of junk");
    write_idx(img, lab, set, true);
    const auto clean = std::filesystem::file_size(img);
    append(img, junk);
    CHECK(error_of([&] { read_idx(img, lab, 10); }) ==
          fmt::format("{}: {} bytes of trailing data after the gzip stream, from byte offset {} (not a gzip "
                      "member: a damaged or appended file)",
                      img, junk.size(), clean));
    // The labels file the same way: every gzip reader of the trainer goes through the check.
    write_idx(img, lab, set, true);
    append(lab, junk);
    CHECK_THAT(error_of([&] { read_idx(img, lab, 10); }),
               Catch::StartsWith(lab + ": " + std::to_string(junk.size()) + " bytes of trailing data"));
  }
  // Two members (`cat a.gz b.gz`, as gzip(1) reads them): the header in one, the pixels in the other.
  const std::string plain = dir / "i.idx", plain_lab = dir / "l.idx";
  write_idx(plain, plain_lab, set, false);
  std::ifstream in(plain, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string joined;
  for (const std::string& part : {bytes.substr(0, 16), bytes.substr(16)}) {
    const std::string one = dir / "part.gz";
    gzFile g = gzopen(one.c_str(), "wb");
    gzwrite(g, part.data(), static_cast<unsigned>(part.size()));
    gzclose(g);
    std::ifstream p(one, std::ios::binary);
    joined += std::string((std::istreambuf_iterator<char>(p)), std::istreambuf_iterator<char>());
  }
  std::ofstream(img, std::ios::binary | std::ios::trunc) << joined;
  write_idx(dir / "x.gz", lab, set, true);
  CHECK(read_idx(img, lab, 10).pixels() == set.pixels());
  // A second member cut short: the same error as a first one cut short.
  std::ofstream(img, std::ios::binary | std::ios::trunc) << joined.substr(0, joined.size() - 10);
  CHECK(error_of([&] { read_idx(img, lab, 10); }) ==
        img + ": corrupt or truncated gzip data: unexpected end of file");
}

TEST_CASE("A truncated or corrupt IDX file is a clear error", "[real][data][negative]") {
  vt::TempDir dir;
  auto set = pattern_set(5, 1, 28, 28, 10);
  std::string img = dir / "i.idx", lab = dir / "l.idx";
  write_idx(img, lab, set, false);
  // 16-byte header + 5 images of 784 bytes = 3936 bytes; keep 3000 of them.
  truncate_file(img, 3000);
  CHECK(error_of([&] { read_idx(img, lab, 10); }) ==
        img + ": truncated or oversized: 3000 bytes, expected 3936 (16 header + 5 images of 28x28)");
  truncate_file(img, 10);
  CHECK(error_of([&] { read_idx(img, lab, 10); }) ==
        img + ": truncated IDX header: 10 bytes, expected at least 16");
  // A gzip stream cut in the middle: zlib reports the early end of the stream.
  std::string gimg = dir / "i.gz", glab = dir / "l.gz";
  write_idx(gimg, glab, set, true);
  truncate_file(gimg, std::filesystem::file_size(gimg) / 2);
  CHECK_THAT(error_of([&] { read_idx(gimg, glab, 10); }),
             Catch::StartsWith(gimg + ": corrupt or truncated gzip data: "));
  // The labels file given as the images: wrong magic.
  write_idx(img, lab, set, false);
  CHECK(error_of([&] { read_idx(lab, lab, 10); }) ==
        lab + ": not an IDX image file: magic 0x00000801, expected 0x00000803 (ubyte, 3 dims)");
  // A label beyond the classes: label of sample 4 is (4*3)%10 = 2; with 2 classes it is out of range.
  CHECK(error_of([&] { read_idx(img, lab, 2); }) ==
        lab + ": label 3 of sample 1 is out of range (expected 0 .. 1)");
}

TEST_CASE("The installed Fashion-MNIST reads as 60,000 + 10,000 28x28 images", "[real][data]") {
  // Debian's dataset-fashion-mnist (docs/sources.md "Datasets"); skip where it is not installed.
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz")) return;
  auto train = read_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz", 10);
  auto test = read_idx(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz", 10);
  CHECK(train.size() == 60000);
  CHECK(test.size() == 10000);
  CHECK(train.height() == 28);
  // Fashion-MNIST is balanced: 6,000 training images per class.
  std::vector<int> count(10, 0);
  for (int l : train.labels()) ++count[l];
  for (int c : count) CHECK(c == 6000);
}

TEST_CASE("CIFAR-10 and CIFAR-100 binary files written by the test read back exactly", "[real][data]") {
  vt::TempDir dir;
  auto set10 = pattern_set(7, 3, 32, 32, 10);
  write_cifar(dir / "data_batch_1.bin", set10, 1);
  auto back10 = read_cifar({dir / "data_batch_1.bin"}, 1, 10);
  CHECK(back10.pixels() == set10.pixels());
  CHECK(back10.labels() == set10.labels());
  auto set100 = pattern_set(9, 3, 32, 32, 100);
  write_cifar(dir / "train.bin", set100, 2);
  auto back100 = read_cifar({dir / "train.bin"}, 2, 100);
  CHECK(back100.pixels() == set100.pixels());
  CHECK(back100.labels() == set100.labels());
  // Two files are concatenated in order.
  auto both = read_cifar({dir / "data_batch_1.bin", dir / "data_batch_1.bin"}, 1, 10);
  CHECK(both.size() == 14);
}

TEST_CASE("A truncated or corrupt CIFAR file is a clear error", "[real][data][negative]") {
  vt::TempDir dir;
  auto set = pattern_set(3, 3, 32, 32, 10);
  std::string path = dir / "data_batch_1.bin";
  write_cifar(path, set, 1);
  // 3 records of 1 + 3072 bytes = 9219 bytes; cut 100 off the last one.
  truncate_file(path, 9119);
  CHECK(error_of([&] { read_cifar({path}, 1, 10); }) ==
        path +
            ": truncated: 9119 bytes is not a whole number of 3073-byte CIFAR records (2 complete, 2973 "
            "bytes left over)");
  // A CIFAR-100 file read as CIFAR-10: fine labels up to 99 are out of range.
  auto set100 = pattern_set(40, 3, 32, 32, 100);
  std::string p100 = dir / "train.bin";
  write_cifar(p100, set100, 2);
  CHECK_THAT(error_of([&] { read_cifar({p100}, 1, 10); }),
             Catch::Contains("is not a whole number of 3073-byte"));
  CHECK(error_of([&] { read_cifar({dir / "missing.bin"}, 1, 10); }) ==
        (dir / "missing.bin") + ": cannot open: No such file or directory");
}

TEST_CASE("PNG files decode exactly and corrupt or unknown files are clear errors", "[real][data]") {
  vt::TempDir dir;
  const int w = 5, h = 4;
  std::vector<uint8_t> rgb(w * h * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 11);
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = w;
  png.height = h;
  png.format = PNG_FORMAT_RGB;
  std::string path = dir / "a.png";
  REQUIRE(png_image_write_to_file(&png, path.c_str(), 0, rgb.data(), 0, nullptr));
  Image img = decode_image_file(path, 3);
  REQUIRE(img.channels == 3);
  REQUIRE(img.height == h);
  REQUIRE(img.width == w);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) CHECK(img.pixels[(c * h + y) * w + x] == rgb[(y * w + x) * 3 + c]);
  truncate_file(path, 40);
  CHECK_THAT(error_of([&] { decode_image_file(path, 3); }), Catch::StartsWith(path + ": corrupt PNG: "));
  std::string junk = dir.file("junk.jpg", "not an image");
  CHECK(error_of([&] { decode_image_file(junk, 3); }) ==
        junk + ": neither a JPEG nor a PNG file (unknown signature)");
}

TEST_CASE("JPEG files decode to their size and about their values and a truncated one is an error",
          "[real][data]") {
  vt::TempDir dir;
  const int w = 16, h = 8;
  // A flat image (value 100): JPEG keeps it within a level or two.
  std::string path = dir / "a.jpg";
  vt::write_jpeg(path, w, h, 100);
  Image img = decode_image_file(path, 3);  // grey decoded to RGB: 3 equal channels
  REQUIRE(img.channels == 3);
  CHECK(img.width == w);
  CHECK(img.height == h);
  for (uint8_t v : img.pixels) CHECK(std::abs(int(v) - 100) <= 2);
  truncate_file(path, std::filesystem::file_size(path) / 2);
  CHECK_THAT(error_of([&] { decode_image_file(path, 3); }), Catch::StartsWith(path + ": corrupt"));
}

TEST_CASE("ImageFolder: classes are the sorted sub-folders, images decode on demand", "[real][data]") {
  vt::TempDir dir;
  vt::write_png(dir / "set/train/cat/1.png", 6, 4, 10);
  vt::write_png(dir / "set/train/cat/2.PNG", 5, 5, 20);
  vt::write_png(dir / "set/train/ant/1.png", 3, 7, 30);
  dir.file("set/train/ant/readme.txt", "not an image: skipped");
  dir.file("set/train/dog/broken.png", "\x89PNG\r\n\x1a\n cut short");
  DatasetSpec spec;
  spec.name = "imagefolder";
  spec.path = dir / "set";
  ViTConfig m = vit_preset("vit_cifar_tiny");
  auto d = open_dataset(spec, m, "train");
  REQUIRE(d.source->size() == 4);
  CHECK(d.source->classes() == 3);
  Image img;
  int label = -1;
  d.source->get(0, img, label);  // ant/1.png
  CHECK(label == 0);
  CHECK(img.width == 3);
  CHECK(img.height == 7);
  CHECK(img.pixels[0] == 30);
  d.source->get(2, img, label);  // cat/2.PNG
  CHECK(label == 1);
  CHECK(img.pixels[0] == 20);
  CHECK_THROWS_WITH(d.source->get(3, img, label), Catch::StartsWith(dir / "set/train/dog/broken.png"));
  // Through the transform, every image comes out at the model's size.
  Transform t{m.image_size, true, d.norm, 1};
  std::vector<float> out(size_t(3) * m.image_size * m.image_size);
  d.source->get(1, img, label);
  t.apply(img, 0, 1, out.data());
  spec.path = dir / "nothing";
  CHECK_THROWS_WITH(open_dataset(spec, m, "train"), "dataset imagefolder: " + (dir / "nothing/train") +
                                                        " does not exist (dataset.path = '" +
                                                        (dir / "nothing") + "')");
}

TEST_CASE("Sampler: shards are disjoint, cover the epoch and reshuffle per epoch", "[real][data]") {
  const size_t n = 103;
  auto r0 = shard_indices(n, 0, 2, 7, 0, true, true);
  auto r1 = shard_indices(n, 1, 2, 7, 0, true, true);
  CHECK(r0.size() == 51);  // floor(103 / 2): the tail is dropped so both ranks take the same steps
  CHECK(r1.size() == 51);
  std::set<size_t> all(r0.begin(), r0.end());
  all.insert(r1.begin(), r1.end());
  CHECK(all.size() == 102);
  CHECK(shard_indices(n, 0, 2, 7, 0, true, true) == r0);  // deterministic
  CHECK(shard_indices(n, 0, 2, 7, 1, true, true) != r0);  // another epoch, another order
  // What data-parallel equivalence relies on: 1 rank's batch k of 2b samples is the union of the two
  // ranks' batch k of b samples.
  auto one = shard_indices(n, 0, 1, 7, 0, true, true);
  const size_t b = 8;
  for (size_t k = 0; k < 3; ++k) {
    std::set<size_t> single(one.begin() + 2 * b * k, one.begin() + 2 * b * (k + 1));
    std::set<size_t> pair(r0.begin() + b * k, r0.begin() + b * (k + 1));
    pair.insert(r1.begin() + b * k, r1.begin() + b * (k + 1));
    CHECK(single == pair);
  }
  // Evaluation keeps every sample: 52 + 51.
  CHECK(shard_indices(n, 0, 2, 0, 0, false, false).size() == 52);
  CHECK(shard_indices(n, 1, 2, 0, 0, false, false).size() == 51);
}

TEST_CASE("Transform: normalisation, resize and augmentation keyed on the sample", "[real][data]") {
  Image img{1, 4, 4, std::vector<uint8_t>(16, 51)};  // 51/255 = 0.2
  Transform t{4, false, {{0.1f}, {0.5f}}, 3};
  std::vector<float> out(16);
  t.apply(img, 0, 0, out.data());
  for (float v : out) CHECK(v == Approx((0.2 - 0.1) / 0.5));
  // Resizing a constant image keeps it constant.
  Transform up{8, false, {{0.f}, {1.f}}, 3};
  std::vector<float> big(64);
  up.apply(img, 0, 0, big.data());
  for (float v : big) CHECK(v == Approx(0.2));
  // Augmentation depends on (seed, epoch, sample) only.
  Image ramp{1, 8, 8, {}};
  for (int i = 0; i < 64; ++i) ramp.pixels.push_back(static_cast<uint8_t>(i * 4));
  Transform aug{8, true, {{0.f}, {1.f}}, 3};
  std::vector<float> a(64), b(64), c(64);
  aug.apply(ramp, 2, 17, a.data());
  aug.apply(ramp, 2, 17, b.data());
  CHECK(a == b);
  bool differs = false;
  for (size_t s = 0; s < 20 && !differs; ++s) {
    aug.apply(ramp, 2, 100 + s, c.data());
    differs = c != a;
  }
  CHECK(differs);
}

TEST_CASE("Loader: workers hand out the same batches, in order, as loading inline", "[real][data]") {
  auto set = pattern_set(50, 1, 8, 8, 10);
  Transform t{8, true, {{0.5f}, {0.5f}}, 9};
  std::vector<size_t> idx(48);
  std::iota(idx.begin(), idx.end(), 0);
  std::reverse(idx.begin(), idx.end());
  Loader inline_loader(set, t, idx, 5, 1, 2, 0, 2);  // from batch 2 on, like a resume
  Loader threaded(set, t, idx, 5, 1, 2, 3, 2);
  int count = 0;
  while (auto a = inline_loader.next()) {
    auto b = threaded.next();
    REQUIRE(b);
    CHECK(a->number == b->number);
    CHECK(a->images == b->images);
    CHECK(a->labels == b->labels);
    ++count;
  }
  CHECK(!threaded.next());
  CHECK(count == 8);  // batches 2..9 of ceil(48 / 5) = 10
}

namespace {
struct FailingSource : Source {
  size_t size() const override { return 10; }
  int classes() const override { return 2; }
  int channels() const override { return 1; }
  void get(size_t index, Image& img, int& label) const override {
    if (index == 7) throw Error("broken.jpg: corrupt JPEG: test");
    img = Image{1, 2, 2, {0, 0, 0, 0}};
    label = 0;
  }
  std::string describe() const override { return "failing"; }
};
}  // namespace

TEST_CASE("Loader: a worker's error reaches the training thread", "[real][data][negative]") {
  FailingSource src;
  Transform t{2, false, {{0.f}, {1.f}}, 0};
  std::vector<size_t> idx(10);
  std::iota(idx.begin(), idx.end(), 0);
  Loader loader(src, t, idx, 2, 0, 0, 2, 2);
  CHECK(loader.next());
  CHECK(loader.next());
  CHECK(loader.next());
  CHECK_THROWS_WITH(loader.next(), "broken.jpg: corrupt JPEG: test");  // batch 3 holds sample 7
}

TEST_CASE("Datasets are opened by name and unknown names or missing files are clear errors",
          "[real][data][negative]") {
  ViTConfig m = vit_preset("vit_cifar_tiny");
  DatasetSpec spec;
  spec.name = "cifar10";
  spec.path = "/nonexistent";
  CHECK(error_of([&] { open_dataset(spec, m, "train"); }) ==
        "dataset cifar10: /nonexistent/data_batch_1.bin does not exist (dataset.path = '/nonexistent')");
  spec.name = "mnist";
  CHECK(error_of([&] { open_dataset(spec, m, "train"); }) ==
        "unknown dataset 'mnist'; valid: " +
            vt::join(dataset_names()));  // core's table (core/model/dataset.hpp)
  spec.name = "synthetic";
  spec.train_samples = 20;
  spec.image_size = 32;
  auto d = open_dataset(spec, m, "train");
  CHECK(d.source->size() == 20);
}

TEST_CASE("Fault injection option parses KIND:STEP[:RANK]", "[real][negative]") {
  auto f = parse_fault("hang:3:1");
  CHECK(f.kind == "hang");
  CHECK(f.step == 3);
  CHECK(f.rank == 1);
  CHECK(parse_fault("kill:5").rank == -1);
  CHECK_THROWS_WITH(
      parse_fault("boom:1"),
      "--fault 'boom:1': expected KIND:STEP[:RANK] with KIND kill, hang, exit or nan, STEP >= 1, RANK >= 0");
  CHECK_THROWS_AS(parse_fault("kill:x"), Error);
}

TEST_CASE("Threads per rank stay within the CPUs the rank may run on", "[real][threads]") {
  // mpirun binds a rank to one core when it starts two or fewer: simulated here by narrowing this
  // process's own affinity to one CPU (restored at the end).
  cpu_set_t saved;
  REQUIRE(sched_getaffinity(0, sizeof saved, &saved) == 0);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int allowed = CPU_COUNT(&saved);
  auto wide = real::plan_threads(0, 1);
  CHECK(wide.share == cores);
  CHECK(wide.threads == std::min(cores, allowed));
  CHECK(real::plan_threads(3, 1).threads == 3);  // an explicit run.threads is taken as given
  CHECK(real::plan_threads(0, cores).threads == 1);
  int first = 0;
  while (!CPU_ISSET(first, &saved)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  auto bound = real::plan_threads(0, 1);
  auto forced = real::plan_threads(2, 1);
  REQUIRE(sched_setaffinity(0, sizeof saved, &saved) == 0);
  CHECK(bound.allowed_cpus == 1);
  CHECK(bound.threads == 1);
  if (cores > 1) CHECK_THAT(bound.warning, Catch::Contains("--bind-to none"));
  CHECK(forced.threads == 2);
  CHECK_THAT(forced.warning, Catch::Contains("2 intra-op threads but this process may run on 1 CPU(s) only"));
}

TEST_CASE("JPEG and PNG variants decode to the right values: CMYK, progressive, 16-bit, grey",
          "[real][data]") {
  vt::TempDir dir;
  struct Case {
    const char* what;
    std::function<void(const std::string&)> write;
    std::vector<int> rgb;  // expected value per channel when decoded to 3 channels
    int tolerance;         // JPEG's loss on a flat image: a level or two; PNG exact
  };
  // CMYK as libjpeg writes it (Adobe marker, inverted: 255 = no ink). (255, 255, 255, 255): no ink at
  // all, white; (255, 0, 255, 255): full magenta ink, (255, 0, 255); (255, 255, 255, 0): full black.
  const std::vector<Case> cases{
      {"CMYK JPEG, no ink",
       [](const std::string& p) {
         vt::write_jpeg_pixels(p, 16, 16, {255, 255, 255, 255});
       },
       {255, 255, 255},
       2},
      {"CMYK JPEG, magenta",
       [](const std::string& p) {
         vt::write_jpeg_pixels(p, 16, 16, {255, 0, 255, 255});
       },
       {255, 0, 255},
       3},
      {"CMYK JPEG, black",
       [](const std::string& p) {
         vt::write_jpeg_pixels(p, 16, 16, {255, 255, 255, 0});
       },
       {0, 0, 0},
       2},
      {"progressive RGB JPEG",
       [](const std::string& p) {
         vt::write_jpeg_pixels(p, 24, 16, {200, 100, 50}, true);
       },
       {200, 100, 50},
       3},
      {"progressive grey JPEG",
       [](const std::string& p) { vt::write_jpeg_pixels(p, 24, 16, {77}, true); },
       {77, 77, 77},
       2},
      {"16-bit RGB PNG",
       [](const std::string& p) { vt::write_png16(p, 7, 5, 0x8080); },
       {0x80, 0x80, 0x80},
       1},
      {"16-bit RGB PNG, white",
       [](const std::string& p) { vt::write_png16(p, 7, 5, 0xffff); },
       {255, 255, 255},
       0},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    const std::string path = dir / "img";
    c.write(path);
    Image img = decode_image_file(path, 3);
    REQUIRE(img.channels == 3);
    const size_t n = size_t(img.height) * img.width;
    for (int ch = 0; ch < 3; ++ch)
      for (size_t i = 0; i < n; ++i) CHECK(std::abs(int(img.pixels[ch * n + i]) - c.rgb[ch]) <= c.tolerance);
    // Decoded to one channel: ITU-R 601 luma of the same colour (libjpeg's and the CMYK path's rule).
    Image grey = decode_image_file(path, 1);
    REQUIRE(grey.channels == 1);
    const int luma = (299 * c.rgb[0] + 587 * c.rgb[1] + 114 * c.rgb[2] + 500) / 1000;
    for (uint8_t v : grey.pixels) CHECK(std::abs(int(v) - luma) <= c.tolerance + 1);
  }
}

TEST_CASE("Decode failures are one line naming the file", "[real][data][negative]") {
  vt::TempDir dir;
  auto one_line = [](const std::string& m) { return m.find('\n') == std::string::npos; };
  // Cut short at several points, JPEG (baseline, progressive, CMYK) and PNG (8 and 16 bit).
  const std::vector<std::pair<const char*, std::function<void(const std::string&)>>> writers{
      {"baseline JPEG",
       [](const std::string& p) {
         vt::write_jpeg_pixels(p, 64, 64, {10, 20, 30});
       }},
      {"progressive JPEG",
       [](const std::string& p) {
         vt::write_jpeg_pixels(p, 64, 64, {10, 20, 30}, true);
       }},
      {"CMYK JPEG",
       [](const std::string& p) {
         vt::write_jpeg_pixels(p, 64, 64, {1, 2, 3, 4});
       }},
      {"8-bit PNG", [](const std::string& p) { vt::write_png(p, 64, 64, 9); }},
      {"16-bit PNG", [](const std::string& p) { vt::write_png16(p, 64, 64, 999); }},
  };
  for (const auto& [what, write] : writers) {
    const std::string path = dir / "cut";
    write(path);
    const auto size = std::filesystem::file_size(path);
    for (double keep : {0.1, 0.5, 0.9}) {
      INFO(what << " cut to " << keep << " of its " << size << " bytes");
      write(path);
      truncate_file(path, static_cast<size_t>(size * keep));
      const std::string m = error_of([&] { decode_image_file(path, 3); });
      CHECK_THAT(m, Catch::StartsWith(path + ": corrupt"));
      CHECK(one_line(m));
    }
  }
  // A file that is not a regular file.
  const std::string fifo = dir / "fifo.png";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(error_of([&] { decode_image_file(fifo, 3); }) ==
        fifo + ": not a regular file (an image file must be one)");
}

TEST_CASE("Gzipped IDX files are read no further than their header states", "[real][data][negative]") {
  vt::TempDir dir;
  // An IDX file with the header of `stated` images but `bytes` of pixels, gzipped.
  auto idx = [&](const std::string& name, uint32_t magic, std::vector<uint32_t> dims, size_t bytes) {
    const std::string path = dir / name;
    gzFile f = gzopen(path.c_str(), "wb");
    std::string head;
    for (uint32_t v : std::vector<uint32_t>{magic})
      head += std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
    for (uint32_t v : dims) head += std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
    gzwrite(f, head.data(), static_cast<unsigned>(head.size()));
    std::vector<char> zeros(1 << 20, 1);
    for (size_t done = 0; done < bytes;) {
      const size_t n = std::min(zeros.size(), bytes - done);
      gzwrite(f, zeros.data(), static_cast<unsigned>(n));
      done += n;
    }
    gzclose(f);
    return path;
  };
  const std::string labels = idx("labels.gz", 0x801, {300}, 300);
  // Bombs: 300 images stated (235,200 pixel bytes), 16 MiB, 64 MiB and 256 MiB inside. The reader stops
  // one byte past the stated size (the test would take the 256 MiB in memory otherwise: not a timing).
  for (size_t mib : {16, 64, 256}) {
    INFO(mib << " MiB of pixels under a header of 300 images");
    const std::string bomb = idx("bomb.gz", 0x803, {300, 28, 28}, mib << 20);
    CHECK(error_of([&] { read_idx(bomb, labels, 10); }) ==
          bomb +
              ": larger than its header states: more than 235216 bytes decompressed, expected 235216 (16 "
              "header + "
              "300 images of 28x28); stopped reading there");
  }
  // Headers that state more than the gzip can hold (deflate: at most 1032:1).
  for (uint32_t n : {60000u, 1000000u, 4000000000u}) {
    INFO(n << " images stated in a small file");
    const std::string liar = idx("liar.gz", 0x803, {n, 28, 28}, 100);
    CHECK_THAT(
        error_of([&] { read_idx(liar, labels, 10); }),
        Catch::StartsWith(liar + ": header states " + std::to_string(16 + uint64_t(n) * 784) +
                          " bytes (16 header + " + std::to_string(n) + " images of 28x28), more than a ") &&
            Catch::EndsWith("-byte gzip file can hold (deflate expands at most 1032:1): a corrupt header"));
  }
  // One image more or fewer than stated, and labels that do not match their header.
  const std::string more = idx("more.gz", 0x803, {300, 28, 28}, 301 * 784);
  CHECK(error_of([&] { read_idx(more, labels, 10); }) ==
        more +
            ": larger than its header states: more than 235216 bytes decompressed, expected 235216 (16 "
            "header + 300 "
            "images of 28x28); stopped reading there");
  const std::string fewer = idx("fewer.gz", 0x803, {300, 28, 28}, 299 * 784);
  CHECK(error_of([&] { read_idx(fewer, labels, 10); }) ==
        fewer +
            ": truncated: decompresses to 234432 bytes, expected 235216 (16 header + 300 images of 28x28)");
  const std::string good = idx("good.gz", 0x803, {300, 28, 28}, 300 * 784);
  const std::string long_labels = idx("long-labels.gz", 0x801, {300}, 310);
  CHECK(error_of([&] { read_idx(good, long_labels, 10); }) ==
        long_labels +
            ": larger than its header states: more than 308 bytes decompressed, expected 308 (8 header + 300 "
            "labels); stopped reading there");
  CHECK(read_idx(good, labels, 10).size() == 300);
}

TEST_CASE("Training sampler: DistributedSampler's padding, every sample at least once", "[real][data]") {
  for (auto [n, world] : {std::pair<size_t, int>{103, 2}, {100, 3}, {7, 4}, {64, 2}}) {
    INFO(n << " samples over " << world << " ranks");
    std::multiset<size_t> all;
    const size_t per = (n + world - 1) / world;
    for (int r = 0; r < world; ++r) {
      auto s = padded_shard(n, r, world, 7, 1);
      CHECK(s.size() == per);
      all.insert(s.begin(), s.end());
    }
    CHECK(all.size() == per * world);
    for (size_t i = 0; i < n; ++i) CHECK(all.count(i) >= 1);
    // The padding repeats the epoch's first samples: per * world - n of them appear twice.
    size_t twice = 0;
    for (size_t i = 0; i < n; ++i) twice += all.count(i) == 2;
    CHECK(twice == per * world - n);
  }
}

TEST_CASE("ImageFolder: train and val must have the same classes", "[real][data][negative]") {
  vt::TempDir dir;
  ViTConfig m;
  m.channels = 3;
  m.classes = 10;
  DatasetSpec spec;
  spec.name = "imagefolder";
  spec.path = dir / "set";
  for (const char* c : {"ant", "bee", "cat"})
    vt::write_png(dir / fmt::format("set/train/{}/1.png", c), 4, 4, 1);
  auto check = [&](std::vector<const char*> val, const std::string& expect) {
    std::filesystem::remove_all(dir / "set/val");
    for (const char* c : val) vt::write_png(dir / fmt::format("set/val/{}/1.png", c), 4, 4, 1);
    auto train = open_dataset(spec, m, "train");
    auto test = open_dataset(spec, m, "test");
    CHECK(error_of([&] { check_same_classes(*train.source, *test.source); }) == expect);
  };
  const std::string t = dir / "set/train", v = dir / "set/val";
  const std::string head =
      t + " and " + v +
      " have different classes (labels are the sorted class folders, so they would not match): ";
  check({"ant", "bee", "cat"}, "(no error)");
  check({"ant", "cat"}, head + "only in " + t + ": bee; only in " + v + ": none");
  check({"ant", "bee", "cat", "dog"}, head + "only in " + t + ": none; only in " + v + ": dog");
  check({"ant", "bee", "cow"}, head + "only in " + t + ": cat; only in " + v + ": cow");
}
