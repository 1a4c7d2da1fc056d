// Cron expression text → Spec, in one of the three dialects of docs/design.md §2.
// Internal to cron/: Schedule::Parse is the public entry point.
#pragma once

#include <string_view>

#include "cron/schedule.h"
#include "cron/spec.h"

namespace tickd::cron::internal {

// Parses `expr` (a field list, a macro such as "@daily", or "@every <duration>").
// `hash_name` is what `H` hashes (ScheduleOptions::job_name); empty: `H` is an error.
// Errors are complete user-facing lines ("EXPR: field N (name) at column C: why").
// Does not check whether the expression can ever fire; the caller does.
tl::expected<Spec, ParseError> ParseSpec(std::string_view expr, Dialect dialect,
                                         std::string_view hash_name = {});

// "EXPR: message" or "EXPR: field N (name) at column C: message", filling `error`.
ParseError MakeParseError(std::string_view expr, int field, std::string_view field_name,
                          int column, std::string_view message);

}  // namespace tickd::cron::internal
