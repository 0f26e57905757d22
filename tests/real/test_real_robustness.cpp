// Bad datasets and bad training runs, each with the one line `vitsim train` must answer. The same table
// renders the "Datasets and training runs" section of docs/robustness.md: the test fails when the
// document is out of date (VITSIM_UPDATE_DOCS=1 rewrites it). One process, no mpirun: every case fails
// before any collective.
#include <sys/stat.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <functional>
#include <sstream>

#include "image_files.hpp"
#include "test_util.hpp"
#include "vitsim/real/data.hpp"

using vitsim::real::MemorySource;

namespace {

struct BadRun {
  const char* category;
  const char* what;
  std::function<void(const vt::TempDir&)> setup;  // writes the files into the run's folder
  std::string args;                               // vitsim train arguments, run in that folder
  std::string message;                            // the whole output (one line), or its start
  bool prefix = false;                            // messages that quote a library's long text
};

// The scenario every case starts from: the tiny Fashion-MNIST ViT, one CPU rank, data in d/.
std::string scenario(const std::string& dataset = "name=\"fashion_mnist\" path=\"d\"",
                     const std::string& run = "") {
  return "<scenario>\n  <cluster platform=\"p.xml\" nodes=\"1\" gpus_per_node=\"1\"/>\n  <model "
         "preset=\"vit_fmnist_tiny\"/>\n"
         "  <dataset " +
         dataset + "/>\n  <training micro_batch=\"8\" epochs=\"1\"/>\n  <run device=\"cpu\" threads=\"1\" " +
         run + "/>\n</scenario>\n";
}

MemorySource digits(int n, int channels, int size, int classes, int bad_label = -1) {
  std::vector<uint8_t> px(size_t(n) * channels * size * size);
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(i * 13);
  std::vector<int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % classes;
  if (bad_label >= 0) labels[n - 1] = bad_label;
  return MemorySource("test", channels, size, size, std::max(classes, bad_label + 1), px, labels);
}

// Fashion-MNIST's four files in d/ (20 training, 10 test images), gzipped like Debian's.
void fmnist(const vt::TempDir& d, bool gz = true) {
  vt::fs::create_directories(d.path / "d");
  vitsim::real::write_idx(d / "d/train-images-idx3-ubyte.gz", d / "d/train-labels-idx1-ubyte.gz",
                          digits(20, 1, 28, 10), gz);
  vitsim::real::write_idx(d / "d/t10k-images-idx3-ubyte.gz", d / "d/t10k-labels-idx1-ubyte.gz",
                          digits(10, 1, 28, 10), gz);
}

void cifar10(const vt::TempDir& d, int batches = 5) {
  vt::fs::create_directories(d.path / "c");
  for (int b = 1; b <= batches; ++b)
    vitsim::real::write_cifar(d / fmt::format("c/data_batch_{}.bin", b), digits(4, 3, 32, 10), 1);
  vitsim::real::write_cifar(d / "c/test_batch.bin", digits(4, 3, 32, 10), 1);
}

// A PNG whose header claims w x h pixels: the signature, a valid IHDR chunk and an empty IDAT chunk
// (where a reader's header pass stops), a few dozen bytes in all.
void png_header_only(const std::string& path, uint32_t w, uint32_t h) {
  auto be = [](uint32_t v) { return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; };
  auto chunk = [&](const std::string& type_and_data) {
    const uint32_t crc = crc32(0, reinterpret_cast<const Bytef*>(type_and_data.data()), type_and_data.size());
    return be(uint32_t(type_and_data.size() - 4)) + type_and_data + be(crc);
  };
  vt::fs::create_directories(vt::fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary)
      << std::string("\x89PNG\r\n\x1a\n", 8)
      << chunk("IHDR" + be(w) + be(h) + std::string{8, 2, 0, 0, 0})  // 8-bit RGB
      << chunk("IDAT");
}

// A gzipped IDX file: the header (magic and dims) then `bytes` bytes of value 1, streamed through zlib.
void idx_gz(const std::string& path, uint32_t magic, const std::vector<uint32_t>& dims, size_t bytes) {
  auto be = [](uint32_t v) { return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; };
  std::string head = be(magic);
  for (uint32_t v : dims) head += be(v);
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, head.data(), static_cast<unsigned>(head.size()));
  std::vector<char> ones(1 << 20, 1);
  for (size_t done = 0; done < bytes; done += ones.size())
    gzwrite(f, ones.data(), static_cast<unsigned>(std::min(ones.size(), bytes - done)));
  gzclose(f);
}

// An ImageFolder tree in i/ with two classes of two 8x8 PNGs in train/ and val/.
void image_folder(const vt::TempDir& d) {
  for (const char* split : {"train", "val"})
    for (const char* cls : {"a", "b"})
      for (int k = 0; k < 2; ++k)
        vt::write_png(d / fmt::format("i/{}/{}/{}.png", split, cls, k), 8, 8, uint8_t(40 * k));
}
// The tiny ViT has 10 classes and 1 channel; the ImageFolder trees here have 2 classes of RGB images.
const std::string kFolderModel =
    " --set model.classes=2 --set model.channels=3 --set dataset.train_samples=5 --set "
    "training.micro_batch=1";

std::vector<BadRun> cases();

std::string render(const std::vector<BadRun>& all) {
  std::ostringstream o;
  o << "Every row is a case of `tests/real/test_real_robustness.cpp` (built with the real trainer), which "
       "checks the\n"
       "exact output and the exit status 1 and regenerates this table (`VITSIM_UPDATE_DOCS=1\n"
       "build/tests/test_real`). Runs happen in a folder holding a valid platform `p.xml`, a scenario "
       "`s.xml`\n"
       "training the tiny Fashion-MNIST ViT on one CPU rank from `d/`, and the files each case writes (IDX "
       "and\n"
       "CIFAR files by the project's writers or zlib, images by libpng and libjpeg).\n\n"
       "| # | category | bad input | command | message |\n| --- | --- | --- | --- | --- |\n";
  int i = 0;
  for (const auto& c : all)
    o << "| " << ++i << " | " << c.category << " | " << c.what << " | `vitsim " << c.args << "` | `"
      << c.message << (c.prefix ? " ...` |\n" : "` |\n");
  return o.str();
}

}  // namespace

TEST_CASE("robustness: bad datasets and runs get one clear line from vitsim train",
          "[real][robustness][negative]") {
  const auto all = cases();
  for (const auto& c : all) {
    INFO(c.category << ": " << c.what);
    vt::TempDir d;
    d.file("p.xml", vt::platform_xml(1, 2, "12GBps", "1us", {"1GBps"}, {"1Tf"}));
    d.file("s.xml", scenario());
    c.setup(d);
    auto r = vt::run("cd " + d.path.string() + " && " + VITSIM_BINARY + " " + c.args + " --quiet");
    if (std::getenv("VITSIM_SHOW_OUTPUT")) fprintf(stderr, "[%s] %s\n", c.what, r.out.c_str());
    CHECK(r.status == 1);
    if (c.prefix) {
      CHECK(r.out.rfind(c.message, 0) == 0);
    } else {
      CHECK(r.out == c.message + "\n");
    }
  }
  const std::string doc = render(all);
  CHECK(vt::doc_section(vt::source("docs/robustness.md"), "test_real_robustness", doc) == doc);
}

namespace {
std::vector<BadRun> cases() {
  const std::string T = "train s.xml";
  auto none = [](const vt::TempDir&) {};
  auto fm = [](const vt::TempDir& d) { fmnist(d); };
  return {
      // --- Fashion-MNIST / IDX ---
      {"idx", "dataset folder missing", none, T,
       "vitsim: error: dataset fashion_mnist: d/train-images-idx3-ubyte.gz does not exist (dataset.path = "
       "'d')"},
      {"idx", "gzip stream cut short",
       [](const vt::TempDir& d) {
         fmnist(d);
         vt::fs::resize_file(d / "d/train-images-idx3-ubyte.gz",
                             vt::fs::file_size(d / "d/train-images-idx3-ubyte.gz") / 2);
       },
       T,
       "vitsim: error: d/train-images-idx3-ubyte.gz: corrupt or truncated gzip data: unexpected end of file"},
      {"idx", "junk appended after the gzip stream",
       [](const vt::TempDir& d) {
         fmnist(d);
         std::ofstream(d / "d/train-images-idx3-ubyte.gz", std::ios::binary | std::ios::app) << "JUNK!";
       },
       T,
       "vitsim: error: d/train-images-idx3-ubyte.gz: 5 bytes of trailing data after the gzip stream, from "
       "byte offset ",
       true},
      {"idx", "image file cut mid-image (not gzipped)",
       [](const vt::TempDir& d) {
         fmnist(d, false);
         vt::fs::resize_file(d / "d/train-images-idx3-ubyte.gz", 16 + 28 * 28 * 19 + 100);
       },
       T,
       "vitsim: error: d/train-images-idx3-ubyte.gz: truncated or oversized: 15012 bytes, expected 15696 (16 "
       "header + 20 images of 28x28)"},
      {"idx", "labels given as the image file",
       [](const vt::TempDir& d) {
         fmnist(d);
         vt::fs::copy_file(d / "d/train-labels-idx1-ubyte.gz", d / "d/train-images-idx3-ubyte.gz",
                           vt::fs::copy_options::overwrite_existing);
       },
       T,
       "vitsim: error: d/train-images-idx3-ubyte.gz: not an IDX image file: magic 0x00000801, expected "
       "0x00000803 (ubyte, 3 dims)"},
      {"idx", "fewer labels than images",
       [](const vt::TempDir& d) {
         fmnist(d);
         MemorySource nineteen = digits(19, 1, 28, 10);
         vitsim::real::write_idx(d / "x-images", d / "d/train-labels-idx1-ubyte.gz", nineteen, true);
       },
       T,
       "vitsim: error: d/train-labels-idx1-ubyte.gz: 19 labels but d/train-images-idx3-ubyte.gz has 20 "
       "images"},
      {"idx", "a label beyond the classes",
       [](const vt::TempDir& d) {
         fmnist(d);
         vitsim::real::write_idx(d / "d/train-images-idx3-ubyte.gz", d / "d/train-labels-idx1-ubyte.gz",
                                 digits(20, 1, 28, 10, 12), true);
       },
       T,
       "vitsim: error: d/train-labels-idx1-ubyte.gz: label 12 of sample 19 is out of range (expected 0 .. "
       "9)"},
      {"idx", "empty image file",
       [](const vt::TempDir& d) {
         fmnist(d);
         d.file("d/train-images-idx3-ubyte.gz", "");
       },
       T, "vitsim: error: d/train-images-idx3-ubyte.gz: truncated IDX header: 0 bytes, expected at least 16"},
      {"idx", "a gzip bomb: 300 images stated, 256 MiB inside",
       [](const vt::TempDir& d) {
         fmnist(d);
         idx_gz(d / "d/train-images-idx3-ubyte.gz", 0x803, {300, 28, 28}, size_t(256) << 20);
       },
       T,
       "vitsim: error: d/train-images-idx3-ubyte.gz: larger than its header states: more than 235216 bytes "
       "decompressed, expected 235216 (16 header + 300 images of 28x28); stopped reading there"},
      {"idx", "a header stating 4 billion images in a small gzip",
       [](const vt::TempDir& d) {
         fmnist(d);
         idx_gz(d / "d/train-images-idx3-ubyte.gz", 0x803, {4000000000u, 28, 28}, 784);
       },
       T,
       "vitsim: error: d/train-images-idx3-ubyte.gz: header states 3136000000016 bytes (16 header + "
       "4000000000 images of 28x28), more than a ",
       true},
      {"idx", "gzipped images: 21 images under a header of 20",
       [](const vt::TempDir& d) {
         fmnist(d);
         idx_gz(d / "d/train-images-idx3-ubyte.gz", 0x803, {20, 28, 28}, 21 * 784);
       },
       T,
       "vitsim: error: d/train-images-idx3-ubyte.gz: larger than its header states: more than 15696 bytes "
       "decompressed, expected 15696 (16 header + 20 images of 28x28); stopped reading there"},
      {"idx", "gzipped images: 19 images under a header of 20",
       [](const vt::TempDir& d) {
         fmnist(d);
         idx_gz(d / "d/train-images-idx3-ubyte.gz", 0x803, {20, 28, 28}, 19 * 784);
       },
       T,
       "vitsim: error: d/train-images-idx3-ubyte.gz: truncated: decompresses to 14912 bytes, expected 15696 "
       "(16 header + 20 images of 28x28)"},
      {"idx", "gzipped labels: 1 MiB under a header of 20",
       [](const vt::TempDir& d) {
         fmnist(d);
         idx_gz(d / "d/train-labels-idx1-ubyte.gz", 0x801, {20}, 1 << 20);
       },
       T,
       "vitsim: error: d/train-labels-idx1-ubyte.gz: larger than its header states: more than 28 bytes "
       "decompressed, expected 28 (8 header + 20 labels); stopped reading there"},
      {"idx", "a FIFO as the image file",
       [](const vt::TempDir& d) {
         fmnist(d);
         vt::fs::remove(d / "d/train-images-idx3-ubyte.gz");
         mkfifo((d / "d/train-images-idx3-ubyte.gz").c_str(), 0600);
       },
       T, "vitsim: error: d/train-images-idx3-ubyte.gz: not a regular file (a dataset file must be one)"},
      {"idx", "a 1-channel set for a 3-channel model", fm, T + " --set model.channels=3",
       "vitsim: error: s.xml:4: dataset.name: dataset has 1 channels but the model takes 3"},
      {"idx", "a 10-class set for a 5-class head", fm, T + " --set model.classes=5",
       "vitsim: error: dataset fashion_mnist (d/train-images-idx3-ubyte.gz): 10 classes but the model's head "
       "has 5"},
      // --- CIFAR ---
      {"cifar", "a training batch missing", [](const vt::TempDir& d) { cifar10(d, 4); },
       T + " --set dataset.name=cifar10 --set dataset.path=c --set model.channels=3 --set "
           "model.image_size=32 --set model.patch=4",
       "vitsim: error: dataset cifar10: c/data_batch_5.bin does not exist (dataset.path = 'c')"},
      {"cifar", "a batch cut mid-record",
       [](const vt::TempDir& d) {
         cifar10(d);
         vt::fs::resize_file(d / "c/data_batch_3.bin", 3073 * 3 + 7);
       },
       T + " --set dataset.name=cifar10 --set dataset.path=c --set model.channels=3 --set "
           "model.image_size=32 --set model.patch=4",
       "vitsim: error: c/data_batch_3.bin: truncated: 9226 bytes is not a whole number of 3073-byte CIFAR "
       "records (3 complete, 7 bytes left over)"},
      {"cifar", "a CIFAR-100 file read as CIFAR-10",
       [](const vt::TempDir& d) {
         cifar10(d);
         vitsim::real::write_cifar(d / "c/data_batch_2.bin", digits(3073, 3, 32, 100), 2);
       },
       T + " --set dataset.name=cifar10 --set dataset.path=c --set model.channels=3 --set "
           "model.image_size=32 --set model.patch=4",
       "vitsim: error: c/data_batch_2.bin: record 1: label 243 is out of range (expected 0 .. 9); not a "
       "CIFAR-10 file?"},
      {"cifar", "a FIFO as a batch file",
       [](const vt::TempDir& d) {
         cifar10(d);
         vt::fs::remove(d / "c/data_batch_1.bin");
         mkfifo((d / "c/data_batch_1.bin").c_str(), 0600);
       },
       T + " --set dataset.name=cifar10 --set dataset.path=c --set model.channels=3 --set "
           "model.image_size=32 --set model.patch=4",
       "vitsim: error: c/data_batch_1.bin: not a regular file (a dataset file must be one)"},
      // --- ImageFolder (JPEG/PNG) ---
      {"images", "no images in the class folders",
       [](const vt::TempDir& d) {
         d.file("i/train/a/readme.txt", "no images here");
         d.file("i/val/a/readme.txt", "no images here");
       },
       T + " --set dataset.name=imagefolder --set dataset.path=i" + kFolderModel,
       "vitsim: error: i/train: no .jpg/.jpeg/.png files in class subfolders (ImageFolder layout: "
       "root/<class>/<image>)"},
      {"images", "a JPEG cut short",
       [](const vt::TempDir& d) {
         image_folder(d);
         vt::write_jpeg(d / "i/train/b/cut.jpg", 64, 64, 90);
         vt::fs::resize_file(d / "i/train/b/cut.jpg", vt::fs::file_size(d / "i/train/b/cut.jpg") / 2);
       },
       T + " --set dataset.name=imagefolder --set dataset.path=i" + kFolderModel,
       "vitsim: error: i/train/b/cut.jpg: corrupt JPEG: Invalid JPEG file structure: missing SOS marker"},
      {"images", "a PNG claiming 100000 x 100000 pixels (decompression bomb)",
       [](const vt::TempDir& d) {
         image_folder(d);
         png_header_only(d / "i/train/a/bomb.png", 100000, 100000);
       },
       T + " --set dataset.name=imagefolder --set dataset.path=i" + kFolderModel,
       "vitsim: error: i/train/a/bomb.png: PNG header claims 100000x100000 pixels; the limit is 89478485 "
       "pixels (a decompression bomb?)"},
      {"images", "a class in train/ missing from val/",
       [](const vt::TempDir& d) {
         image_folder(d);
         vt::write_png(d / "i/train/c/0.png", 8, 8, 1);
       },
       T + " --set dataset.name=imagefolder --set dataset.path=i" + kFolderModel + " --set model.classes=3",
       "vitsim: error: i/train and i/val have different classes (labels are the sorted class folders, so "
       "they would not match): only in i/train: c; only in i/val: none"},
      {"images", "val/ naming a class differently",
       [](const vt::TempDir& d) {
         image_folder(d);
         vt::fs::rename(d / "i/val/b", d / "i/val/B");
       },
       T + " --set dataset.name=imagefolder --set dataset.path=i" + kFolderModel,
       "vitsim: error: i/train and i/val have different classes (labels are the sorted class folders, so "
       "they would not match): only in i/train: b; only in i/val: B"},
      {"images", "a PNG cut short",
       [](const vt::TempDir& d) {
         image_folder(d);
         vt::write_png(d / "i/train/b/cut.png", 64, 64, 90);
         vt::fs::resize_file(d / "i/train/b/cut.png", 60);
       },
       T + " --set dataset.name=imagefolder --set dataset.path=i" + kFolderModel,
       "vitsim: error: i/train/b/cut.png: corrupt PNG: ", true},
      {"images", "a text file named .jpg",
       [](const vt::TempDir& d) {
         image_folder(d);
         d.file("i/train/a/notes.jpg", "shopping list");
       },
       T + " --set dataset.name=imagefolder --set dataset.path=i" + kFolderModel,
       "vitsim: error: i/train/a/notes.jpg: neither a JPEG nor a PNG file (unknown signature)"},
      // --- the run ---
      {"run", "unwritable report path", fm, T + " --out /nonexistent/r.json",
       "vitsim: error: cannot write /nonexistent/r.json: No such file or directory"},
      {"run", "unwritable trace path", fm, T + " --trace /nonexistent/t.json",
       "vitsim: error: cannot write /nonexistent/t.json: No such file or directory"},
      {"run", "a checkpoint folder that cannot be made", fm,
       T + " --set run.checkpoint_dir=/proc/ck --set run.checkpoint_every=1",
       "vitsim: error: run.checkpoint_dir: cannot create /proc/ck: No such file or directory"},
      {"run", "--resume without a checkpoint", fm, T + " --set run.checkpoint_dir=ck --resume",
       "vitsim: error: --resume: no checkpoint at ck/checkpoint.pt (run.checkpoint_dir)"},
      {"run", "--resume from a file that is not a checkpoint",
       [](const vt::TempDir& d) {
         fmnist(d);
         d.file("ck/checkpoint.pt", "not a checkpoint");
       },
       T + " --set run.checkpoint_dir=ck --resume",
       "vitsim: error: ck/checkpoint.pt: unreadable checkpoint: ", true},
      {"run", "fewer samples than one global batch", fm, T + " --set training.micro_batch=32",
       "vitsim: error: dataset fashion_mnist (d/train-images-idx3-ubyte.gz): 20 training samples are fewer "
       "than one global batch of 32 (micro_batch 32 x grad_accum 1 x 1 data-parallel ranks)"},
      {"run", "fewer samples than one global batch with accumulation", fm, T + " --set training.grad_accum=3",
       "vitsim: error: dataset fashion_mnist (d/train-images-idx3-ubyte.gz): 20 training samples are fewer "
       "than one global batch of 24 (micro_batch 8 x grad_accum 3 x 1 data-parallel ranks)"},
      {"run", "fewer samples asked than one global batch", fm, T + " --set dataset.train_samples=7",
       "vitsim: error: dataset.train_samples: 7 training samples are fewer than one global batch of 8 "
       "(micro_batch 8 x grad_accum 1 x 1 data-parallel ranks)"},
      {"run", "fp16 on a CPU", fm, T + " --set training.precision=fp16",
       "vitsim: error: training.precision fp16 needs run.device cuda (LibTorch's CPU autocast runs bf16 "
       "only)"},
      {"run", "ZeRO stage 1 (simulated, not trained)", fm, T + " --set parallelism.zero=1",
       "vitsim: error: parallelism.zero 1: the real trainer implements stage 0 (replicated optimizer state, "
       "gradient all-reduce) only"},
      {"run", "the module in half (simulated, not trained)", fm,
       T + " --set training.precision=bf16 --set training.cast=module",
       "vitsim: error: --set training.cast: training.cast module: the real trainer runs bf16 under "
       "torch.autocast only (fp32 parameters, gradients and optimizer state in flat buffers); the module in "
       "half is simulated by vitsim predict/plan, not trained (set training.cast=autocast)"},
      {"run", "CUDA asked of a CPU-only LibTorch", fm, T + " --set run.device=cuda",
       "vitsim: error: run.device = cuda but this LibTorch has no usable CUDA device (build against a CUDA "
       "LibTorch via Torch_DIR)"},
      {"run", "a malformed fault injection", fm, T + " --fault kill:soon",
       "vitsim: error: --fault 'kill:soon': expected KIND:STEP[:RANK] with KIND kill, hang, exit or nan, "
       "STEP >= 1, RANK >= 0"},
  };
}
}  // namespace
