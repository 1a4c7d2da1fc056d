// An IANA time zone of the system tz database, read through Abseil's time library
// (its cctz core). cctz follows each zone file's footer — the POSIX TZ rule that
// continues the listed transitions past their last year — so offsets stay right
// through the 2199 horizon (New York is -04:00 in July 2040, not -05:00).
//
// Instants are Unix seconds; offsets are seconds east of UTC. The DST policy that maps
// wall times to instants is not here: it lives in schedule.cc, on top of this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <absl/time/time.h>

namespace tickd::cron {

// A change of the UTC offset. Transitions that only change the abbreviation or the
// DST flag are reported too, with offset_before == offset_after.
struct ZoneTransition {
  std::int64_t at;             // the first instant (Unix seconds) of the new offset
  std::int32_t offset_before;  // seconds east of UTC just before `at`
  std::int32_t offset_after;   // seconds east of UTC from `at` on
};

// Immutable once loaded, so every method is thread-safe.
class Zone {
 public:
  // The zone called `name` ("Europe/Berlin", "UTC", a backward link like "US/Eastern"),
  // or nullptr when the system database has no such zone. Only database names are
  // accepted: not a path ("/etc/localtime", "../x"), not "localtime", not the
  // leap-second "right/" variants. A zone is loaded once and lives as long as the
  // process, so the pointer never dangles. Thread-safe.
  static const Zone* Find(std::string_view name);

  const std::string& name() const { return name_; }

  // The UTC offset in force at instant `t`.
  std::int32_t OffsetAt(std::int64_t t) const;

  // The first transition strictly after `t`, or nullopt when the zone has none.
  // REQUIRES: offset == OffsetAt(t) (the caller always has it; it saves a lookup).
  std::optional<ZoneTransition> NextTransition(std::int64_t t, std::int32_t offset) const;
  // The last transition at or before `t`, or nullopt when the zone has none.
  // REQUIRES: offset == OffsetAt(t).
  std::optional<ZoneTransition> LastTransitionAtOrBefore(std::int64_t t,
                                                         std::int32_t offset) const;

  Zone(std::string name, absl::TimeZone tz) : name_(std::move(name)), tz_(tz) {}

 private:
  std::string name_;
  absl::TimeZone tz_;
};

}  // namespace tickd::cron
