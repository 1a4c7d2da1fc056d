#include "cron/tzdata_version.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace tickd::cron {
namespace {

constexpr std::size_t kMaxVersionLength = 32;

bool IsVersion(std::string_view v) {
  if (v.empty() || v.size() > kMaxVersionLength) return false;
  for (const char c : v) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    c == '.' || c == '_' || c == '+' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// The first line of `path`, at most its first 256 bytes; "" when it cannot be read.
std::string FirstLine(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string head(256, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  head.resize(std::min(head.find_first_of("\r\n"), head.size()));
  return head;
}

std::string_view Trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t");
  return s.substr(first, last - first + 1);
}

}  // namespace

std::string TzdataDir() {
  const char* dir = std::getenv("TZDIR");
  if (dir != nullptr && *dir != '\0') return dir;
  return std::string(kDefaultTzdataDir);
}

std::string TzdataVersionIn(const std::string& dir) {
  // tzdata.zi, the compact text form of the whole database, starts with its release
  // (zic's `# version` line); Debian ships it, not +VERSION.
  constexpr std::string_view kPrefix = "# version ";
  const std::string zi = FirstLine(dir + "/tzdata.zi");
  if (zi.starts_with(kPrefix)) {
    const std::string_view v = Trim(std::string_view(zi).substr(kPrefix.size()));
    if (IsVersion(v)) return std::string(v);
  }
  // +VERSION: the release alone, as tzcode's `make install` leaves it.
  const std::string stamp = FirstLine(dir + "/+VERSION");
  std::string_view v = Trim(stamp);
  v = v.substr(0, v.find_first_of(" \t"));
  if (IsVersion(v)) return std::string(v);
  return std::string(kUnknownTzdataVersion);
}

std::string TzdataVersion() { return TzdataVersionIn(TzdataDir()); }

const std::string& TzdataVersionInUse() {
  static const std::string in_use = TzdataVersion();
  return in_use;
}

}  // namespace tickd::cron
