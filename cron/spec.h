// The compiled form of a cron expression (internal to cron/): one bitset per field,
// plus the day-of-month / day-of-week specials, and the civil-time search over it.
//
// Everything here works on *local civil time* counted as seconds since 1970-01-01T00:00
// (the wall clock read as if it were UTC): the zone and DST policy live in schedule.cc.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>

namespace tickd::cron::internal {

inline constexpr int kMinYear = 1970;
inline constexpr int kMaxYear = 2199;  // the horizon: no firing after the end of this year

// How day-of-month and day-of-week combine when both are restricted.
enum class DayRule {
  kOr,   // cron: a day matches when either field matches
  kAnd,  // spring: both must match (quartz: one side is always '?', so AND too)
};

struct Spec {
  std::uint64_t seconds = 0;  // bit s, 0-59
  std::uint64_t minutes = 0;  // bit m, 0-59
  std::uint64_t hours = 0;    // bit h, 0-23
  std::uint64_t months = 0;   // bit m, 1-12
  std::array<std::uint64_t, 4> years{};  // bit (y - kMinYear), kMinYear..kMaxYear

  // Day of month. `dom` holds plain days (bits 1-31); the specials are evaluated per
  // month because they depend on its length and on the weekday of its first day.
  std::uint64_t dom = 0;
  std::uint32_t dom_last = 0;          // bit n: the n-th day before the last (L = bit 0)
  std::uint32_t dom_last_weekday = 0;  // bit n: weekday nearest to (last - n) (LW = bit 0)
  std::uint64_t dom_nearest = 0;       // bit n (1-31): weekday nearest to day n (nW)

  // Day of week, 0 = Sunday … 6 = Saturday whatever the dialect's numbering.
  std::uint32_t dow = 0;
  std::uint32_t dow_last = 0;  // bit x: last weekday x of the month (xL)
  std::uint64_t dow_nth = 0;   // bit (n-1)*7 + x: n-th weekday x of the month (x#n)

  bool dom_star = true;  // day of month unrestricted (`*` or `?`)
  bool dow_star = true;  // day of week unrestricted
  bool hour_star = true;  // hour field is `*` / `?`: an "every-hour" schedule
  bool has_year = false;  // a year field was written (and is not `*`)
  bool dom_specials = false;
  bool dow_specials = false;
  DayRule rule = DayRule::kOr;
  // dow_pattern[w] = bits 1..31 of the days whose weekday is in `dow` in a month whose
  // first day has weekday w. Precomputed so a month's mask is one load.
  std::array<std::uint64_t, 7> dow_pattern{};

  // @every: period in seconds (> 0); the fields above are then unused.
  std::int64_t every_seconds = 0;

  // Fills dow_pattern from dow; call once after the fields are set.
  void Finish();

  // Bits 1..31: the days of month (y, m) that match the day fields.
  std::uint64_t DayMask(int y, unsigned m) const;

  bool HasYear(int y) const {
    return y >= kMinYear && y <= kMaxYear &&
           ((years[static_cast<unsigned>(y - kMinYear) / 64] >>
             (static_cast<unsigned>(y - kMinYear) % 64)) & 1u);
  }
  // The first year >= y (<= y for Prev) in the field, or nullopt.
  std::optional<int> YearAtOrAfter(int y) const;
  std::optional<int> YearAtOrBefore(int y) const;

  // Smallest matching local time strictly after `t` (seconds since 1970-01-01 local),
  // nullopt past the end of kMaxYear. Never scans: it jumps field by field.
  std::optional<std::int64_t> NextLocal(std::int64_t t) const;
  // Largest matching local time strictly before `t`, nullopt before kMinYear.
  std::optional<std::int64_t> PrevLocal(std::int64_t t) const;
};

// Civil-date helpers (Howard Hinnant's algorithms), exact for the proleptic Gregorian
// calendar.
constexpr std::int64_t DaysFromCivil(int y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct CivilDay {
  int y;
  unsigned m;
  unsigned d;
};

constexpr CivilDay CivilFromDays(std::int64_t z) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {static_cast<int>(yoe + era * 400) + (m <= 2), m, d};
}

constexpr bool IsLeap(int y) { return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0); }

constexpr unsigned DaysInMonth(int y, unsigned m) {
  constexpr unsigned char kDays[] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m];
}

// 0 = Sunday.
constexpr unsigned WeekdayFromDays(std::int64_t z) {
  return static_cast<unsigned>(z >= -4 ? (z + 4) % 7 : (z + 5) % 7 + 6);
}

}  // namespace tickd::cron::internal
