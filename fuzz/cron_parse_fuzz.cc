// libFuzzer target for the cron engine's parser, and for Next/Prev on whatever parses.
//
// Input layout: byte 0 picks the dialect (b % 3: cron, quartz, spring), byte 1 the
// zone (b % 6 from kZones), byte 2 the DST options (gap b % 2, overlap b / 2 % 3); the
// rest is the expression. ASCII digits map to the natural choice ('0' = 48 = 0 mod 6),
// so seeds read "000*/5 * * * *" (cron, UTC, default DST policy).
//
// Beyond "no crash, no leak, no UB", it checks the contract that holds for every
// schedule: Next(t) > t and Prev(t) < t, and that a parse error has a message.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cron/schedule.h"

namespace {

using tickd::cron::Instant;

constexpr const char* kZones[] = {
    "UTC",       "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Sao_Paulo",
    "Asia/Tokyo"};
constexpr tickd::cron::Dialect kDialects[] = {
    tickd::cron::Dialect::kCron, tickd::cron::Dialect::kQuartz, tickd::cron::Dialect::kSpring};
constexpr tickd::cron::DstOverlap kOverlaps[] = {tickd::cron::DstOverlap::kAuto,
                                                 tickd::cron::DstOverlap::kFirst,
                                                 tickd::cron::DstOverlap::kBoth};

// Starting points: the epoch edge, near DST transitions, now-ish, and near the horizon.
constexpr int64_t kStarts[] = {0, 1774746000 /* 2026-03-29T01:00Z */,
                               1792890000 /* 2026-10-25T01:00Z */, 1767225600,
                               7258032000 /* 2199-12-31T00:00Z */};

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  tickd::cron::ScheduleOptions options;
  options.dialect = kDialects[data[0] % 3];
  options.timezone = kZones[data[1] % 6];
  options.dst_gap = data[2] % 2 == 0 ? tickd::cron::DstGap::kRun : tickd::cron::DstGap::kSkip;
  options.dst_overlap = kOverlaps[data[2] / 2 % 3];
  options.job_name = "fuzz-job";  // what `H` hashes
  const std::string_view expr(reinterpret_cast<const char*>(data) + 3, size - 3);

  // The RFC 3339 parser takes user text too (tickd next --from).
  (void)tickd::cron::ParseRfc3339(expr);

  const auto schedule = tickd::cron::Schedule::Parse(expr, options);
  if (!schedule) {
    Check(!schedule.error().message.empty());
    return 0;
  }
  for (const int64_t start : kStarts) {
    Instant at{std::chrono::seconds(start)};
    for (int i = 0; i < 4; ++i) {
      const auto next = schedule->Next(at);
      if (!next) break;
      Check(*next > at);
      (void)tickd::cron::FormatRfc3339(*next, schedule->zone());
      at = *next;
    }
    const auto prev = schedule->Prev(Instant{std::chrono::seconds(start)});
    if (prev) Check(*prev < Instant{std::chrono::seconds(start)});
  }
  (void)schedule->WarningsAt(Instant{std::chrono::seconds(kStarts[3])});
  return 0;
}
