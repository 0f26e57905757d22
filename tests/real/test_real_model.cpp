// The LibTorch ViT against core's model description.
// Torch first: c10's logging header defines a glog-style CHECK (abort on failure, never counted)
// that would otherwise replace Catch's; it is dropped before Catch defines its own.
#include "vitsim/real/model.hpp"
#include "vitsim/real/optim.hpp"
#undef CHECK

#include <catch2/catch.hpp>

#include <sstream>

#include "vitsim/core/model/vit.hpp"

using namespace vitsim;

TEST_CASE("The LibTorch ViT has exactly core's parameter count", "[real][model]") {
  // Every preset small enough to build quickly, plus vit_b_16, whose count torchvision prints as
  // 86,567,656 (docs/sources.md "ViT sizes").
  for (const char* name :
       {"vit_fmnist_tiny", "vit_cifar_tiny", "vit_cifar_small", "vit_tiny_patch16_224", "vit_b_16"}) {
    ViTConfig cfg = vit_preset(name);
    real::VisionTransformer model(cfg);
    INFO(name);
    CHECK(real::parameter_count(*model) == build_workload(cfg).total_params());
  }
  real::VisionTransformer b16(vit_preset("vit_b_16"));
  CHECK(real::parameter_count(*b16) == 86567656);
}

TEST_CASE("The ViT maps images to one logit per class", "[real][model]") {
  ViTConfig cfg = vit_preset("vit_fmnist_tiny");
  cfg.classes = 7;
  torch::manual_seed(1);
  real::VisionTransformer model(cfg);
  auto x = torch::randn({3, cfg.channels, cfg.image_size, cfg.image_size});
  auto y = model->forward(x);
  CHECK(y.sizes() == torch::IntArrayRef({3, 7}));
  // The head is zero-initialised as in torchvision: every logit starts at exactly 0.
  CHECK(y.abs().max().item<float>() == 0.0f);
  // A non-square layout error is core's error, not a LibTorch crash.
  cfg.patch = 5;
  CHECK_THROWS_WITH(real::VisionTransformer(cfg), "model image_size 28 is not a multiple of patch 5");
}

TEST_CASE("The LibTorch ViT prepends model.class_tokens learned tokens, the head reading the first",
          "[real][model][class_tokens]") {
  // K tokens: core's count (the token block K d and a position embedding per token, T = N + K), and every
  // token of the block in the sequence: with a non-zero head each one reaches the logits through attention,
  // so each row of the block gets a gradient.
  for (int K : {2, 8}) {
    INFO("class_tokens " << K);
    ViTConfig cfg = vit_preset("vit_fmnist_tiny");
    cfg.class_tokens = K;
    torch::manual_seed(5);
    real::VisionTransformer model(cfg);
    CHECK(real::parameter_count(*model) == build_workload(cfg).total_params());
    CHECK(model->class_token.sizes() == torch::IntArrayRef({K, 1, cfg.width}));
    CHECK(model->pos_embedding.size(0) == cfg.tokens());
    torch::nn::init::normal_(model->head->weight, 0.0, 0.02);
    auto x = torch::randn({3, cfg.channels, cfg.image_size, cfg.image_size});
    auto y = model->forward(x);
    CHECK(y.sizes() == torch::IntArrayRef({3, cfg.classes}));
    y.pow(2).sum().backward();
    const auto per_token = model->class_token.grad().abs().sum({1, 2});
    CHECK(per_token.min().item<double>() > 0);
  }
}

namespace {
// The trainer's layout: every parameter a view into one flat buffer, every gradient a view into
// another, in reverse parameter order.
struct FlatModel {
  real::VisionTransformer model;
  std::vector<torch::Tensor> params;
  real::FlatParameters flat;
  torch::Tensor flat_param, flat_grad;
  explicit FlatModel(const ViTConfig& cfg)
      : model(cfg),
        params(model->parameters()),
        flat(real::flatten_parameters(params)),
        flat_param(flat.params),
        flat_grad(flat.grads) {}
};

double max_param_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
  return d;
}
}  // namespace

TEST_CASE("The flat optimizers follow torch::optim's AdamW, Adam and SGD step for step",
          "[real][model][optim]") {
  // Reference: LibTorch 1.13's own optimizers on the same model, the same batches, with per-tensor
  // gradients. The flat ones run the same element-wise operations on one buffer, so the parameters
  // agree to float rounding (a vectorised loop's tail may round once differently): 1e-6 after 6 steps
  // of lr 1e-2, where one step moves a parameter by up to lr = 1e-2.
  ViTConfig cfg = vit_preset("vit_fmnist_tiny");
  for (const char* kind : {"adamw", "adam", "sgd"}) {
    INFO(kind);
    torch::manual_seed(3);
    real::VisionTransformer ref(cfg);
    torch::manual_seed(3);
    FlatModel flat(cfg);
    auto ref_params = ref->parameters();
    REQUIRE(max_param_diff(ref_params, flat.params) == 0);
    std::unique_ptr<torch::optim::Optimizer> torch_opt;
    const double lr = 1e-2, wd = 0.05;
    if (std::string(kind) == "adamw")
      torch_opt =
          std::make_unique<torch::optim::AdamW>(ref_params, torch::optim::AdamWOptions(lr).weight_decay(wd));
    else if (std::string(kind) == "adam")
      torch_opt =
          std::make_unique<torch::optim::Adam>(ref_params, torch::optim::AdamOptions(lr).weight_decay(wd));
    else
      torch_opt = std::make_unique<torch::optim::SGD>(
          ref_params, torch::optim::SGDOptions(lr).momentum(0.9).weight_decay(wd));
    real::OptimizerConfig oc;
    oc.kind = kind;
    oc.lr = lr;
    oc.weight_decay = wd;
    real::FlatOptimizer opt(oc, flat.flat_param, flat.flat_grad);
    torch::manual_seed(4);
    double moved = 0;
    for (int step = 0; step < 6; ++step) {
      auto x = torch::randn({8, cfg.channels, cfg.image_size, cfg.image_size});
      auto y = torch::randint(0, cfg.classes, {8}, torch::kInt64);
      torch_opt->zero_grad();
      torch::cross_entropy_loss(ref->forward(x), y).backward();
      torch_opt->step();
      flat.flat_grad.zero_();
      torch::cross_entropy_loss(flat.model->forward(x), y).backward();
      auto before = flat.flat_param.clone();
      opt.step();
      moved = std::max(moved, (flat.flat_param - before).abs().max().item<double>());
    }
    CHECK(moved > 1e-3);  // the steps did move the parameters
    CHECK(max_param_diff(ref_params, flat.params) < 1e-6);
    CHECK(opt.steps() == 6);
  }
}

TEST_CASE("Flat optimizer state and parameters survive a save and load", "[real][model][optim]") {
  // Two steps, save model + optimizer, load into a fresh model and optimizer (Module::load rebinds
  // parameter storage; bind_flat_parameters must bind them to the flat buffer again), two more steps
  // each: both must end bit-identical, and the loaded parameters must again be views of the flat buffer.
  ViTConfig cfg = vit_preset("vit_fmnist_tiny");
  real::OptimizerConfig oc;
  oc.lr = 1e-2;
  oc.weight_decay = 0.01;
  torch::manual_seed(5);
  FlatModel a(cfg);
  real::FlatOptimizer opt_a(oc, a.flat_param, a.flat_grad);
  auto batch = [&](int k) {
    torch::manual_seed(100 + k);
    return std::make_pair(torch::randn({4, cfg.channels, cfg.image_size, cfg.image_size}),
                          torch::randint(0, cfg.classes, {4}, torch::kInt64));
  };
  auto train = [&](FlatModel& m, real::FlatOptimizer& o, int k) {
    auto [x, y] = batch(k);
    m.flat_grad.zero_();
    torch::cross_entropy_loss(m.model->forward(x), y).backward();
    o.step();
  };
  train(a, opt_a, 0);
  train(a, opt_a, 1);
  torch::serialize::OutputArchive ma, oa;
  a.model->save(ma);
  opt_a.save(oa);
  std::stringstream ms, os;
  ma.save_to(ms);
  oa.save_to(os);

  torch::manual_seed(6);  // another initialisation, overwritten by the load
  FlatModel b(cfg);
  real::FlatOptimizer opt_b(oc, b.flat_param, b.flat_grad);
  torch::serialize::InputArchive mb, ob;
  mb.load_from(ms);
  ob.load_from(os);
  b.model->load(mb);
  opt_b.load(ob);
  real::bind_flat_parameters(b.params, b.flat.offsets, b.flat_param);
  for (size_t i = 0; i < b.params.size(); ++i)
    CHECK(b.params[i].data_ptr<float>() == b.flat_param.data_ptr<float>() + b.flat.offsets[i]);
  CHECK(torch::equal(a.flat_param, b.flat_param));
  CHECK(opt_b.steps() == 2);
  train(a, opt_a, 2);
  train(a, opt_a, 3);
  train(b, opt_b, 2);
  train(b, opt_b, 3);
  CHECK(torch::equal(a.flat_param, b.flat_param));

  // State of another optimizer is refused.
  real::OptimizerConfig sgd = oc;
  sgd.kind = "sgd";
  real::FlatOptimizer opt_c(sgd, b.flat_param, b.flat_grad);
  torch::serialize::InputArchive oc_in;
  os.seekg(0);
  oc_in.load_from(os);
  CHECK_THROWS_WITH(opt_c.load(oc_in), "the checkpoint's optimizer is adamw, the scenario's sgd");
}

TEST_CASE("The encoder's self-attention equals LibTorch's MultiheadAttention on the same parameters",
          "[real][model]") {
  // Reference: torch::nn::MultiheadAttention::forward(x, x, x) of the block's own module; the block
  // computes attention itself (no torch::equal per call) and must give the same output and gradients
  // (to float rounding: q * (1/sqrt(d)) there, q / sqrt(d) here).
  torch::manual_seed(7);
  const int width = 64, heads = 4;
  real::EncoderBlock block(width, heads, 128, 0.0);
  auto x = torch::randn({17, 5, width}, torch::requires_grad());
  auto mine = block->self_attention(x);
  auto ref = std::get<0>(block->attn->forward(x, x, x, torch::Tensor(), /*need_weights=*/false));
  REQUIRE(mine.sizes() == ref.sizes());
  CHECK((mine - ref).abs().max().item<double>() < 1e-5);
  auto g_mine = torch::autograd::grad({mine.sum()}, {x, block->attn->in_proj_weight})[0];
  auto g_ref = torch::autograd::grad({ref.sum()}, {x, block->attn->in_proj_weight})[0];
  CHECK((g_mine - g_ref).abs().max().item<double>() < 1e-4);
  CHECK(ref.abs().max().item<double>() > 1e-2);  // not a comparison of zeros
}
