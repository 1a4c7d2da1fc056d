#include "cron/schedule.h"

#include <cstdio>
#include <limits>
#include <string>

#include "base/fnv1a.h"
#include "cron/parser.h"
#include "cron/spec.h"
#include "cron/zone.h"

namespace tickd::cron {

using internal::kMaxYear;
using internal::kMinYear;
using internal::Spec;

namespace {

constexpr std::int64_t kDay = 86400;
// The last second of the horizon (2199-12-31T23:59:59Z) for @every schedules.
constexpr std::int64_t kHorizonEnd = internal::DaysFromCivil(kMaxYear + 1, 1, 1) * kDay - 1;

constexpr std::int64_t FloorDiv(std::int64_t a, std::int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

Instant At(std::int64_t s) { return Instant(std::chrono::seconds(s)); }

const Zone* Utc() {
  static const Zone* const utc = Zone::Find("UTC");
  return utc;
}

}  // namespace

struct Schedule::Impl {
  std::string expression;
  ScheduleOptions options;
  Spec spec;
  const Zone* zone = nullptr;
  // Zones with one UTC offset over the whole horizon (UTC, Etc/GMT+5, …) skip tzdb.
  bool fixed_offset = false;
  std::int64_t offset = 0;
  bool overlap_both = false;  // fire in both passes of a fall-back overlap
  bool gap_run = false;       // fire at the end of a spring-forward gap what it skipped

  std::optional<Instant> NextZoned(std::int64_t after) const;
  std::optional<Instant> PrevZoned(std::int64_t before) const;
};

/*
 * Daylight saving time (docs/design.md §2)
 * ----------------------------------------
 * The civil search (Spec::NextLocal / PrevLocal) works on wall-clock time and knows
 * nothing about zones. This code maps its answers to real instants, one UTC-offset
 * period at a time (the instants between two transitions of cron/zone.h): inside a
 * period, local = utc + offset is a bijection, so a wall time found there is a firing
 * at (local - offset). Only when the answer falls past the period's end do we step
 * into the next period, and the transition between the two (at instant `begin`) is:
 *
 *   Spring forward (gap): the offset grows, so the wall times [begin+old, begin+new)
 *     never happen ("02:00-02:59" in New York on 2021-03-14).
 *       - every-hour schedules (hour `*`, @every) owe nothing for them: they mean
 *         elapsed time, and the wall clock simply has no such minutes;
 *       - fixed-time schedules with dst_gap=run fire once at `begin` (03:00) if any
 *         scheduled wall time lies in the gap: all of them collapse into that one
 *         firing, as the Vixie cron daemon runs skipped jobs right after the jump;
 *       - dst_gap=skip drops them (Quartz: that day's 02:30 does not happen).
 *   Fall back (overlap): the offset shrinks, so the wall times [begin+new, begin+old)
 *     happen twice: first in the period that ends at `begin`, again after it.
 *       - "both" (auto for every-hour schedules) fires in both passes: the search
 *         resumes at begin+new, the start of the repeated wall times;
 *       - "first" (auto for fixed-time schedules) fires only in the first pass: the
 *         search resumes at begin+old, the first wall time not seen before. A search
 *         that *starts* inside the second pass applies the same cut (the last
 *         transition before the start, if it was a fall-back less than a day ago).
 *
 * Each step costs one transition lookup (a binary search); a yearly schedule
 * crosses at most a few transitions. Past the last transition a zone file lists,
 * cctz continues with the file's footer rule, so this holds through 2199. Nothing
 * mutable is cached, so Next and Prev stay const and thread-safe. @every ignores wall
 * time entirely: it fires at multiples of its period since the epoch, which is
 * DST-proof by itself. Zones whose offset never changes take a fast path.
 */
std::optional<Instant> Schedule::Impl::NextZoned(std::int64_t after) const {
  std::int32_t off = zone->OffsetAt(after);
  std::int64_t cursor = after + off;
  if (!overlap_both) {
    // `after` may sit in the second pass of an overlap that began less than a day ago.
    const auto last = zone->LastTransitionAtOrBefore(after);
    if (last && last->at > after - kDay && last->offset_before > off) {
      cursor = std::max(cursor, last->at + last->offset_before - 1);
    }
  }
  auto next = zone->NextTransition(after);  // the end of the current period
  for (;;) {
    const auto local = spec.NextLocal(cursor);
    if (!local) return std::nullopt;
    if (!next || *local - off < next->at) return At(*local - off);

    const std::int64_t begin = next->at;
    const std::int32_t old_off = off;
    off = next->offset_after;
    next = zone->NextTransition(begin);
    if (off > old_off) {
      // `*local` is the first scheduled wall time at or after the gap's start.
      if (gap_run && *local < begin + off) return At(begin);
      cursor = begin + off - 1;
    } else {
      cursor = begin + (overlap_both ? off : old_off) - 1;
    }
  }
}

std::optional<Instant> Schedule::Impl::PrevZoned(std::int64_t before) const {
  std::int32_t off = zone->OffsetAt(before - 1);
  auto start = zone->LastTransitionAtOrBefore(before - 1);  // the current period's
  std::int64_t cursor = before + off;
  for (;;) {
    const auto local = spec.PrevLocal(cursor);
    if (!local) return std::nullopt;
    if (!start) return At(*local - off);  // no transition before: one period to the past
    const std::int64_t begin = start->at;
    const std::int32_t old_off = start->offset_before;
    if (*local >= begin + off) {
      // In the second pass of an overlap, "first" has already fired this wall time.
      if (overlap_both || *local >= begin + off + kDay || old_off <= off ||
          *local >= begin + old_off) {
        return At(*local - off);
      }
    }
    // `*local` is the last scheduled wall time before this period: is it in the gap?
    if (old_off < off && gap_run && *local >= begin + old_off) return At(begin);
    cursor = begin + old_off;
    off = old_off;
    start = zone->LastTransitionAtOrBefore(begin - 1);
  }
}

tl::expected<Schedule, ParseError> Schedule::Parse(std::string_view expr,
                                                   const ScheduleOptions& options) {
  auto spec = internal::ParseSpec(expr, options.dialect, options.job_name);
  if (!spec) return tl::unexpected(spec.error());

  auto impl = std::make_unique<Impl>();
  impl->zone = options.timezone == "UTC" ? Utc() : FindZone(options.timezone);
  if (impl->zone == nullptr) {
    return tl::unexpected(internal::MakeParseError(
        expr, 0, "", 0,
        "unknown time zone '" + options.timezone + "' (not in the system tz database)"));
  }
  if (spec->every_seconds == 0) {
    const auto first_year = spec->YearAtOrAfter(kMinYear);
    const std::int64_t start =
        first_year ? internal::DaysFromCivil(*first_year, 1, 1) * kDay - 1 : 0;
    if (!first_year || !spec->NextLocal(start)) {
      return tl::unexpected(internal::MakeParseError(
          expr, 0, "", 0, "never fires: no date between 1970 and 2199 matches the fields"));
    }
  }
  const std::int32_t offset_at_epoch = impl->zone->OffsetAt(0);
  const auto first_change = impl->zone->NextTransition(0);
  if (!first_change || first_change->at > kHorizonEnd) {
    impl->fixed_offset = true;
    impl->offset = offset_at_epoch;
  }
  const bool every_hour = spec->hour_star || spec->every_seconds != 0;
  impl->overlap_both = options.dst_overlap == DstOverlap::kBoth ||
                       (options.dst_overlap == DstOverlap::kAuto && every_hour);
  impl->gap_run = !every_hour && options.dst_gap == DstGap::kRun;
  impl->expression = std::string(expr);
  impl->options = options;
  impl->spec = *spec;
  return Schedule(std::move(impl));
}

std::optional<Instant> Schedule::Next(Instant after) const {
  const std::int64_t a = after.time_since_epoch().count();
  const Spec& spec = impl_->spec;
  if (spec.every_seconds != 0) {
    const std::int64_t next = (FloorDiv(a, spec.every_seconds) + 1) * spec.every_seconds;
    if (next > kHorizonEnd) return std::nullopt;
    return At(std::max<std::int64_t>(next, 0));
  }
  if (impl_->fixed_offset) {
    const auto local = spec.NextLocal(a + impl_->offset);
    if (!local) return std::nullopt;
    return At(*local - impl_->offset);
  }
  return impl_->NextZoned(a);
}

std::optional<Instant> Schedule::Prev(Instant before) const {
  const std::int64_t b = before.time_since_epoch().count();
  const Spec& spec = impl_->spec;
  if (spec.every_seconds != 0) {
    const std::int64_t d = spec.every_seconds;
    const std::int64_t prev = FloorDiv(std::min(b - 1, kHorizonEnd), d) * d;
    if (prev < 0) return std::nullopt;
    return At(prev);
  }
  if (impl_->fixed_offset) {
    const auto local = spec.PrevLocal(b + impl_->offset);
    if (!local) return std::nullopt;
    return At(*local - impl_->offset);
  }
  return impl_->PrevZoned(b);
}

std::vector<std::string> Schedule::WarningsAt(Instant now) const {
  std::vector<std::string> out;
  if (Next(now)) return out;
  std::string line = impl_->expression + ": never fires after " + FormatRfc3339(now, zone());
  if (const auto last = Prev(now)) {
    line += "; its last firing was " + FormatRfc3339(*last, zone());
  }
  out.push_back(std::move(line));
  return out;
}

const std::string& Schedule::expression() const { return impl_->expression; }
const ScheduleOptions& Schedule::options() const { return impl_->options; }
const Zone* Schedule::zone() const { return impl_->zone; }
bool Schedule::every_hour() const {
  return impl_->spec.hour_star || impl_->spec.every_seconds != 0;
}
std::optional<std::chrono::seconds> Schedule::every() const {
  if (impl_->spec.every_seconds == 0) return std::nullopt;
  return std::chrono::seconds(impl_->spec.every_seconds);
}

Schedule::Schedule(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Schedule::Schedule(const Schedule& other) : impl_(std::make_unique<Impl>(*other.impl_)) {}
Schedule& Schedule::operator=(const Schedule& other) {
  if (this != &other) impl_ = std::make_unique<Impl>(*other.impl_);
  return *this;
}
Schedule::Schedule(Schedule&&) noexcept = default;
Schedule& Schedule::operator=(Schedule&&) noexcept = default;
Schedule::~Schedule() = default;

std::optional<Dialect> DialectFromName(std::string_view name) {
  if (name == "cron") return Dialect::kCron;
  if (name == "quartz") return Dialect::kQuartz;
  if (name == "spring") return Dialect::kSpring;
  return std::nullopt;
}

std::optional<DstGap> DstGapFromName(std::string_view name) {
  if (name == "run") return DstGap::kRun;
  if (name == "skip") return DstGap::kSkip;
  return std::nullopt;
}

std::optional<DstOverlap> DstOverlapFromName(std::string_view name) {
  if (name == "auto") return DstOverlap::kAuto;
  if (name == "first") return DstOverlap::kFirst;
  if (name == "both") return DstOverlap::kBoth;
  return std::nullopt;
}

std::chrono::milliseconds JitterOffset(std::string_view job_name, Instant tick,
                                       std::chrono::milliseconds jitter) {
  if (jitter.count() <= 0) return std::chrono::milliseconds(0);
  const auto tick_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      tick.time_since_epoch());
  std::uint64_t h = Fnv1a64(job_name);
  h = Fnv1a64("@", h);
  h = Fnv1a64(std::to_string(tick_ms.count()), h);
  return std::chrono::milliseconds(
      static_cast<std::int64_t>(h % static_cast<std::uint64_t>(jitter.count())));
}

std::string_view DialectName(Dialect d) {
  switch (d) {
    case Dialect::kCron:
      return "cron";
    case Dialect::kQuartz:
      return "quartz";
    case Dialect::kSpring:
      return "spring";
  }
  return "cron";
}

const Zone* FindZone(std::string_view name) { return Zone::Find(name); }

std::string FormatRfc3339(Instant t, const Zone* zone) {
  const std::int64_t s = t.time_since_epoch().count();
  const std::int64_t off = zone == nullptr ? 0 : zone->OffsetAt(s);
  const std::int64_t local = s + off;
  const std::int64_t days = FloorDiv(local, kDay);
  const std::int64_t sod = local - days * kDay;
  const internal::CivilDay cd = internal::CivilFromDays(days);
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d", cd.y, cd.m, cd.d,
                        static_cast<int>(sod / 3600), static_cast<int>(sod / 60 % 60),
                        static_cast<int>(sod % 60));
  if (zone == nullptr) {
    std::snprintf(buf + n, sizeof buf - static_cast<std::size_t>(n), "Z");
  } else {
    const std::int64_t a = off < 0 ? -off : off;
    std::snprintf(buf + n, sizeof buf - static_cast<std::size_t>(n), "%c%02d:%02d",
                  off < 0 ? '-' : '+', static_cast<int>(a / 3600),
                  static_cast<int>(a / 60 % 60));
  }
  return buf;
}

Result<Instant> ParseRfc3339(std::string_view text) {
  const std::string ctx(text);
  auto bad = [&](const std::string& why) -> Result<Instant> {
    return MakeError(ctx, why + " (expected RFC 3339, e.g. 2026-03-29T01:30:00Z)");
  };
  std::size_t i = 0;
  auto number = [&](std::size_t digits, int& out) {
    if (i + digits > text.size()) return false;
    out = 0;
    for (std::size_t k = 0; k < digits; ++k) {
      const char c = text[i + k];
      if (c < '0' || c > '9') return false;
      out = out * 10 + (c - '0');
    }
    i += digits;
    return true;
  };
  auto expect = [&](std::string_view chars) {
    if (i >= text.size() || chars.find(text[i]) == std::string_view::npos) return false;
    ++i;
    return true;
  };
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!number(4, y) || !expect("-") || !number(2, mo) || !expect("-") || !number(2, d)) {
    return bad("bad date");
  }
  if (!expect("Tt ") || !number(2, h) || !expect(":") || !number(2, mi) || !expect(":") ||
      !number(2, s)) {
    return bad("bad time of day");
  }
  if (mo < 1 || mo > 12 || d < 1 ||
      static_cast<unsigned>(d) > internal::DaysInMonth(y, static_cast<unsigned>(mo)) ||
      h > 23 || mi > 59 || s > 59) {
    return bad("date or time out of range");
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    const std::size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    if (i == start) return bad("missing digits after '.'");
  }
  std::int64_t off = 0;
  if (expect("Zz")) {
  } else if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    const bool neg = text[i] == '-';
    ++i;
    int oh = 0, om = 0;
    if (!number(2, oh) || !expect(":") || !number(2, om) || oh > 23 || om > 59) {
      return bad("bad UTC offset");
    }
    off = (oh * 3600 + om * 60) * (neg ? -1 : 1);
  } else {
    return bad("missing UTC offset (Z or +hh:mm)");
  }
  if (i != text.size()) return bad("unexpected text after the offset");
  const std::int64_t local =
      internal::DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * kDay +
      h * 3600 + mi * 60 + s;
  return At(local - off);
}

}  // namespace tickd::cron
