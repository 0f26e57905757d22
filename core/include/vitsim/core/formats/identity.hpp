#pragma once
// Provenance of what vitsim writes: its version, SHA-256 digests, and the identity of the scenario a
// report answers, so that a report fed back in (validate --measured, plan --merge, plot) can be checked
// against the scenario it claims to answer.
#include <string>

namespace vitsim {

struct Scenario;

// The vitsim version (CMake's project version), written into every report and plan.
const char* vitsim_version();

// FIPS 180-4 SHA-256 of `bytes`, 64 lowercase hex digits.
std::string sha256_hex(const std::string& bytes);

// The canonical text of what a resolved point trains: the model's shape, the dataset's sizes, the
// cluster shape (nodes, GPUs per node, host order), the training step (micro-batch, accumulation,
// precision, optimizer, framework), parallelism and the loader, one "key=value" line each. Left out:
// paths (platform, dataset, outputs), the scenario's name, epochs, the learning rate, weight decay and
// seed (they change neither a step's time nor its memory), and the simulation.*, run.* and validation.*
// settings (how long to simulate or measure, not what). Two points with the same text answer the same
// question, whichever file or --set they came from.
std::string scenario_identity_text(const Scenario& s);
// "sha256:" + sha256_hex(scenario_identity_text(s)).
std::string scenario_id(const Scenario& s);
// Whether `id` has the shape of an identity: "sha256:" and 64 hex digits.
bool is_sha256_id(const std::string& id);

}  // namespace vitsim
