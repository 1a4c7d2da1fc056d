#include "config/expand.h"

#include <cctype>
#include <cstdlib>

namespace tickd::config {

namespace {

bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

std::optional<std::string> GetEnvVar(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

Result<std::string> ExpandEnv(std::string_view text, const EnvLookup& lookup) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, 3, "$${") == 0) {
      out += "${";
      i += 3;
      continue;
    }
    if (text.compare(i, 2, "${") != 0) {
      out += text[i++];
      continue;
    }
    const std::size_t close = text.find('}', i + 2);
    if (close == std::string_view::npos) {
      return MakeError("", "unterminated '${' at position " + std::to_string(i + 1) +
                               " (write $${ for a literal '${')");
    }
    const std::string_view inner = text.substr(i + 2, close - i - 2);
    const std::size_t op = inner.find(":-");
    const std::string name(inner.substr(0, op));
    bool valid = !name.empty() && IsNameStart(name[0]);
    for (char c : name) valid = valid && IsNameChar(c);
    if (!valid) {
      return MakeError("", "invalid variable name '" + name + "' in '${" + std::string(inner) +
                               "}' (use letters, digits and _)");
    }
    const std::optional<std::string> value = lookup(name);
    if (op != std::string_view::npos) {
      out += (value && !value->empty()) ? *value : std::string(inner.substr(op + 2));
    } else if (value) {
      out += *value;
    } else {
      return MakeError("", "environment variable " + name + " is not set (write ${" + name +
                               ":-default} to give a default)");
    }
    i = close + 1;
  }
  return out;
}

}  // namespace tickd::config
