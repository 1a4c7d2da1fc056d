#include "base/duration.h"

#include <cctype>
#include <cstdint>
#include <limits>

namespace tickd {

using std::chrono::milliseconds;

namespace {

struct Unit {
  std::string_view name;
  std::int64_t ms;
};

// Longest names first so "ms" is not read as "m" followed by "s".
constexpr Unit kUnits[] = {{"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000},
                           {"d", 86'400'000}};

}  // namespace

Result<milliseconds> ParseDuration(std::string_view text) {
  const std::string ctx(text);
  if (text.empty()) return MakeError(ctx, "empty duration (write e.g. 30s, 5m, 500ms)");
  std::int64_t total = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      return MakeError(ctx, "expected a number at position " + std::to_string(i + 1) +
                                " (write e.g. 30s, 5m, 500ms)");
    }
    std::int64_t value = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      if (value > std::numeric_limits<std::int64_t>::max() / 10 / 86'400'000) {
        return MakeError(ctx, "duration is too large");
      }
      value = value * 10 + (text[i] - '0');
      ++i;
    }
    std::size_t unit_end = i;
    while (unit_end < text.size() && std::isalpha(static_cast<unsigned char>(text[unit_end]))) {
      ++unit_end;
    }
    std::string_view unit_text = text.substr(i, unit_end - i);
    if (unit_text.empty()) {
      return MakeError(ctx,
                       "missing unit after " + std::to_string(value) + " (use ms, s, m, h, d)");
    }
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
      if (u.name == unit_text) unit = &u;
    }
    if (unit == nullptr) {
      return MakeError(ctx, "unknown unit '" + std::string(unit_text) + "' (use ms, s, m, h, d)");
    }
    total += value * unit->ms;
    if (total > std::numeric_limits<std::int64_t>::max() / 4) {
      return MakeError(ctx, "duration is too large");
    }
    i = unit_end;
  }
  return milliseconds(total);
}

std::string FormatDuration(milliseconds d) {
  std::int64_t ms = d.count();
  if (ms == 0) return "0s";
  std::string out;
  if (ms < 0) {
    out = "-";
    ms = -ms;
  }
  if (ms % 1000 != 0) return out + std::to_string(ms) + "ms";
  std::int64_t s = ms / 1000;
  const std::pair<std::int64_t, char> parts[] = {{86400, 'd'}, {3600, 'h'}, {60, 'm'}, {1, 's'}};
  for (auto [size, name] : parts) {
    if (s >= size) {
      out += std::to_string(s / size) + name;
      s %= size;
    }
  }
  return out;
}

}  // namespace tickd
