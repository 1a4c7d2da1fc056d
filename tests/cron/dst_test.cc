// DST policy of docs/design.md §2, with explicit expected instants (not any peer's choice):
// every-hour schedules follow real time (nothing owed in a gap, both overlap passes);
// fixed-time schedules fire once at the end of a gap and once (first) in an overlap;
// dst_gap=skip and dst_overlap=first|both override. Every chain is also walked back
// with Prev, which must retrace it exactly.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cron/schedule.h"

namespace tickd::cron {
namespace {

using V = std::vector<std::string>;

struct Case {
  std::string expr;
  std::string tz;
  DstGap gap = DstGap::kRun;
  DstOverlap overlap = DstOverlap::kAuto;
};

V Next(const Case& c, std::string_view from, int n) {
  ScheduleOptions o;
  o.timezone = c.tz;
  o.dst_gap = c.gap;
  o.dst_overlap = c.overlap;
  auto s = Schedule::Parse(c.expr, o);
  REQUIRE(s);
  V out;
  std::vector<Instant> instants;
  Instant at = *ParseRfc3339(from);
  for (int i = 0; i < n; ++i) {
    auto next = s->Next(at);
    if (!next) break;
    REQUIRE(*next > at);
    instants.push_back(*next);
    out.push_back(FormatRfc3339(*next, s->zone()));
    at = *next;
  }
  // Prev retraces the chain: each firing's predecessor is the one before it.
  for (std::size_t i = 1; i < instants.size(); ++i) {
    INFO(c.expr << " in " << c.tz << ": prev of " << out[i]);
    auto prev = s->Prev(instants[i]);
    REQUIRE(prev);
    CHECK(FormatRfc3339(*prev, s->zone()) == out[i - 1]);
  }
  return out;
}

constexpr const char* kNy = "America/New_York";
constexpr const char* kBerlin = "Europe/Berlin";
constexpr const char* kLordHowe = "Australia/Lord_Howe";
constexpr const char* kSaoPaulo = "America/Sao_Paulo";

}  // namespace

TEST_CASE("New York 2021 spring forward (02:00 -> 03:00)", "[cron][dst]") {
  // Fixed time in the gap: once at 03:00, the first instant after it.
  CHECK(Next({"30 2 * * *", kNy}, "2021-03-14T00:00:00-05:00", 3) ==
        V{"2021-03-14T03:00:00-04:00", "2021-03-15T02:30:00-04:00", "2021-03-16T02:30:00-04:00"});
  CHECK(Next({"0 2 * * *", kNy}, "2021-03-14T00:00:00-05:00", 2) ==
        V{"2021-03-14T03:00:00-04:00", "2021-03-15T02:00:00-04:00"});
  // Several times in one gap collapse into one firing; 03:00 itself is that instant.
  CHECK(Next({"0,15,45 2 * * *", kNy}, "2021-03-14T00:00:00-05:00", 2) ==
        V{"2021-03-14T03:00:00-04:00", "2021-03-15T02:00:00-04:00"});
  CHECK(Next({"0 1-3 * * *", kNy}, "2021-03-14T00:00:00-05:00", 4) ==
        V{"2021-03-14T01:00:00-05:00", "2021-03-14T03:00:00-04:00", "2021-03-15T01:00:00-04:00",
          "2021-03-15T02:00:00-04:00"});
  CHECK(Next({"0 3 * * *", kNy}, "2021-03-14T00:00:00-05:00", 2) ==
        V{"2021-03-14T03:00:00-04:00", "2021-03-15T03:00:00-04:00"});
  // dst_gap=skip: that day is skipped (Quartz).
  CHECK(Next({"30 2 * * *", kNy, DstGap::kSkip}, "2021-03-14T00:00:00-05:00", 2) ==
        V{"2021-03-15T02:30:00-04:00", "2021-03-16T02:30:00-04:00"});
  // Every-hour schedules owe nothing for the missing hour, whatever dst_gap says.
  CHECK(Next({"30 * * * *", kNy}, "2021-03-14T00:00:00-05:00", 4) ==
        V{"2021-03-14T00:30:00-05:00", "2021-03-14T01:30:00-05:00", "2021-03-14T03:30:00-04:00",
          "2021-03-14T04:30:00-04:00"});
  CHECK(Next({"*/20 * * * *", kNy}, "2021-03-14T01:00:00-05:00", 4) ==
        V{"2021-03-14T01:20:00-05:00", "2021-03-14T01:40:00-05:00", "2021-03-14T03:00:00-04:00",
          "2021-03-14T03:20:00-04:00"});
}

TEST_CASE("New York 2021 fall back (02:00 -> 01:00)", "[cron][dst]") {
  // Fixed time in the overlap: once, at its first occurrence.
  CHECK(Next({"30 1 * * *", kNy}, "2021-11-07T00:00:00-04:00", 2) ==
        V{"2021-11-07T01:30:00-04:00", "2021-11-08T01:30:00-05:00"});
  CHECK(Next({"0 1 * * *", kNy}, "2021-11-07T00:00:00-04:00", 2) ==
        V{"2021-11-07T01:00:00-04:00", "2021-11-08T01:00:00-05:00"});
  CHECK(Next({"0 2 * * *", kNy}, "2021-11-07T00:00:00-04:00", 2) ==
        V{"2021-11-07T02:00:00-05:00", "2021-11-08T02:00:00-05:00"});
  // Starting inside either pass after 01:30 EDT fired: nothing more that day.
  CHECK(Next({"30 1 * * *", kNy}, "2021-11-07T01:40:00-04:00", 1) ==
        V{"2021-11-08T01:30:00-05:00"});
  CHECK(Next({"30 1 * * *", kNy}, "2021-11-07T01:10:00-05:00", 1) ==
        V{"2021-11-08T01:30:00-05:00"});
  // dst_overlap=both: both passes.
  CHECK(Next({"30 1 * * *", kNy, DstGap::kRun, DstOverlap::kBoth}, "2021-11-07T00:00:00-04:00",
             3) == V{"2021-11-07T01:30:00-04:00", "2021-11-07T01:30:00-05:00",
                     "2021-11-08T01:30:00-05:00"});
  CHECK(Next({"30 1 * * *", kNy, DstGap::kRun, DstOverlap::kBoth}, "2021-11-07T01:10:00-05:00",
             1) == V{"2021-11-07T01:30:00-05:00"});
  // Every-hour schedules fire in both passes...
  CHECK(Next({"30 * * * *", kNy}, "2021-11-07T00:00:00-04:00", 4) ==
        V{"2021-11-07T00:30:00-04:00", "2021-11-07T01:30:00-04:00", "2021-11-07T01:30:00-05:00",
          "2021-11-07T02:30:00-05:00"});
  CHECK(Next({"*/20 * * * *", kNy}, "2021-11-07T00:50:00-04:00", 5) ==
        V{"2021-11-07T01:00:00-04:00", "2021-11-07T01:20:00-04:00", "2021-11-07T01:40:00-04:00",
          "2021-11-07T01:00:00-05:00", "2021-11-07T01:20:00-05:00"});
  // ...unless dst_overlap=first forces one pass.
  CHECK(Next({"*/20 * * * *", kNy, DstGap::kRun, DstOverlap::kFirst},
             "2021-11-07T01:30:00-04:00", 3) ==
        V{"2021-11-07T01:40:00-04:00", "2021-11-07T02:00:00-05:00", "2021-11-07T02:20:00-05:00"});
  CHECK(Next({"*/20 * * * *", kNy, DstGap::kRun, DstOverlap::kFirst},
             "2021-11-07T01:05:00-05:00", 1) == V{"2021-11-07T02:00:00-05:00"});
}

// Regression: the date library read only the transitions a zone file lists (to 2037)
// and ignored the footer rule that continues them, so every DST zone sat on standard
// time from 2038 on: New York printed 12:00-05:00 for July 2040.
TEST_CASE("past 2037 the zone's footer rule still applies", "[cron][dst]") {
  CHECK(Next({"0 12 * * *", kNy}, "2040-07-01T00:00:00Z", 1) == V{"2040-07-01T12:00:00-04:00"});
  CHECK(Next({"0 12 * * *", "Europe/London"}, "2045-07-01T00:00:00Z", 1) ==
        V{"2045-07-01T12:00:00+01:00"});
  // 2100: spring forward on March 14, fall back on November 7 (second Sunday of
  // March, first of November), with the policy applied as in 2021.
  CHECK(Next({"30 2 * * *", kNy}, "2100-03-13T12:00:00-05:00", 3) ==
        V{"2100-03-14T03:00:00-04:00", "2100-03-15T02:30:00-04:00", "2100-03-16T02:30:00-04:00"});
  CHECK(Next({"30 1 * * *", kNy}, "2100-11-07T00:00:00-04:00", 2) ==
        V{"2100-11-07T01:30:00-04:00", "2100-11-08T01:30:00-05:00"});
  CHECK(Next({"30 * * * *", kNy}, "2100-11-07T00:00:00-04:00", 4) ==
        V{"2100-11-07T00:30:00-04:00", "2100-11-07T01:30:00-04:00", "2100-11-07T01:30:00-05:00",
          "2100-11-07T02:30:00-05:00"});
  // The horizon's last year still has its DST.
  CHECK(Next({"0 12 1 7 *", kBerlin}, "2199-01-01T00:00:00Z", 1) == V{"2199-07-01T12:00:00+02:00"});
}

TEST_CASE("Berlin 2026", "[cron][dst]") {
  CHECK(Next({"30 2 * * *", kBerlin}, "2026-03-28T12:00:00+01:00", 3) ==
        V{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00"});
  CHECK(Next({"30 2 * * *", kBerlin, DstGap::kSkip}, "2026-03-28T12:00:00+01:00", 1) ==
        V{"2026-03-30T02:30:00+02:00"});
  CHECK(Next({"30 2 * * *", kBerlin}, "2026-10-24T12:00:00+02:00", 2) ==
        V{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"});
  CHECK(Next({"30 2 * * *", kBerlin, DstGap::kRun, DstOverlap::kBoth},
             "2026-10-24T12:00:00+02:00", 2) ==
        V{"2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00"});
  CHECK(Next({"0 * * * *", kBerlin}, "2026-10-25T01:30:00+02:00", 3) ==
        V{"2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00"});
  CHECK(Next({"0 * * * *", kBerlin}, "2026-03-29T01:30:00+01:00", 2) ==
        V{"2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"});
  // @every is pure real time: no wall clock involved.
  CHECK(Next({"@every 1h", kBerlin}, "2026-10-25T01:30:00+02:00", 3) ==
        V{"2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00"});
}

TEST_CASE("Lord Howe: 30-minute shifts", "[cron][dst]") {
  // 2021-10-03: 02:00 +10:30 -> 02:30 +11:00.
  CHECK(Next({"15 2 * * *", kLordHowe}, "2021-10-03T00:00:00+10:30", 2) ==
        V{"2021-10-03T02:30:00+11:00", "2021-10-04T02:15:00+11:00"});
  CHECK(Next({"15 2 * * *", kLordHowe, DstGap::kSkip}, "2021-10-03T00:00:00+10:30", 1) ==
        V{"2021-10-04T02:15:00+11:00"});
  CHECK(Next({"*/15 * * * *", kLordHowe}, "2021-10-03T01:40:00+10:30", 3) ==
        V{"2021-10-03T01:45:00+10:30", "2021-10-03T02:30:00+11:00", "2021-10-03T02:45:00+11:00"});
  // 2021-04-04: 02:00 +11:00 -> 01:30 +10:30.
  CHECK(Next({"45 1 * * *", kLordHowe}, "2021-04-04T00:00:00+11:00", 2) ==
        V{"2021-04-04T01:45:00+11:00", "2021-04-05T01:45:00+10:30"});
  CHECK(Next({"45 1 * * *", kLordHowe, DstGap::kRun, DstOverlap::kBoth},
             "2021-04-04T00:00:00+11:00", 2) ==
        V{"2021-04-04T01:45:00+11:00", "2021-04-04T01:45:00+10:30"});
  CHECK(Next({"*/15 * * * *", kLordHowe}, "2021-04-04T01:20:00+11:00", 5) ==
        V{"2021-04-04T01:30:00+11:00", "2021-04-04T01:45:00+11:00", "2021-04-04T01:30:00+10:30",
          "2021-04-04T01:45:00+10:30", "2021-04-04T02:00:00+10:30"});
}

TEST_CASE("Sao Paulo: midnight gap and a late-evening overlap", "[cron][dst]") {
  // 2018-11-04: 00:00 -03:00 -> 01:00 -02:00, so that day has no midnight.
  CHECK(Next({"0 0 * * *", kSaoPaulo}, "2018-11-03T12:00:00-03:00", 2) ==
        V{"2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00"});
  CHECK(Next({"30 0 * * *", kSaoPaulo}, "2018-11-03T12:00:00-03:00", 2) ==
        V{"2018-11-04T01:00:00-02:00", "2018-11-05T00:30:00-02:00"});
  CHECK(Next({"0 0 * * *", kSaoPaulo, DstGap::kSkip}, "2018-11-03T12:00:00-03:00", 1) ==
        V{"2018-11-05T00:00:00-02:00"});
  CHECK(Next({"@daily", kSaoPaulo}, "2018-11-03T12:00:00-03:00", 1) ==
        V{"2018-11-04T01:00:00-02:00"});
  CHECK(Next({"0 0 4 11 *", kSaoPaulo}, "2018-01-01T00:00:00-02:00", 1) ==
        V{"2018-11-04T01:00:00-02:00"});
  // 2019-02-17: 00:00 -02:00 -> 23:00 -03:00 on the 16th.
  CHECK(Next({"30 23 * * *", kSaoPaulo}, "2019-02-16T12:00:00-02:00", 2) ==
        V{"2019-02-16T23:30:00-02:00", "2019-02-17T23:30:00-03:00"});
  CHECK(Next({"30 23 * * *", kSaoPaulo, DstGap::kRun, DstOverlap::kBoth},
             "2019-02-16T12:00:00-02:00", 2) ==
        V{"2019-02-16T23:30:00-02:00", "2019-02-16T23:30:00-03:00"});
}

TEST_CASE("zones without DST take the fixed-offset path", "[cron][dst]") {
  CHECK(Next({"0 9 * * *", "Asia/Tokyo"}, "2026-01-01T00:00:00+09:00", 1) ==
        V{"2026-01-01T09:00:00+09:00"});
  CHECK(Next({"0 9 * * *", "Asia/Kolkata"}, "2026-01-01T09:00:00+05:30", 1) ==
        V{"2026-01-02T09:00:00+05:30"});
}

}  // namespace tickd::cron
