// The trainer's checkpoints (checkpoint.hpp).
#include "model/checkpoint.hpp"

#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/io.hpp"
#include "vitsim/real/checkpoint_file.hpp"

namespace vitsim::real {
namespace fs = std::filesystem;

namespace {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

const char* const kUnusable = "the checkpoint cannot be used: restore a copy or start again without --resume";

// Every tensor a checkpoint holds, by name: the per-tensor CRC32s are computed over these at save and
// recomputed over what was loaded at resume.
NamedTensors checkpoint_tensors(torch::nn::Module& model, const FlatOptimizer& opt) {
  NamedTensors out;
  for (const auto& p : model.named_parameters(true)) out.push_back({"model/" + p.key(), p.value()});
  for (const auto& b : model.named_buffers(true)) out.push_back({"model/" + b.key(), b.value()});
  for (auto& t : opt.state()) out.push_back({"optimizer/" + t.first, t.second});
  return out;
}

uint32_t tensor_crc(const torch::Tensor& t) {
  auto c = t.detach().to(torch::kCPU).contiguous();
  return crc32_of(c.data_ptr(), c.numel() * c.element_size());
}

// "name crc32\n" per tensor, the archive's "checksums" entry.
std::string tensor_checksums(const NamedTensors& tensors) {
  std::string out;
  for (const auto& [name, t] : tensors) out += fmt::format("{} {:08x}\n", name, tensor_crc(t));
  return out;
}

// The first tensor whose CRC32 differs from the one written, as "tensor NAME (CRC32 X, Y written)"; ""
// when all match. A name missing from `written` (or a damaged list) counts as a difference.
std::string damaged_tensor(const NamedTensors& tensors, const std::string& written) {
  std::map<std::string, std::string> recorded;
  std::istringstream in(written);
  std::string name, crc;
  while (in >> name >> crc) recorded[name] = crc;
  for (const auto& [n, t] : tensors) {
    const std::string now = fmt::format("{:08x}", tensor_crc(t));
    auto it = recorded.find(n);
    if (it == recorded.end()) return fmt::format("tensor {} (no checksum recorded for it)", n);
    if (it->second != now) return fmt::format("tensor {} (CRC32 {}, {} written)", n, now, it->second);
  }
  return "";
}

// ---- save ----

void write_position(torch::serialize::OutputArchive& archive, const Position& pos) {
  archive.write("epoch", c10::IValue(static_cast<int64_t>(pos.epoch)));
  archive.write("step_in_epoch", c10::IValue(static_cast<int64_t>(pos.step_in_epoch)));
  archive.write("global_step", c10::IValue(static_cast<int64_t>(pos.global_step)));
  archive.write("loss_scale", c10::IValue(pos.loss_scale));
  archive.write("loss_scale_good_steps", c10::IValue(static_cast<int64_t>(pos.good_steps)));
}

// The archive of one checkpoint: model, optimizer, fingerprint, position, accuracy, CPU generator, and the
// CRC32 of each tensor.
void fill_archive(torch::serialize::OutputArchive& archive, const Scenario& s, int world,
                  torch::nn::Module& model, const FlatOptimizer& opt, const Position& pos) {
  torch::serialize::OutputArchive model_archive, opt_archive;
  model.save(model_archive);
  opt.save(opt_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", opt_archive);
  archive.write("fingerprint", c10::IValue(fingerprint(s, world)));
  write_position(archive, pos);
  auto tensors = checkpoint_tensors(model, opt);
  torch::Tensor accuracy =
      torch::tensor(pos.accuracy.empty() ? std::vector<double>{-1.0} : pos.accuracy, torch::kFloat64);
  archive.write("accuracy", accuracy, /*is_buffer=*/true);
  tensors.push_back({"accuracy", accuracy});
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    torch::Tensor rng = gen.get_state();
    archive.write("cpu_rng", rng, /*is_buffer=*/true);
    tensors.push_back({"cpu_rng", rng});
  }
  archive.write("checksums", c10::IValue(tensor_checksums(tensors)));
}

// ---- load ----

// Loads the model and optimizer archives in place.
void load_state(torch::serialize::InputArchive& archive, torch::nn::Module& model, FlatOptimizer& opt) {
  torch::serialize::InputArchive model_archive, opt_archive;
  archive.read("model", model_archive);
  archive.read("optimizer", opt_archive);
  model.load(model_archive);
  opt.load(opt_archive);
}

// The tensors a loaded checkpoint holds, with the accuracy and CPU generator state read from the archive.
NamedTensors loaded_tensors(torch::serialize::InputArchive& archive, torch::nn::Module& model,
                            const FlatOptimizer& opt, torch::Tensor& acc, torch::Tensor& rng) {
  auto tensors = checkpoint_tensors(model, opt);
  archive.read("accuracy", acc, /*is_buffer=*/true);
  archive.read("cpu_rng", rng, /*is_buffer=*/true);
  tensors.push_back({"accuracy", acc});
  tensors.push_back({"cpu_rng", rng});
  return tensors;
}

// The file's CRC did not match: which part is damaged, found by loading what still loads and comparing
// each tensor with its own checksum.
std::string locate_damage(torch::serialize::InputArchive& archive, torch::nn::Module& model,
                          FlatOptimizer& opt) {
  try {
    load_state(archive, model, opt);
    torch::Tensor acc, rng;
    auto tensors = loaded_tensors(archive, model, opt, acc, rng);
    c10::IValue sums;
    archive.read("checksums", sums);
    const std::string where = damaged_tensor(tensors, sums.toStringRef());
    return where.empty() ? "no tensor: the damage is in the archive's names, scalars or layout" : where;
  } catch (const std::exception&) {
    return "the archive's structure (it no longer loads whole)";
  }
}

// The archive inside a checked envelope; a damaged one is reported with the tensor it damaged.
void open_archive(torch::serialize::InputArchive& archive, const std::string& path,
                  const CheckpointBytes& bytes, torch::nn::Module& model, FlatOptimizer& opt,
                  const torch::Device& device) {
  try {
    // rank 0 wrote it from its GPU: every rank maps it to its own
    archive.load_from(bytes.file.data() + bytes.offset, bytes.size, device);
  } catch (const c10::Error& e) {
    if (!bytes.damage.empty())
      throw Error(fmt::format("{}: checksum mismatch ({}); the archive inside no longer opens: {}", path,
                              bytes.damage, kUnusable));
    throw Error(fmt::format("{}: unreadable checkpoint: {}", path, e.what_without_backtrace()));
  }
  if (!bytes.damage.empty())
    throw Error(fmt::format("{}: checksum mismatch ({}); damaged: {}; {}", path, bytes.damage,
                            locate_damage(archive, model, opt), kUnusable));
}

Position read_position(torch::serialize::InputArchive& archive) {
  Position pos;
  c10::IValue v;
  archive.read("epoch", v);
  pos.epoch = static_cast<int>(v.toInt());
  archive.read("step_in_epoch", v);
  pos.step_in_epoch = v.toInt();
  archive.read("global_step", v);
  pos.global_step = v.toInt();
  archive.read("loss_scale", v);
  pos.loss_scale = v.toDouble();
  archive.read("loss_scale_good_steps", v);
  pos.good_steps = v.toInt();
  return pos;
}

// Reads an opened archive into the model, the optimizer, the CPU generator and the returned position.
// Each tensor is checked against its own checksum whenever the archive holds them, whatever the frame:
// a bare archive (no envelope) is an older vitsim's file only if it has none (an envelope stripped off a
// current file leaves them, and a flipped bit must still be found). legacy: the file had no envelope;
// tensors_checked: set to whether the archive had per-tensor checksums.
Position restore(torch::serialize::InputArchive& archive, const std::string& path, const Scenario& s,
                 int world, torch::nn::Module& model, FlatOptimizer& opt, bool legacy,
                 bool& tensors_checked) {
  c10::IValue v;
  archive.read("fingerprint", v);
  if (v.toStringRef() != fingerprint(s, world))
    throw Error(fmt::format("{}: checkpoint is of another run:\n  checkpoint: {}\n  this run:   {}", path,
                            v.toStringRef(), fingerprint(s, world)));
  torch::serialize::InputArchive model_archive, opt_archive;
  archive.read("model", model_archive);
  archive.read("optimizer", opt_archive);
  model.load(
      model_archive);  // rebinds the parameters' storage: the caller binds them to the flat buffer again
  try {
    opt.load(opt_archive);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", path, e.what()));
  }
  Position pos = read_position(archive);
  torch::Tensor acc, rng;
  auto tensors = loaded_tensors(archive, model, opt, acc, rng);
  // An enveloped file must have them (read throws if not); a bare archive may.
  if (legacy) {
    tensors_checked = archive.try_read("checksums", v);
  } else {
    archive.read("checksums", v);
    tensors_checked = true;
  }
  if (tensors_checked) {
    const std::string where = damaged_tensor(tensors, v.toStringRef());
    if (!where.empty())
      throw Error(fmt::format("{}: checksum mismatch: damaged: {}; {}", path, where, kUnusable));
  }
  acc = acc.to(torch::kCPU);
  for (int64_t i = 0; i < acc.numel(); ++i)
    if (acc[i].item<double>() >= 0) pos.accuracy.push_back(acc[i].item<double>());
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(rng.to(torch::kCPU));
  return pos;
}

}  // namespace

std::string fingerprint(const Scenario& s, int world) {
  const auto& m = s.model;
  // model.class_tokens only when not 1: checkpoints written before the key resume as before.
  const std::string tokens = m.class_tokens != 1 ? fmt::format(" tok{}", m.class_tokens) : "";
  return fmt::format(
      "vit {}px p{} c{} d{} L{} h{} mlp{} cls{}{}; {} {} samples; micro {} accum {} ranks {}; {} {} lr {} wd "
      "{} seed {}",
      m.image_size, m.patch, m.channels, m.width, m.depth, m.heads, m.mlp_ratio, m.classes, tokens,
      s.dataset.name, s.dataset.train_samples, s.training.micro_batch, s.training.grad_accum, world,
      precision_name(s.training.precision), s.training.optimizer, s.training.lr, s.training.weight_decay,
      s.training.seed);
}

std::string checkpoint_path(const Scenario& s) {
  return (fs::path(s.run.checkpoint_dir) / "checkpoint.pt").string();
}

void prepare_checkpoint_dir(const Scenario& s) {
  std::error_code ec;
  fs::create_directories(s.run.checkpoint_dir, ec);
  if (ec)
    throw Error(fmt::format("run.checkpoint_dir: cannot create {}: {}", s.run.checkpoint_dir, ec.message()));
  check_writable(checkpoint_path(s));
}

void save_checkpoint(const Scenario& s, int world, torch::nn::Module& model, const FlatOptimizer& opt,
                     const Position& pos, long long previous_step) {
  torch::serialize::OutputArchive archive;
  fill_archive(archive, s, world, model, opt, pos);
  const std::string path = checkpoint_path(s);
  // Streamed through core's atomic writer, not torch's own file writer: on a full disk that one throws
  // from a destructor (std::terminate) and leaves its partial file behind. The envelope adds the
  // archive's length and CRC32 (real/include/vitsim/real/checkpoint_file.hpp).
  try {
    write_file_atomic(path, [&](const ChunkSink& sink) {
      write_checkpoint_envelope(sink, [&](const ChunkSink& inner) {
        archive.save_to([&](const void* data, size_t size) -> size_t {
          inner(data, size);
          return size;
        });
      });
    });
  } catch (const Error& e) {
    if (previous_step < 0)
      throw Error(fmt::format("checkpoint after global step {}: {}", pos.global_step, e.what()));
    throw Error(
        fmt::format("checkpoint after global step {}: {}; the previous checkpoint (global step {}) is intact "
                    "and --resume continues from it",
                    pos.global_step, e.what(), previous_step));
  }
}

Loaded load_checkpoint(const Scenario& s, int world, torch::nn::Module& model, FlatOptimizer& opt,
                       const torch::Device& device) {
  const std::string path = checkpoint_path(s);
  if (!fs::exists(path)) throw Error(fmt::format("--resume: no checkpoint at {} (run.checkpoint_dir)", path));
  const CheckpointBytes bytes = read_checkpoint_envelope(path);
  torch::serialize::InputArchive archive;
  open_archive(archive, path, bytes, model, opt, device);
  Loaded out;
  out.legacy = bytes.legacy;
  try {
    out.pos = restore(archive, path, s, world, model, opt, bytes.legacy, out.tensors_checked);
  } catch (const c10::Error& e) {
    throw Error(fmt::format("{}: unreadable checkpoint: {}", path, e.what_without_backtrace()));
  }
  return out;
}

}  // namespace vitsim::real
