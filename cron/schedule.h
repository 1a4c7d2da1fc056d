// The cron engine's public API: parse an expression once, then ask for the next
// (or previous) firing instant as often as needed. Pure: no I/O except reading the
// system tz database (cron/zone.h) when a Schedule is parsed.
//
// Every replica computes the same instants from (expression, options, tzdb); the
// daemon's scheduler and `tickd next` both go through Schedule::Next.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace tickd::cron {

class Zone;  // cron/zone.h

// Instants are UTC, second precision.
using Instant = std::chrono::sys_seconds;

enum class Dialect {
  kCron,    // 5, 6 (seconds first) or 7 (+year) fields; DOW 0-7; DOM/DOW OR
  kQuartz,  // 6 or 7 fields; DOW 1-7 (1 = SUN); exactly one of DOM/DOW is '?'
  kSpring,  // exactly 6 fields; DOW 0-7; DOM/DOW AND
};

// What to do with a fixed-time firing whose wall time a spring-forward gap skips.
enum class DstGap {
  kRun,   // fire once at the first instant after the gap (Vixie cron) — default
  kSkip,  // skip that day (Quartz)
};

// What to do with a wall time that a fall-back overlap repeats.
enum class DstOverlap {
  kAuto,   // every-hour schedules fire in both passes, fixed-time ones once (first)
  kFirst,  // always only the first occurrence
  kBoth,   // always both occurrences
};

struct ScheduleOptions {
  Dialect dialect = Dialect::kCron;
  std::string timezone = "UTC";  // IANA name from the system tz database
  DstGap dst_gap = DstGap::kRun;
  DstOverlap dst_overlap = DstOverlap::kAuto;
  // What `H` hashes (docs/design.md §2): the job's name, the same on every replica.
  // Empty: an expression with `H` does not parse.
  std::string job_name;
};

// A parse failure. `message` is the whole line to show a user, e.g.
//   "61 * * * *: field 1 (minute) at column 1: 61 is out of range 0-59"
// field == 0 when the error is not about one field (wrong field count, unknown
// zone, an expression that can never fire); column is 1-based, 0 when unknown.
struct ParseError {
  std::string message;
  int field = 0;
  std::string field_name;
  int column = 0;
};

class Schedule {
 public:
  // Parses `expr` in `options.dialect` and resolves `options.timezone`.
  // An expression that can never fire (e.g. "0 0 30 2 *") is an error; one whose
  // last firing is already in the past (a year field) parses and reports it in
  // warnings() when asked with WarningsAt().
  static tl::expected<Schedule, ParseError> Parse(std::string_view expr,
                                                  const ScheduleOptions& options = {});

  // The first firing strictly after `after`, or nullopt when there is none before
  // the horizon (the end of year 2199). Cheap: no allocation; zones with a fixed
  // offset (UTC, Asia/Tokyo, …) never touch tzdb, others do two or three lookups plus
  // one per UTC-offset change crossed. Thread-safe (const). @every schedules are pure
  // real time (multiples of the period since the epoch): DST options do not apply.
  std::optional<Instant> Next(Instant after) const;
  // The last firing strictly before `before`, or nullopt (none since 1970).
  std::optional<Instant> Prev(Instant before) const;

  // Warnings about an expression that parses but may surprise: e.g. its last
  // firing is already past at `now`. Empty when there is nothing to say.
  std::vector<std::string> WarningsAt(Instant now) const;

  const std::string& expression() const;
  const ScheduleOptions& options() const;
  const Zone* zone() const;
  // True for "every-hour" schedules (hour field unrestricted, and @every): they mean
  // real elapsed time under the DST policy. False for fixed-time schedules.
  bool every_hour() const;
  // For @every schedules, the period; otherwise nullopt.
  std::optional<std::chrono::seconds> every() const;

  Schedule(const Schedule&);
  Schedule& operator=(const Schedule&);
  Schedule(Schedule&&) noexcept;
  Schedule& operator=(Schedule&&) noexcept;
  ~Schedule();

  struct Impl;  // defined in schedule.cc

 private:
  explicit Schedule(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The jitter offset of tick `tick` of the job `job_name` (docs/design.md §2): the run
// of tick T is due at T + this, in [0, jitter). FNV-1a 64 of "<job name>@<T in unix
// milliseconds>" modulo jitter in milliseconds, so every replica computes the same
// instant and the offset changes from tick to tick. 0 when jitter <= 0.
std::chrono::milliseconds JitterOffset(std::string_view job_name, Instant tick,
                                       std::chrono::milliseconds jitter);

// Dialect / DST option names as written in job files and on the command line.
std::optional<Dialect> DialectFromName(std::string_view name);   // cron|quartz|spring
std::optional<DstGap> DstGapFromName(std::string_view name);     // run|skip
std::optional<DstOverlap> DstOverlapFromName(std::string_view name);  // auto|first|both
std::string_view DialectName(Dialect d);

// Resolves an IANA zone name; nullptr when the system tz database has no such zone.
const Zone* FindZone(std::string_view name);

// RFC 3339 with the zone's UTC offset at that instant: "2026-03-29T03:00:00+02:00";
// UTC is written "+00:00" when `zone` is given, "Z" when zone == nullptr.
std::string FormatRfc3339(Instant t, const Zone* zone);
// Parses RFC 3339 ("2026-03-29T01:30:00Z", "...+02:00", fractional seconds truncated).
Result<Instant> ParseRfc3339(std::string_view text);

}  // namespace tickd::cron
