// Durations as written in job files and on the command line: a sequence of
// <integer><unit> with units ms, s, m, h, d ("500ms", "30s", "1h30m", "1d").
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/error.h"

namespace tickd {

// Errors name the text and what is wrong ("30x: unknown unit 'x' (use ms, s, m, h, d)").
// Zero is allowed ("0s"); negative values are not.
Result<std::chrono::milliseconds> ParseDuration(std::string_view text);

// The shortest exact spelling: 1500ms → "1500ms", 90000ms → "1m30s", 0 → "0s".
std::string FormatDuration(std::chrono::milliseconds d);

}  // namespace tickd
