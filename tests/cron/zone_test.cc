// cron/zone.h: offsets and transitions from the system tz database through cctz,
// including the years that only a zone file's footer rule describes, and which names
// count as zones.
#include "cron/zone.h"

#include <malloc.h>

#include <cstddef>
#include <string>

#include <catch2/catch.hpp>

#include "cron/schedule.h"

#if defined(__SANITIZE_ADDRESS__)
#define TICKD_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TICKD_TEST_ASAN 1
#endif
#endif
#ifdef TICKD_TEST_ASAN
// From the ASan runtime (sanitizer/allocator_interface.h, which gcc 12 does not ship).
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace tickd::cron {
namespace {

std::int64_t At(std::string_view rfc3339) {
  return ParseRfc3339(rfc3339)->time_since_epoch().count();
}

// Bytes in use on the heap: ASan's count under ASan (its allocator replaces glibc's),
// glibc's otherwise.
std::size_t HeapInUse() {
#ifdef TICKD_TEST_ASAN
  return __sanitizer_get_current_allocated_bytes();
#else
  return ::mallinfo2().uordblks;
#endif
}

}  // namespace

TEST_CASE("offsets follow the footer rule past the listed transitions", "[cron][zone]") {
  const Zone* ny = Zone::Find("America/New_York");
  REQUIRE(ny != nullptr);
  CHECK(ny->OffsetAt(At("2026-07-01T12:00:00Z")) == -4 * 3600);
  CHECK(ny->OffsetAt(At("2040-07-01T12:00:00Z")) == -4 * 3600);
  CHECK(ny->OffsetAt(At("2040-01-01T12:00:00Z")) == -5 * 3600);
  CHECK(ny->OffsetAt(At("2199-07-01T12:00:00Z")) == -4 * 3600);
  const Zone* london = Zone::Find("Europe/London");
  REQUIRE(london != nullptr);
  CHECK(london->OffsetAt(At("2045-07-01T12:00:00Z")) == 3600);
  CHECK(london->OffsetAt(At("2045-12-01T12:00:00Z")) == 0);
}

TEST_CASE("transitions name their instant and both offsets", "[cron][zone]") {
  const Zone* ny = Zone::Find("America/New_York");
  REQUIRE(ny != nullptr);
  // 2100-03-14 02:00 EST -> 03:00 EDT, at 07:00 UTC.
  const std::int64_t from = At("2100-03-01T00:00:00Z");
  const auto spring = ny->NextTransition(from);
  REQUIRE(spring);
  CHECK(spring->at == At("2100-03-14T07:00:00Z"));
  CHECK(spring->offset_before == -5 * 3600);
  CHECK(spring->offset_after == -4 * 3600);
  // The same transition seen from after it, and from its own instant.
  for (const std::int64_t t : {spring->at, spring->at + 86400}) {
    const auto last = ny->LastTransitionAtOrBefore(t);
    REQUIRE(last);
    CHECK(last->at == spring->at);
    CHECK(last->offset_before == -5 * 3600);
    CHECK(last->offset_after == -4 * 3600);
  }
  // One second before it, the last transition is the fall back of 2099.
  const auto before = ny->LastTransitionAtOrBefore(spring->at - 1);
  REQUIRE(before);
  CHECK(before->at == At("2099-11-01T06:00:00Z"));
  CHECK(before->offset_before == -4 * 3600);
}

TEST_CASE("outside the table's years cctz answers", "[cron][zone]") {
  // Berlin left local mean time on 1893-04-01 (+00:53:28 -> +01:00); its next change
  // is the first DST, 1916. Both lookups start inside the table and must reach back.
  const Zone* berlin = Zone::Find("Europe/Berlin");
  REQUIRE(berlin != nullptr);
  for (const char* from : {"1910-01-01T00:00:00Z", "1895-01-01T00:00:00Z"}) {
    INFO(from);
    const auto lmt = berlin->LastTransitionAtOrBefore(At(from));
    REQUIRE(lmt);
    CHECK(lmt->at == At("1893-03-31T23:06:32Z"));
    CHECK(lmt->offset_before == 3208);
    CHECK(lmt->offset_after == 3600);
  }
  CHECK(berlin->OffsetAt(At("1890-01-01T00:00:00Z")) == 3208);
  // After the table: the footer rule, straight from cctz.
  const auto late = berlin->NextTransition(At("2299-12-01T00:00:00Z"));
  REQUIRE(late);
  CHECK(late->at == At("2300-03-25T01:00:00Z"));
  CHECK(late->offset_after == 7200);
  CHECK(berlin->OffsetAt(At("2300-07-01T00:00:00Z")) == 7200);
}

TEST_CASE("a zone without transitions reports none", "[cron][zone]") {
  const Zone* utc = Zone::Find("UTC");
  REQUIRE(utc != nullptr);
  CHECK(utc->OffsetAt(0) == 0);
  CHECK_FALSE(utc->NextTransition(0));
  CHECK_FALSE(utc->LastTransitionAtOrBefore(At("2100-01-01T00:00:00Z")));
  const Zone* gmt5 = Zone::Find("Etc/GMT+5");
  REQUIRE(gmt5 != nullptr);
  CHECK(gmt5->OffsetAt(0) == -5 * 3600);
}

TEST_CASE("only database names are zones", "[cron][zone]") {
  CHECK(Zone::Find("Europe/Berlin") != nullptr);
  CHECK(Zone::Find("US/Eastern") != nullptr);  // a backward link
  CHECK(Zone::Find("Europe/Berlin") == Zone::Find("Europe/Berlin"));  // loaded once
  CHECK(Zone::Find("Europe/Berlin")->name() == "Europe/Berlin");
  for (const char* bad : {"", "No/Such_Zone", "Europe", "/etc/localtime", "localtime",
                          "../zoneinfo/UTC", "Europe//Berlin", "Europe/Berlin/", "right/UTC",
                          "file:/etc/localtime", "libc:localtime", "tzdata.zi", "zone.tab"}) {
    INFO(bad);
    CHECK(Zone::Find(bad) == nullptr);
  }
}

// cctz keeps every name it failed to load until exit (about 100 bytes each, more
// under ASan); the job-file fuzzer's memory grew without end through it. Unknown
// names must not reach cctz.
TEST_CASE("unknown zone names hold no memory", "[cron][zone]") {
  REQUIRE(Zone::Find("Europe/Nowhere-warm-up") == nullptr);
  const std::size_t before = HeapInUse();
  int found = 0;
  for (int i = 0; i < 20000; ++i) {
    if (Zone::Find("Europe/Nowhere-" + std::to_string(i)) != nullptr) ++found;
  }
  const std::size_t after = HeapInUse();
  CHECK(found == 0);
  INFO("heap before " << before << " B, after " << after << " B");
  CHECK(after < before + 64 * 1024);  // unbounded: 2 MB or more
}

}  // namespace tickd::cron
