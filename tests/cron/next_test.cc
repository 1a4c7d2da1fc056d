// Next / Prev in UTC: the field-jumping search, specials, horizon, @every.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cron/schedule.h"

namespace tickd::cron {
namespace {

Instant T(std::string_view rfc3339) { return *ParseRfc3339(rfc3339); }

// The first `n` firings strictly after `from`, formatted in UTC ("...Z").
std::vector<std::string> NextN(std::string_view expr, std::string_view from, int n,
                               Dialect d = Dialect::kCron) {
  ScheduleOptions o;
  o.dialect = d;
  auto s = Schedule::Parse(expr, o);
  REQUIRE(s);
  std::vector<std::string> out;
  Instant at = T(from);
  for (int i = 0; i < n; ++i) {
    auto next = s->Next(at);
    if (!next) break;
    out.push_back(FormatRfc3339(*next, nullptr));
    at = *next;
  }
  return out;
}

std::vector<std::string> PrevN(std::string_view expr, std::string_view from, int n,
                               Dialect d = Dialect::kCron) {
  ScheduleOptions o;
  o.dialect = d;
  auto s = Schedule::Parse(expr, o);
  REQUIRE(s);
  std::vector<std::string> out;
  Instant at = T(from);
  for (int i = 0; i < n; ++i) {
    auto prev = s->Prev(at);
    if (!prev) break;
    out.push_back(FormatRfc3339(*prev, nullptr));
    at = *prev;
  }
  return out;
}

using V = std::vector<std::string>;

}  // namespace

TEST_CASE("next is strictly after and jumps across fields", "[cron][next]") {
  CHECK(NextN("*/5 * * * *", "2026-01-01T00:00:00Z", 3) ==
        V{"2026-01-01T00:05:00Z", "2026-01-01T00:10:00Z", "2026-01-01T00:15:00Z"});
  CHECK(NextN("*/5 * * * *", "2026-01-01T00:04:59Z", 1) == V{"2026-01-01T00:05:00Z"});
  CHECK(NextN("30 2 * * *", "2026-12-31T03:00:00Z", 2) ==
        V{"2027-01-01T02:30:00Z", "2027-01-02T02:30:00Z"});
  CHECK(NextN("0 0 12 * * MON-FRI", "2026-11-20T12:00:00Z", 2) ==
        V{"2026-11-23T12:00:00Z", "2026-11-24T12:00:00Z"});
  CHECK(NextN("*/7 13 1-4 * * *", "2026-01-04T13:59:58Z", 1) == V{"2026-01-05T01:13:00Z"});
}

TEST_CASE("February 29 and year ranges", "[cron][next]") {
  CHECK(NextN("0 0 29 2 *", "2097-01-01T00:00:00Z", 2) ==
        V{"2104-02-29T00:00:00Z", "2108-02-29T00:00:00Z"});
  CHECK(NextN("0 0 0 1 1 * 2150-2152", "2026-05-05T00:00:00Z", 4) ==
        V{"2150-01-01T00:00:00Z", "2151-01-01T00:00:00Z", "2152-01-01T00:00:00Z"});
  CHECK(PrevN("0 0 29 2 *", "2104-01-01T00:00:00Z", 1) == V{"2096-02-29T00:00:00Z"});
}

TEST_CASE("day-of-month and day-of-week: OR in cron, AND in spring", "[cron][next]") {
  // 2021-02: the 15th is a Monday; Mondays are 1, 8, 15, 22.
  CHECK(NextN("0 0 15 * MON", "2021-01-31T00:00:00Z", 4) ==
        V{"2021-02-01T00:00:00Z", "2021-02-08T00:00:00Z", "2021-02-15T00:00:00Z",
          "2021-02-22T00:00:00Z"});
  CHECK(NextN("0 0 0 15 * MON", "2021-01-31T00:00:00Z", 3, Dialect::kSpring) ==
        V{"2021-02-15T00:00:00Z", "2021-03-15T00:00:00Z", "2021-11-15T00:00:00Z"});
  // '*/1' is restricted (only '*' and '?' are not), so OR applies.
  CHECK(NextN("0 0 */1 * MON", "2021-02-01T00:00:00Z", 1) == V{"2021-02-02T00:00:00Z"});
  CHECK(NextN("0 0 ? * MON", "2021-02-01T00:00:00Z", 1) == V{"2021-02-08T00:00:00Z"});
}

TEST_CASE("L, L-n, W, LW, xL, #n", "[cron][next]") {
  CHECK(NextN("0 0 L * *", "2024-01-31T00:00:00Z", 2) ==
        V{"2024-02-29T00:00:00Z", "2024-03-31T00:00:00Z"});
  CHECK(NextN("0 0 L-2 * *", "2023-02-01T00:00:00Z", 1) == V{"2023-02-26T00:00:00Z"});
  // 2022-01-01 is a Saturday: 1W is Monday the 3rd; 2022-07-31 is a Sunday: LW is the 29th.
  CHECK(NextN("0 0 1W * *", "2021-12-31T00:00:00Z", 1) == V{"2022-01-03T00:00:00Z"});
  CHECK(NextN("0 0 LW * *", "2022-07-01T00:00:00Z", 1) == V{"2022-07-29T00:00:00Z"});
  // 31W does not fire in 30-day months.
  CHECK(NextN("0 0 31W * *", "2021-04-01T00:00:00Z", 2) ==
        V{"2021-05-31T00:00:00Z", "2021-07-30T00:00:00Z"});
  CHECK(NextN("0 0 * * 5L", "2026-01-01T00:00:00Z", 2) ==
        V{"2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z"});
  CHECK(NextN("0 0 0 ? * 5L", "2026-01-01T00:00:00Z", 1, Dialect::kQuartz) ==
        V{"2026-01-29T00:00:00Z"});  // Quartz 5 = Thursday
  CHECK(NextN("0 0 * * 5#2", "2026-01-01T00:00:00Z", 2) ==
        V{"2026-01-09T00:00:00Z", "2026-02-13T00:00:00Z"});
  CHECK(NextN("0 0 0 ? * 6#2", "2026-01-01T00:00:00Z", 1, Dialect::kQuartz) ==
        V{"2026-01-09T00:00:00Z"});
  CHECK(NextN("0 0 0 ? * L", "2026-01-01T00:00:00Z", 1, Dialect::kQuartz) ==
        V{"2026-01-03T00:00:00Z"});  // "L" alone = Saturday
  CHECK(NextN("0 0 * * 1#5", "2026-01-01T00:00:00Z", 1) == V{"2026-03-30T00:00:00Z"});
}

TEST_CASE("horizon is the end of 2199", "[cron][next]") {
  CHECK(NextN("0 0 1 1 *", "2199-01-01T00:00:00Z", 2).empty());
  CHECK(NextN("59 23 31 12 *", "2199-12-31T23:58:00Z", 2) == V{"2199-12-31T23:59:00Z"});
  CHECK(NextN("0 0 0 1 1 * 2020", "2026-01-01T00:00:00Z", 1).empty());
  CHECK(PrevN("0 0 1 1 *", "1970-01-01T00:00:00Z", 1).empty());
  CHECK(PrevN("0 0 1 1 *", "2500-01-01T00:00:00Z", 1) == V{"2199-01-01T00:00:00Z"});
}

TEST_CASE("@every fires at multiples of its period since the epoch", "[cron][next]") {
  // 2026-01-01T00:00Z is 1767225600 s; the multiples of 660 s around it:
  CHECK(NextN("@every 11m", "2026-01-01T00:00:00Z", 2) ==
        V{"2026-01-01T00:05:00Z", "2026-01-01T00:16:00Z"});
  CHECK(PrevN("@every 11m", "2026-01-01T00:05:00Z", 1) == V{"2025-12-31T23:54:00Z"});
  CHECK(NextN("@every 1h", "2199-12-31T23:30:00Z", 1).empty());
}

TEST_CASE("prev is strictly before and mirrors next", "[cron][next]") {
  CHECK(PrevN("*/5 * * * *", "2026-01-01T00:00:00Z", 2) ==
        V{"2025-12-31T23:55:00Z", "2025-12-31T23:50:00Z"});
  CHECK(PrevN("0 0 L * *", "2024-03-31T00:00:00Z", 2) ==
        V{"2024-02-29T00:00:00Z", "2024-01-31T00:00:00Z"});
  CHECK(PrevN("0 30 23 ? * 6#3", "2026-05-01T00:00:00Z", 1, Dialect::kQuartz) ==
        V{"2026-04-17T23:30:00Z"});
}

TEST_CASE("macros", "[cron][next]") {
  CHECK(NextN("@yearly", "2026-05-01T00:00:00Z", 1) == V{"2027-01-01T00:00:00Z"});
  CHECK(NextN("@monthly", "2026-05-01T00:00:00Z", 1) == V{"2026-06-01T00:00:00Z"});
  CHECK(NextN("@weekly", "2026-05-01T00:00:00Z", 1) == V{"2026-05-03T00:00:00Z"});
  CHECK(NextN("@daily", "2026-05-01T00:00:00Z", 1) == V{"2026-05-02T00:00:00Z"});
  CHECK(NextN("@hourly", "2026-05-01T00:00:00Z", 1) == V{"2026-05-01T01:00:00Z"});
  CHECK(NextN("@daily", "2026-05-01T00:00:00Z", 1, Dialect::kQuartz) ==
        V{"2026-05-02T00:00:00Z"});
}

}  // namespace tickd::cron
