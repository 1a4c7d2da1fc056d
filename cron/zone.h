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
#include <vector>

#include <absl/time/time.h>

namespace tickd::cron {

// A change of the UTC offset (a transition that changes only the abbreviation or the
// DST flag is not one).
struct ZoneTransition {
  std::int64_t at;             // the first instant (Unix seconds) of the new offset
  std::int32_t offset_before;  // seconds east of UTC just before `at`
  std::int32_t offset_after;   // seconds east of UTC from `at` on
};

// Immutable once loaded, so every method is thread-safe. Every offset change between
// 1900 and 2300 is copied out of cctz into one sorted array when the zone loads, so a
// lookup in the years schedules use is one binary search over a few hundred instants;
// outside them, cctz answers directly.
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

  // The first change of offset strictly after `t`, or nullopt when there is none.
  std::optional<ZoneTransition> NextTransition(std::int64_t t) const;
  // The last change of offset at or before `t`, or nullopt when there is none.
  std::optional<ZoneTransition> LastTransitionAtOrBefore(std::int64_t t) const;

  Zone(std::string name, absl::TimeZone tz);

 private:
  // cctz's own answers, for instants outside the table.
  std::optional<ZoneTransition> CctzNext(std::int64_t t) const;
  std::optional<ZoneTransition> CctzLastAtOrBefore(std::int64_t t) const;
  ZoneTransition Entry(std::size_t i) const;

  std::string name_;
  absl::TimeZone tz_;
  std::int32_t offset_at_table_begin_ = 0;
  std::vector<std::int64_t> change_at_;      // ascending, inside the table's years
  std::vector<std::int32_t> offset_from_;    // offset_from_[i] holds from change_at_[i]
};

}  // namespace tickd::cron
