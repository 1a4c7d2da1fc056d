// Parsing: dialect rules, error lines (field and column), macros, @every.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "cron/schedule.h"

namespace tickd::cron {
namespace {

ScheduleOptions In(Dialect d) {
  ScheduleOptions o;
  o.dialect = d;
  return o;
}

std::string ErrorOf(std::string_view expr, Dialect d = Dialect::kCron) {
  auto s = Schedule::Parse(expr, In(d));
  if (s) return "(parsed)";
  return s.error().message;
}

bool Parses(std::string_view expr, Dialect d = Dialect::kCron) {
  return Schedule::Parse(expr, In(d)).has_value();
}

Instant T(std::string_view rfc3339) { return *ParseRfc3339(rfc3339); }

}  // namespace

TEST_CASE("error lines name the expression, field, column and reason", "[cron][parser]") {
  CHECK(ErrorOf("61 * * * *") ==
        "61 * * * *: field 1 (minute) at column 1: 61 is out of range 0-59");
  CHECK(ErrorOf("* 24 * * *") == "* 24 * * *: field 2 (hour) at column 3: 24 is out of range 0-23");
  CHECK(ErrorOf("0 0 1,,2 * *") ==
        "0 0 1,,2 * *: field 3 (day-of-month) at column 7: empty list element");
  CHECK(ErrorOf("*/0 * * * *") ==
        "*/0 * * * *: field 1 (minute) at column 3: step 0 is out of range 1-59");
  CHECK(ErrorOf("0 0 * FOO *") ==
        "0 0 * FOO *: field 4 (month) at column 7: 'FOO' is not a number or a name");
  CHECK(ErrorOf("0 0 * * 1-8") ==
        "0 0 * * 1-8: field 5 (day-of-week) at column 11: 8 is out of range 0-7");
  CHECK(ErrorOf("0 0 * *") == "0 0 * *: expected 5, 6 or 7 fields in the cron dialect, got 4");
  CHECK(ErrorOf("0 0 30 2 *") ==
        "0 0 30 2 *: never fires: no date between 1970 and 2199 matches the fields");

  auto e = Schedule::Parse("0 0 * * 5-2", {});
  REQUIRE_FALSE(e);
  CHECK(e.error().field == 5);
  CHECK(e.error().field_name == "day-of-week");
  CHECK(e.error().column == 9);
}

TEST_CASE("field counts per dialect", "[cron][parser]") {
  CHECK(Parses("* * * * *"));
  CHECK(Parses("* * * * * *"));
  CHECK(Parses("* * * * * * 2030"));
  CHECK_FALSE(Parses("* * * * * * * *"));
  CHECK_FALSE(Parses("* * * * ?", Dialect::kQuartz));
  CHECK(Parses("* * * * * ?", Dialect::kQuartz));
  CHECK(Parses("* * * ? * * 2030", Dialect::kQuartz));
  CHECK(Parses("* * * * * *", Dialect::kSpring));
  CHECK_FALSE(Parses("* * * * *", Dialect::kSpring));
  CHECK_FALSE(Parses("* * * * * * *", Dialect::kSpring));
  CHECK_FALSE(Parses(""));
  CHECK_FALSE(Parses("   "));
}

TEST_CASE("quartz needs '?' in exactly one day field and counts DOW from 1", "[cron][parser]") {
  CHECK_FALSE(Parses("0 0 * * * *", Dialect::kQuartz));
  CHECK_FALSE(Parses("0 0 0 ? * ?", Dialect::kQuartz));
  CHECK_FALSE(Parses("0 0 0 1 * 2", Dialect::kQuartz));
  CHECK(Parses("0 0 0 ? * 1-7", Dialect::kQuartz));
  CHECK_FALSE(Parses("0 0 0 ? * 0", Dialect::kQuartz));
  CHECK(Parses("0 0 0 ? * 0", Dialect::kSpring));
  CHECK(Parses("0 0 0 ? * 7", Dialect::kSpring));
  CHECK_FALSE(Parses("0/60 * * ? * *", Dialect::kQuartz));
  CHECK_FALSE(Parses("L 30 * * * ?", Dialect::kQuartz));
  CHECK_FALSE(Parses("0 0 0 ? * SAT,SUN,L", Dialect::kQuartz));
  CHECK_FALSE(Parses("0 0 0 ? * 2#1,6#3", Dialect::kQuartz));
  CHECK(Parses("0 15 10 L-1W,L-1 * ?", Dialect::kQuartz));
  CHECK(Parses("0 0 0 ? * THU#1,THU#3", Dialect::kSpring));
}

TEST_CASE("names, ranges, steps and specials", "[cron][parser]") {
  for (const char* ok :
       {"0 0 * jan-MAR mon-fri", "*/5 1-10/3 * * *", "5/15 * * * *", "0 0 L * *", "0 0 L-3 * *",
        "0 0 LW * *", "0 0 15W * *", "0 0 * * 5L", "0 0 * * FRI#2", "0 0 * * fri-sun",
        "0 0 ? * ?", "0 0 0 1 1 * 2199", "@yearly", "@annually", "@monthly", "@weekly",
        "@daily", "@midnight", "@hourly", "@every 90s", "@EVERY 1h30m", "0 0 1,L * *",
        "0 0 * * 1,5L", "0 0 * * MON#1,FRI#3", "0 0 * * 7-TUE"}) {
    INFO(ok);
    CHECK(Parses(ok));
  }
  for (const char* bad :
       {"0 0 * JANUARY *", "0 0 * * SUNDAY", "0 0 32W * *", "0 0 0W * *", "0 0 * * 5#6",
        "0 0 * * 5#0", "0 L * * *", "? * * * *",
        "* * ?,* * *", "/5 * * * *", "5- * * * *", "0 0 * * * 0 1969", "0 0 * * * 0 2200",
        "@reboot", "@every", "@every 0s", "@every 1500ms", "@every 5x", "@daily 3",
        "0 0 99999999999999999999 * *", "3-2 * * * *", "0 0 L/2 * *"}) {
    INFO(bad);
    CHECK_FALSE(Parses(bad));
  }
}

TEST_CASE("unknown zones are parse errors that name the zone", "[cron][parser]") {
  ScheduleOptions o;
  o.timezone = "Mars/Olympus";
  auto s = Schedule::Parse("* * * * *", o);
  REQUIRE_FALSE(s);
  CHECK(s.error().message.find("Mars/Olympus") != std::string::npos);
}

TEST_CASE("a past year field is a warning, not an error", "[cron][parser]") {
  auto s = Schedule::Parse("0 0 0 1 1 * 2020", {});
  REQUIRE(s);
  CHECK(s->WarningsAt(T("2019-06-01T00:00:00Z")).empty());
  const auto w = s->WarningsAt(T("2026-06-01T00:00:00Z"));
  REQUIRE(w.size() == 1);
  CHECK(w[0].find("2020-01-01T00:00:00+00:00") != std::string::npos);
  CHECK_FALSE(Schedule::Parse("0 0 29 2 * 0 2100", {}));  // 2100 is not a leap year
}

TEST_CASE("every-hour versus fixed-time", "[cron][parser]") {
  CHECK(Schedule::Parse("*/5 * * * *", {})->every_hour());
  CHECK(Schedule::Parse("@hourly", {})->every_hour());
  CHECK(Schedule::Parse("@every 5m", {})->every_hour());
  CHECK(Schedule::Parse("@every 5m", {})->every() == std::chrono::minutes(5));
  CHECK_FALSE(Schedule::Parse("0 */2 * * *", {})->every_hour());
  CHECK_FALSE(Schedule::Parse("@daily", {})->every_hour());
  CHECK_FALSE(Schedule::Parse("@daily", {})->every());
}

TEST_CASE("option names", "[cron][parser]") {
  CHECK(DialectFromName("quartz") == Dialect::kQuartz);
  CHECK_FALSE(DialectFromName("vixie"));
  CHECK(DialectName(Dialect::kSpring) == "spring");
  CHECK(DstGapFromName("skip") == DstGap::kSkip);
  CHECK_FALSE(DstGapFromName("later"));
  CHECK(DstOverlapFromName("both") == DstOverlap::kBoth);
  CHECK_FALSE(DstOverlapFromName("second"));
  CHECK(FindZone("Europe/Berlin") != nullptr);
  CHECK(FindZone("No/Such_Zone") == nullptr);
  CHECK(FindZone("") == nullptr);
}

TEST_CASE("RFC 3339 round trip", "[cron][parser]") {
  const Instant t = T("2026-03-29T01:30:00Z");
  CHECK(FormatRfc3339(t, nullptr) == "2026-03-29T01:30:00Z");
  CHECK(FormatRfc3339(t, FindZone("Europe/Berlin")) == "2026-03-29T03:30:00+02:00");
  CHECK(FormatRfc3339(t, FindZone("UTC")) == "2026-03-29T01:30:00+00:00");
  CHECK(T("2026-03-29T03:30:00.999+02:00") == t);
  CHECK(T("2021-11-07T01:30:00-05:00") == T("2021-11-07T06:30:00Z"));
  for (const char* bad : {"2026-02-30T00:00:00Z", "2026-03-29T24:00:00Z", "2026-03-29T01:30:00",
                          "2026-03-29", "2026-03-29T01:30:00+0200", "x", ""}) {
    INFO(bad);
    CHECK_FALSE(ParseRfc3339(bad));
  }
}

}  // namespace tickd::cron

namespace tickd::cron {
namespace {

// The schedule of `expr` for the job `job` (what `H` hashes).
Schedule ForJob(std::string_view expr, std::string job, Dialect d = Dialect::kCron) {
  ScheduleOptions o = In(d);
  o.job_name = std::move(job);
  auto s = Schedule::Parse(expr, o);
  INFO(expr << ": " << (s ? std::string() : s.error().message));
  REQUIRE(s);
  return *s;
}

std::string HashErrorOf(std::string_view expr, std::string job = "cleanup-orders") {
  ScheduleOptions o;
  o.job_name = std::move(job);
  auto s = Schedule::Parse(expr, o);
  return s ? "(parsed)" : s.error().message;
}

std::vector<std::string> NextN(const Schedule& s, std::string_view from, int n) {
  std::vector<std::string> out;
  Instant at = T(from);
  for (int i = 0; i < n; ++i) {
    auto next = s.Next(at);
    if (!next) break;
    out.push_back(FormatRfc3339(*next, nullptr));
    at = *next;
  }
  return out;
}

}  // namespace

// The values are pinned: h = FNV-1a 64 of "<job>:<field>" is a contract (docs/design.md
// §2) that other tools compute too, so a change here would move every job's ticks.
// FNV-1a 64 of "cleanup-orders:minute" = 8475557879997364115 (mod 60 = 35, mod 30 = 5).
TEST_CASE("H takes its value from a hash of the job name and the field", "[cron][parser][hash]") {
  const std::string from = "2026-01-01T00:00:00Z";
  CHECK(NextN(ForJob("H * * * *", "cleanup-orders"), from, 2) ==
        std::vector<std::string>{"2026-01-01T00:35:00Z", "2026-01-01T01:35:00Z"});
  CHECK(NextN(ForJob("H(0-29) 3 * * *", "cleanup-orders"), from, 1) ==
        std::vector<std::string>{"2026-01-01T03:05:00Z"});
  CHECK(NextN(ForJob("H/15 * * * *", "cleanup-orders"), from, 4) ==
        std::vector<std::string>{"2026-01-01T00:05:00Z", "2026-01-01T00:20:00Z",
                                 "2026-01-01T00:35:00Z", "2026-01-01T00:50:00Z"});
  // hour: "nightly-report:hour" mod 24 = 21, minute mod 60 = 47.
  CHECK(NextN(ForJob("H H * * *", "nightly-report"), from, 1) ==
        std::vector<std::string>{"2026-01-01T21:47:00Z"});
  // Seconds first (6 fields): second mod 60 = 3.
  CHECK(NextN(ForJob("H H * * * *", "cleanup-orders"), from, 1) ==
        std::vector<std::string>{"2026-01-01T00:35:03Z"});
  // Day of month spreads over 1-28 so that it fires every month: mod 28 = 24 → 25.
  CHECK(NextN(ForJob("0 0 H * *", "cleanup-orders"), from, 2) ==
        std::vector<std::string>{"2026-01-25T00:00:00Z", "2026-02-25T00:00:00Z"});
  // A range narrower than the step fires once in it.
  CHECK(NextN(ForJob("H(10-12)/30 0 * * *", "cleanup-orders"), from, 1).size() == 1);
  // Quartz and Spring take H in every field but the year.
  CHECK(NextN(ForJob("H H 4 ? * *", "cleanup-orders", Dialect::kQuartz), from, 1) ==
        std::vector<std::string>{"2026-01-01T04:35:03Z"});
  CHECK(NextN(ForJob("H H 4 * * *", "cleanup-orders", Dialect::kSpring), from, 1) ==
        std::vector<std::string>{"2026-01-01T04:35:03Z"});
  // `H` is a fixed hour, not "every hour".
  CHECK_FALSE(ForJob("0 H * * *", "cleanup-orders").every_hour());
}

TEST_CASE("H spreads jobs written alike over the field", "[cron][parser][hash]") {
  std::set<std::string> minutes;
  for (int i = 0; i < 100; ++i) {
    auto next = ForJob("H * * * *", "job-" + std::to_string(i)).Next(T("2026-01-01T00:00:00Z"));
    REQUIRE(next);
    minutes.insert(FormatRfc3339(*next, nullptr));
  }
  // 100 names over 60 minutes: a uniform hash leaves about 11 minutes empty.
  CHECK(minutes.size() >= 40);
  // Different fields of one job hash differently.
  CHECK(NextN(ForJob("H H * * *", "a"), "2026-01-01T00:00:00Z", 1) !=
        NextN(ForJob("H H * * *", "b"), "2026-01-01T00:00:00Z", 1));
}

TEST_CASE("H errors name the field and the column", "[cron][parser][hash]") {
  CHECK(HashErrorOf("H * * * *", "") ==
        "H * * * *: field 1 (minute) at column 1: 'H' needs a job name to hash (it is the job's "
        "name in a job file; give tickd next --job NAME)");
  CHECK(HashErrorOf("H,5 * * * *") ==
        "H,5 * * * *: field 1 (minute) at column 1: 'H' cannot be combined with other values in "
        "a list");
  CHECK(HashErrorOf("H(30-10) * * * *") ==
        "H(30-10) * * * *: field 1 (minute) at column 3: range 30-10 goes backwards (30 > 10)");
  CHECK(HashErrorOf("H/0 * * * *") ==
        "H/0 * * * *: field 1 (minute) at column 3: step 0 is out of range 1-59");
  CHECK(HashErrorOf("H/ * * * *") ==
        "H/ * * * *: field 1 (minute) at column 3: missing step after '/'");
  CHECK(HashErrorOf("0 H(0-24) * * *") ==
        "0 H(0-24) * * *: field 2 (hour) at column 7: 24 is out of range 0-23");
  CHECK(HashErrorOf("H(5) * * * *") ==
        "H(5) * * * *: field 1 (minute) at column 2: H( takes a range and a ')', e.g. H(0-29)");
  CHECK(HashErrorOf("H(0-5 * * * *") ==
        "H(0-5 * * * *: field 1 (minute) at column 2: H( takes a range and a ')', e.g. H(0-29)");
  CHECK(HashErrorOf("Hx * * * *") ==
        "Hx * * * *: field 1 (minute) at column 2: unexpected 'x' after H (H, H(a-b), H/n or "
        "H(a-b)/n)");
  CHECK(HashErrorOf("0 0 0 1 1 * H") ==
        "0 0 0 1 1 * H: field 7 (year) at column 13: 'H' is not allowed in the year field");
}

}  // namespace tickd::cron
