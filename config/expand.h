// `${VAR}` and `${VAR:-default}` in job-file values (docs/design.md §4).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"

namespace tickd::config {

// Looks a variable up; nullopt when it is not set. The default reads the process
// environment; tests pass their own.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
std::optional<std::string> GetEnvVar(const std::string& name);

// Expands every `${NAME}` and `${NAME:-default}` in `text`.
//   ${NAME}          the value of NAME (empty if set but empty); an error if unset.
//   ${NAME:-default} the value of NAME, or `default` (taken literally, no nesting)
//                    when NAME is unset or empty — as in sh.
//   $${              a literal "${" (the escape for shell jobs that want the shell,
//                    not tickd, to expand "${VAR}").
//   any other `$`    stays literal: "$HOME", "$1", "$$" (the shell's pid) and a lone
//                    "$" reach the job exactly as written, so shell: lines keep working.
// Errors (detail only, no context): an unset variable without default (naming it),
// an unterminated "${", an invalid name.
Result<std::string> ExpandEnv(std::string_view text, const EnvLookup& lookup = GetEnvVar);

}  // namespace tickd::config
