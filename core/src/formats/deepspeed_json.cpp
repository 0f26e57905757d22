// The keys of a DeepSpeed config that vitsim models, in one mapping (deepspeed_fields, over the JSON mapping
// of vitsim/core/base/json_reader.hpp): deepspeed_config_for writes a resolved point's settings through it
// (in the order DeepSpeed's documentation gives, OrderedJsonOut), and read_deepspeed_config reads a config
// through it once deepspeed_check.cpp's checks passed (read_deepspeed_fields), in DeepSpeed's words.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "formats/deepspeed_check.hpp"
#include "vitsim/core/base/error.hpp"
#include "vitsim/core/base/json_reader.hpp"
#include "vitsim/core/base/units.hpp"
#include "vitsim/core/formats/deepspeed.hpp"
#include "vitsim/core/formats/scenario.hpp"

namespace vitsim {

namespace {
using json = nlohmann::json;
using detail::MappedAs, detail::non_negative, detail::within;

// The reading side of deepspeed_fields: one object of the config and the file. A value is taken as
// DeepSpeed takes it (an integer may be written 16.0); a value of the wrong type is named by its key,
// "DeepSpeed key 'overlap_comm' must be true or false, got 1". The ranges a mapping gives were checked
// before, in DeepSpeed's words, with the key dotted (deepspeed::check_sections): here a value is taken.
class DeepSpeedIn {
 public:
  static constexpr bool writing = false;
  DeepSpeedIn(const json& j, const Origin& o) : j_(&j), o_(&o) {}

  const json& raw() const { return *j_; }
  const Origin& origin() const { return *o_; }
  bool has(const char* key) const { return j_->contains(key); }

  long long integer(const char* key) const {
    const json& v = j_->at(key);
    if (v.is_number_integer()) return v.get<long long>();
    if (v.is_number_float() &&
        v.get<double>() == static_cast<double>(static_cast<long long>(v.get<double>())))
      return static_cast<long long>(v.get<double>());
    throw Error(*o_, fmt::format("DeepSpeed key '{}' must be an integer, got {}", key, echo(v.dump())));
  }
  double number(const char* key) const {
    const json& v = j_->at(key);
    if (!v.is_number())
      throw Error(*o_, fmt::format("DeepSpeed key '{}' must be a number, got {}", key, echo(v.dump())));
    return v.get<double>();
  }
  bool boolean(const char* key) const {
    const json& v = j_->at(key);
    if (!v.is_boolean())
      throw Error(*o_, fmt::format("DeepSpeed key '{}' must be true or false, got {}", key, echo(v.dump())));
    return v.get<bool>();
  }

  // The mapping's calls (detail::JsonOut's, reading): a key read when present.
  bool present(bool, std::initializer_list<const char*> keys) const {
    return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return has(k); });
  }
  void optional_integer(const char* key, std::optional<long long>& v, long long, long long) const {
    if (has(key)) v = integer(key);
  }
  void optional_number(const char* key, std::optional<double>& v, detail::JsonNumber) const {
    if (has(key)) v = number(key);
  }
  void optional_boolean(const char* key, std::optional<bool>& v) const {
    if (has(key)) v = boolean(key);
  }
  template <class T, class Fields>
  void object(const char* key, T& v, Fields fields) const {
    const json& s = j_->at(key);
    if (!s.is_object()) throw Error(*o_, fmt::format("DeepSpeed key '{}' must be an object", key));
    DeepSpeedIn in(s, *o_);
    fields(in, v);
  }
  template <class V, class Write, class Read>
  void custom(const char* key, V& v, Write, Read read) const {
    read(*this, key, v);
  }
  template <class Check>
  void check(Check&& c) const {
    c(*this);
  }

 private:
  const json* j_;
  const Origin* o_;
};

constexpr long long kMaxInt = 1LL << 53;  // the largest whole number a JSON double holds (check_sections)

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

// zero_optimization.stage: 0..3.
int write_stage(const std::optional<int>& v) {
  return *v;
}
void read_stage(const DeepSpeedIn& z, const char* key, std::optional<int>& v) {
  const long long s = z.integer(key);
  if (s < 0 || s > 3) throw Error(z.origin(), fmt::format("zero_optimization.stage must be 0..3, got {}", s));
  v = static_cast<int>(s);
}

// A bucket size in elements: written whole (DeepSpeed takes an int), read as given (check_zero refused a
// fraction).
long long write_elements(const std::optional<double>& v) {
  return std::llround(*v);
}
void read_elements(const DeepSpeedIn& z, const char* key, std::optional<double>& v) {
  v = z.number(key);
}

// fp16.enabled, bf16.enabled: the precision `p` when enabled, one of the two at most.
auto write_enabled(const char* p) {
  return [p](const std::optional<std::string>& precision) { return precision == std::string(p); };
}
auto read_enabled(const char* p) {
  return [p](const DeepSpeedIn& s, const char* key, std::optional<std::string>& precision) {
    if (!s.has(key) || !s.boolean(key)) return;
    if (precision) throw Error(s.origin(), "fp16 and bf16 are both enabled; DeepSpeed allows one");
    precision = p;
  };
}

// fp32_allreduce alone: all-reduces in fp32 (communication_data_type, when given, is read instead).
void read_fp32_allreduce(const DeepSpeedIn& top, std::optional<std::string>& comm_dtype) {
  if (top.has("fp32_allreduce") && !top.has("communication_data_type") && top.boolean("fp32_allreduce"))
    comm_dtype = "fp32";
}

// communication_data_type as DeepSpeed v0.14.4 reads it (runtime/config.py get_communication_data_type:
// lower-cased, then fp32, fp16 or bf16 and nothing else: "half", "float" and "bfloat16" raise ValueError
// there, and "bfp16", the spelling DeepSpeed itself took before v0.14.1 (commit ed8aed57, "fix comms
// dtype"), too); written as vitsim names the dtype.
std::string write_string(const std::optional<std::string>& v) {
  return *v;
}
void read_comm_dtype(const DeepSpeedIn& top, const char* key, std::optional<std::string>& comm_dtype) {
  const json& v = top.raw().at(key);
  const std::string s = v.is_string() ? lower(v.get<std::string>()) : "";
  if (s != "fp32" && s != "fp16" && s != "bf16") {
    const std::string hint = s == "bfp16" ? " (did you mean bf16? DeepSpeed took bfp16 before v0.14.1 only)"
                             : s == "bfloat16"                ? " (did you mean bf16?)"
                             : s == "half" || s == "float16"  ? " (did you mean fp16?)"
                             : s == "float" || s == "float32" ? " (did you mean fp32?)"
                                                              : "";
    throw Error(top.origin(),
                fmt::format("communication_data_type {} is not one of fp32, fp16, bf16, as DeepSpeed v0.14.4 "
                            "reads it{}",
                            v.dump(), hint));
  }
  // Both given: fp32_allreduce was silently dropped for communication_data_type (issue 27).
  if (top.has("fp32_allreduce") && top.boolean("fp32_allreduce") && s != "fp32")
    throw Error(top.origin(),
                fmt::format("DeepSpeed keys 'fp32_allreduce': true and 'communication_data_type': {} "
                            "contradict each other (one all-reduces in fp32, the other in {}); give one",
                            echo(v.dump()), s));
  comm_dtype = s;
}

// optimizer.type: lower-cased as vitsim names the optimizer; written as DeepSpeed spells it.
std::string write_type(const std::optional<std::string>& t) {
  return t == "adamw" ? "AdamW" : t == "adam" ? "Adam" : "SGD";
}
void read_type(const DeepSpeedIn& opt, const char* key, std::optional<std::string>& t) {
  if (!opt.has(key) || !opt.raw().at(key).is_string())
    throw Error(opt.origin(), "DeepSpeed key 'optimizer' must be an object with a string 'type'");
  t = lower(opt.raw().at(key).get<std::string>());
}

// activation_checkpointing: on when the section is there; written as vitsim checkpoints (whole blocks
// recomputed on the GPU: the activations neither partitioned nor copied to the host).
nlohmann::ordered_json write_checkpointing(const std::optional<bool>&) {
  return {{"partition_activations", false}, {"cpu_checkpointing", false}};
}
void read_checkpointing(const DeepSpeedIn&, const char*, std::optional<bool>& on) {
  on = true;
}

template <class Io, MappedAs<DeepSpeedConfig> C>
void zero_fields(Io& z, C& c) {
  if (z.present(c.zero_stage.has_value(), {"stage"}))
    z.custom("stage", c.zero_stage, write_stage, read_stage);
  z.optional_boolean("overlap_comm", c.overlap_comm);
  if (z.present(c.reduce_bucket_elements.has_value(), {"reduce_bucket_size"}))
    z.custom("reduce_bucket_size", c.reduce_bucket_elements, write_elements, read_elements);
  if (z.present(c.allgather_bucket_elements.has_value(), {"allgather_bucket_size"}))
    z.custom("allgather_bucket_size", c.allgather_bucket_elements, write_elements, read_elements);
}

template <class Io, MappedAs<DeepSpeedConfig> C>
void optimizer_fields(Io& opt, C& c) {
  opt.custom("type", c.optimizer, write_type, read_type);
  if (opt.present(true, {"params"}))
    opt.object("params", c, [](auto& p, auto& v) {
      p.optional_number("lr", v.lr, within(0, 1e3, "a learning rate"));
      p.optional_number("weight_decay", v.weight_decay, within(0, 1e3, "a weight decay"));
    });
}

// The config's keys vitsim models, in the order the reader's faults are found and the writer writes them.
template <class Io, MappedAs<DeepSpeedConfig> C>
void deepspeed_fields(Io& io, C& c) {
  if constexpr (!Io::writing)
    io.check([&](const DeepSpeedIn& top) { read_fp32_allreduce(top, c.comm_dtype); });
  io.optional_integer("train_batch_size", c.train_batch_size, 1, kMaxInt);
  io.optional_integer("train_micro_batch_size_per_gpu", c.micro_batch, 1, kMaxInt);
  io.optional_integer("gradient_accumulation_steps", c.grad_accum, 1, kMaxInt);
  const bool zero = c.zero_stage || c.overlap_comm || c.reduce_bucket_elements || c.allgather_bucket_elements;
  if (io.present(zero, {"zero_optimization"}))
    io.object("zero_optimization", c, [](auto& z, auto& v) { zero_fields(z, v); });
  // Both written, enabled or not (DeepSpeed's default is neither: the file says which).
  if (io.present(true, {"fp16"}))
    io.object("fp16", c, [](auto& f, auto& v) {
      f.custom("enabled", v.precision, write_enabled("fp16"), read_enabled("fp16"));
      f.optional_number("loss_scale", v.loss_scale, non_negative("a loss scale"));
    });
  if (io.present(true, {"bf16"}))
    io.object("bf16", c, [](auto& b, auto& v) {
      b.custom("enabled", v.precision, write_enabled("bf16"), read_enabled("bf16"));
    });
  if (io.present(c.comm_dtype.has_value(), {"communication_data_type"}))
    io.custom("communication_data_type", c.comm_dtype, write_string, read_comm_dtype);
  if (io.present(c.optimizer.has_value(), {"optimizer"}))
    io.object("optimizer", c, [](auto& opt, auto& v) { optimizer_fields(opt, v); });
  io.optional_number("gradient_clipping", c.gradient_clipping, non_negative("a gradient norm"));
  if (io.present(c.activation_checkpointing.value_or(false), {"activation_checkpointing"}))
    io.custom("activation_checkpointing", c.activation_checkpointing, write_checkpointing,
              read_checkpointing);
}

}  // namespace

// A resolved point's settings as DeepSpeed takes them.
DeepSpeedConfig deepspeed::settings_of(const Scenario& s) {
  const TrainingSpec& t = s.training;
  DeepSpeedConfig c;
  c.train_batch_size = s.global_batch();
  c.micro_batch = t.micro_batch;
  c.grad_accum = t.grad_accum;
  c.zero_stage = s.parallel.zero;
  c.overlap_comm = s.parallel.overlap;
  // Buckets in elements of the dtype the scenario sized them in (parallelism.bucket_size's default).
  const double elem = precision_bytes(s.parallel.comm_dtype ? *s.parallel.comm_dtype : t.precision);
  c.reduce_bucket_elements = s.parallel.bucket_bytes / elem;
  c.allgather_bucket_elements = s.parallel.allgather_bucket_bytes / elem;
  if (t.precision != Precision::FP32) c.precision = precision_name(t.precision);
  if (t.precision == Precision::FP16 && t.loss_scale > 0) c.loss_scale = t.loss_scale;
  if (s.parallel.comm_dtype) c.comm_dtype = precision_name(*s.parallel.comm_dtype);
  c.optimizer = t.optimizer;
  c.lr = t.lr;
  c.weight_decay = t.weight_decay;
  if (t.gradient_clipping > 0) c.gradient_clipping = t.gradient_clipping;
  if (t.activation_checkpointing) c.activation_checkpointing = true;
  return c;
}

void deepspeed::read_deepspeed_fields(const json& j, const Origin& o, DeepSpeedConfig& c) {
  DeepSpeedIn in(j, o);
  deepspeed_fields(in, c);
}

std::string deepspeed_config_for(const Scenario& s) {
  const DeepSpeedConfig c = deepspeed::settings_of(s);
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  detail::OrderedJsonOut out(j);
  deepspeed_fields(out, c);
  return j.dump(2) + "\n";
}

}  // namespace vitsim
