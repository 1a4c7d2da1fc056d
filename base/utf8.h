// Well-formed UTF-8 (RFC 3629): what JSON, journald and log shippers take as text.
// Node ids, pause reasons and log lines are held to it; what a job prints may be any
// bytes, and is made so where it is logged (app/log.cc).
#pragma once

#include <cstddef>
#include <string_view>

namespace tickd {

// The length of the well-formed UTF-8 character at the start of `v` (no overlong
// form, no surrogate, nothing above U+10FFFF), or 0 when there is none (`v` empty, or
// it starts with a byte that begins no such character).
std::size_t Utf8Length(std::string_view v);

// Whether all of `v` is well-formed UTF-8.
bool IsValidUtf8(std::string_view v);

}  // namespace tickd
