#pragma once
// Words for users: "did you mean" for a mistyped name (subcommands, flags, --set keys, DeepSpeed keys,
// catalogue names), counts with their noun ("1 epoch", "3 epochs") and signed percentages without "-0%".
// One implementation, used by every message that needs them.
#include <string>
#include <vector>

namespace vitsim {

// Levenshtein distance (insertions, deletions, substitutions; one each).
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `typed`, or "" when none is close: within max(2, n / 3) edits, n the characters
// typed after the prefix the two share ("training.batch" is not "training.epochs"), or one of which
// `typed` is a prefix. Ties go to the first candidate; 2 characters or fewer get no guess.
std::string closest_name(const std::string& typed, const std::vector<std::string>& candidates);

// " (did you mean 'NAME'?)" for the closest candidate, or "" when none is close.
std::string did_you_mean(const std::string& typed, const std::vector<std::string>& candidates);

// "1 epoch", "0 epochs", "2 epochs"; `plural_noun` when the plural is not noun + "s".
std::string count_noun(long long n, const std::string& noun, const std::string& plural_noun = "");

// A signed percentage rounded to `decimals`: "+12%", "-3%", and "0%" (never "-0%" or "+0%") for a value
// that rounds to zero. `fraction` 0.12 -> "+12%".
std::string signed_percent(double fraction, int decimals = 0);

}  // namespace vitsim
