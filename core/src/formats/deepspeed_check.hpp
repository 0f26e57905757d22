#pragma once
// The checks of a DeepSpeed config (internal to core/, deepspeed_check.cpp), in the order
// read_deepspeed_config applies them: each throws Error(o, ...) with the dotted key, the bad value and
// what DeepSpeed takes; then the reading of the values it models (deepspeed_json.cpp).
#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

#include "vitsim/core/base/error.hpp"
#include "vitsim/core/formats/deepspeed.hpp"

namespace vitsim::deepspeed {

// Every top-level key DeepSpeed v0.12-v0.16 reads; one near a key it reads is a typo ("did you mean", the
// known ones); any other, which DeepSpeed ignores, is returned (to be warned about).
std::vector<std::string> check_top_level(const nlohmann::json& j, const Origin& o);

// Removes every "auto" value (recording its key), refusing one where the integration fills none.
void take_autos(nlohmann::json& j, const std::string& prefix, std::vector<std::string>& autos,
                const Origin& o);

// Every section's values range-checked (those vitsim reads and those it does not: a wrong value is wrong
// either way).
void check_sections(const nlohmann::json& j, const Origin& o);

// The keys of the sections DeepSpeed v0.14.4 reads key by key (fp16, bf16, activation_checkpointing): a
// near miss of a key it reads refused; any other, which DeepSpeed ignores, returned dotted.
std::vector<std::string> check_key_by_key_sections(const nlohmann::json& j, const Origin& o);

// Settings that change time or memory in ways vitsim does not model: refused, never ignored.
void refuse_unmodelled(const nlohmann::json& j, const Origin& o);

// Keys present that vitsim neither reads nor needs (see DeepSpeedConfig::unmodelled), dotted.
std::vector<std::string> unmodelled_keys(const nlohmann::json& j);

// Last, the values vitsim models taken into `c` through the config's one mapping, which
// deepspeed_config_for writes through too (deepspeed_json.cpp); throws Error(o, ...) on what the checks above
// leave to it: zero_optimization.stage out of 0..3, fp16 and bf16 both enabled, an unknown
// communication_data_type or one fp32_allreduce contradicts, an optimizer without a string type.
void read_deepspeed_fields(const nlohmann::json& j, const Origin& o, DeepSpeedConfig& c);

// A resolved point's settings as DeepSpeed takes them (deepspeed_json.cpp): what deepspeed_config_for
// writes, and what deepspeed_config_edit changes in the user's file.
DeepSpeedConfig settings_of(const Scenario& s);

}  // namespace vitsim::deepspeed
