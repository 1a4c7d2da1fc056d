// "Did you mean" for unknown keys and enum values.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tickd::config {

// Levenshtein distance, case-insensitive, with '-' and '_' treated as equal
// (so "kill-grace" is 0 away from "kill_grace").
int EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `word` when it is at most 2 edits away and closer than
// its own length (so "x" suggests nothing); the first one wins a tie. nullopt otherwise.
std::optional<std::string> ClosestMatch(std::string_view word,
                                        std::span<const std::string_view> candidates);

}  // namespace tickd::config
