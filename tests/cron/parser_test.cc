// Parsing: dialect rules, error lines (field and column), macros, @every.
#include <catch2/catch.hpp>

#include <string>

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
  CHECK(ErrorOf("61 * * * *") == "61 * * * *: field 1 (minute) at column 1: 61 is out of range 0-59");
  CHECK(ErrorOf("* 24 * * *") == "* 24 * * *: field 2 (hour) at column 3: 24 is out of range 0-23");
  CHECK(ErrorOf("0 0 1,,2 * *") ==
        "0 0 1,,2 * *: field 3 (day-of-month) at column 7: empty list element");
  CHECK(ErrorOf("*/0 * * * *") == "*/0 * * * *: field 1 (minute) at column 3: step 0 is out of range 1-59");
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
