#include "cron/zone.h"

#include <map>
#include <memory>
#include <mutex>

namespace tickd::cron {

namespace {

const absl::CivilSecond kUnixEpoch(1970, 1, 1, 0, 0, 0);

// What an operator may write as a zone: a relative name inside the database. cctz
// itself would also load absolute paths, "localtime" and "libc:" / "file:" names.
bool IsDatabaseName(std::string_view name) {
  if (name.empty() || name.front() == '/' || name == "localtime") return false;
  if (name.substr(0, 6) == "right/") return false;  // leap seconds: not civil time
  for (const char c : name) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                    (c >= '0' && c <= '9') || c == '/' || c == '_' || c == '-' || c == '+';
    if (!ok) return false;
  }
  std::size_t start = 0;
  while (start <= name.size()) {
    const std::size_t end = std::min(name.find('/', start), name.size());
    if (end == start) return false;  // "a//b" or a trailing '/'
    start = end + 1;
  }
  return true;
}

}  // namespace

const Zone* Zone::Find(std::string_view name) {
  if (!IsDatabaseName(name)) return nullptr;
  // Loaded zones are never freed: Schedules and callers keep raw pointers to them.
  static std::mutex mu;
  static auto* const zones = new std::map<std::string, std::unique_ptr<Zone>, std::less<>>;
  std::lock_guard<std::mutex> lock(mu);
  if (const auto it = zones->find(name); it != zones->end()) return it->second.get();
  absl::TimeZone tz;
  if (!absl::LoadTimeZone(absl::string_view(name.data(), name.size()), &tz)) return nullptr;
  auto zone = std::make_unique<Zone>(std::string(name), tz);
  const Zone* out = zone.get();
  zones->emplace(std::string(name), std::move(zone));
  return out;
}

std::int32_t Zone::OffsetAt(std::int64_t t) const {
  return tz_.At(absl::FromUnixSeconds(t)).offset;
}

// cctz reports a transition as two civil times: `from`, the wall time at the
// transition under the old offset, and `to`, the same instant under the new one. So
// the instant is from − old offset, and the new offset is the old one plus (to − from).
std::optional<ZoneTransition> Zone::NextTransition(std::int64_t t, std::int32_t offset) const {
  absl::TimeZone::CivilTransition tr;
  if (!tz_.NextTransition(absl::FromUnixSeconds(t), &tr)) return std::nullopt;
  const std::int64_t at = (tr.from - kUnixEpoch) - offset;
  return ZoneTransition{at, offset, static_cast<std::int32_t>(offset + (tr.to - tr.from))};
}

std::optional<ZoneTransition> Zone::LastTransitionAtOrBefore(std::int64_t t,
                                                             std::int32_t offset) const {
  absl::TimeZone::CivilTransition tr;
  // PrevTransition(x) is the last transition strictly before x.
  if (!tz_.PrevTransition(absl::FromUnixSeconds(t + 1), &tr)) return std::nullopt;
  const std::int64_t at = (tr.to - kUnixEpoch) - offset;
  return ZoneTransition{at, static_cast<std::int32_t>(offset - (tr.to - tr.from)), offset};
}

}  // namespace tickd::cron
