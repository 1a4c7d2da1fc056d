#include "cron/zone.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace tickd::cron {

namespace {

const absl::CivilSecond kUnixEpoch(1970, 1, 1, 0, 0, 0);
// The table's years: every schedule's search (1970 to the 2199 horizon, plus the days
// around its ends) stays inside.
const std::int64_t kTableBegin = absl::CivilSecond(1900, 1, 1, 0, 0, 0) - kUnixEpoch;
const std::int64_t kTableEnd = absl::CivilSecond(2300, 1, 1, 0, 0, 0) - kUnixEpoch;

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

// Whether the database has a file called `name` where cctz looks for it: under $TZDIR,
// else /usr/share/zoneinfo. Asked before cctz because cctz remembers every name it
// fails to load, for good: each distinct unknown name (a typo in a job file reloaded
// again and again; the fuzzer's millions) would otherwise hold memory until exit.
bool InDatabase(std::string_view name) {
  const char* tzdir = std::getenv("TZDIR");
  std::string path = (tzdir != nullptr && *tzdir != '\0') ? tzdir : "/usr/share/zoneinfo";
  path += '/';
  path += name;
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

const Zone* Zone::Find(std::string_view name) {
  if (!IsDatabaseName(name)) return nullptr;
  // Loaded zones are never freed: Schedules and callers keep raw pointers to them.
  static std::mutex mu;
  static auto* const zones = new std::map<std::string, std::unique_ptr<Zone>, std::less<>>;
  std::lock_guard<std::mutex> lock(mu);
  if (const auto it = zones->find(name); it != zones->end()) return it->second.get();
  if (!InDatabase(name)) return nullptr;
  absl::TimeZone tz;
  if (!absl::LoadTimeZone(absl::string_view(name.data(), name.size()), &tz)) return nullptr;
  auto zone = std::make_unique<Zone>(std::string(name), tz);
  const Zone* out = zone.get();
  zones->emplace(std::string(name), std::move(zone));
  return out;
}

Zone::Zone(std::string name, absl::TimeZone tz) : name_(std::move(name)), tz_(tz) {
  offset_at_table_begin_ = tz_.At(absl::FromUnixSeconds(kTableBegin)).offset;
  std::int64_t t = kTableBegin;
  while (const auto next = CctzNext(t)) {
    if (next->at >= kTableEnd) break;
    if (next->offset_after != next->offset_before) {
      change_at_.push_back(next->at);
      offset_from_.push_back(next->offset_after);
    }
    t = next->at;
  }
}

std::int32_t Zone::OffsetAt(std::int64_t t) const {
  if (t < kTableBegin || t >= kTableEnd) return tz_.At(absl::FromUnixSeconds(t)).offset;
  const auto it = std::upper_bound(change_at_.begin(), change_at_.end(), t);
  if (it == change_at_.begin()) return offset_at_table_begin_;
  return offset_from_[static_cast<std::size_t>(it - change_at_.begin()) - 1];
}

ZoneTransition Zone::Entry(std::size_t i) const {
  return {change_at_[i], i == 0 ? offset_at_table_begin_ : offset_from_[i - 1], offset_from_[i]};
}

std::optional<ZoneTransition> Zone::NextTransition(std::int64_t t) const {
  if (t >= kTableBegin && t < kTableEnd) {
    const auto it = std::upper_bound(change_at_.begin(), change_at_.end(), t);
    if (it != change_at_.end()) return Entry(static_cast<std::size_t>(it - change_at_.begin()));
    t = kTableEnd - 1;  // none left in the table: ask cctz about the years after it
  }
  for (auto next = CctzNext(t); next; next = CctzNext(next->at)) {
    if (next->offset_after != next->offset_before) return next;
  }
  return std::nullopt;
}

std::optional<ZoneTransition> Zone::LastTransitionAtOrBefore(std::int64_t t) const {
  if (t >= kTableBegin && t < kTableEnd) {
    const auto it = std::upper_bound(change_at_.begin(), change_at_.end(), t);
    if (it != change_at_.begin()) {
      return Entry(static_cast<std::size_t>(it - change_at_.begin()) - 1);
    }
    t = kTableBegin - 1;  // none in the table: ask cctz about the years before it
  }
  for (auto last = CctzLastAtOrBefore(t); last; last = CctzLastAtOrBefore(last->at - 1)) {
    if (last->offset_after != last->offset_before) return last;
  }
  return std::nullopt;
}

// cctz reports a transition as two civil times: `from`, the wall time at the
// transition under the old offset, and `to`, the same instant under the new one. So
// the instant is from − old offset (or to − new offset), and to − from is the change.
std::optional<ZoneTransition> Zone::CctzNext(std::int64_t t) const {
  absl::TimeZone::CivilTransition tr;
  if (!tz_.NextTransition(absl::FromUnixSeconds(t), &tr)) return std::nullopt;
  const std::int32_t before = tz_.At(absl::FromUnixSeconds(t)).offset;
  return ZoneTransition{(tr.from - kUnixEpoch) - before, before,
                        static_cast<std::int32_t>(before + (tr.to - tr.from))};
}

std::optional<ZoneTransition> Zone::CctzLastAtOrBefore(std::int64_t t) const {
  absl::TimeZone::CivilTransition tr;
  // PrevTransition(x) is the last transition strictly before x.
  if (!tz_.PrevTransition(absl::FromUnixSeconds(t + 1), &tr)) return std::nullopt;
  const std::int32_t after = tz_.At(absl::FromUnixSeconds(t)).offset;
  return ZoneTransition{(tr.to - kUnixEpoch) - after,
                        static_cast<std::int32_t>(after - (tr.to - tr.from)), after};
}

}  // namespace tickd::cron
