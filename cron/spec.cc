#include "cron/spec.h"

#include <bit>

namespace tickd::cron::internal {
namespace {

constexpr std::uint64_t Bit(unsigned n) { return std::uint64_t{1} << n; }

// Bits 0..v set; none when v < 0.
constexpr std::uint64_t AtOrBelow(int v) {
  return v < 0 ? 0 : v >= 63 ? ~std::uint64_t{0} : (std::uint64_t{2} << v) - 1;
}

// Bits v..63 set (v <= 63).
constexpr std::uint64_t AtOrAbove(int v) { return ~std::uint64_t{0} << v; }

constexpr int Highest(std::uint64_t bits) { return 63 - std::countl_zero(bits); }
constexpr int Lowest(std::uint64_t bits) { return std::countr_zero(bits); }

// The weekday nearest to `day` without leaving the month (Quartz's nW): a Saturday
// moves back to Friday unless that leaves the month (then Monday), a Sunday forward to
// Monday unless that leaves the month (then Friday).
constexpr unsigned NearestWeekday(unsigned day, unsigned dim, unsigned first_weekday) {
  const unsigned wd = (first_weekday + day - 1) % 7;
  if (wd == 6) return day == 1 ? 3 : day - 1;
  if (wd == 0) return day == dim ? day - 2 : day + 1;
  return day;
}

constexpr std::int64_t kSecondsPerDay = 86400;

constexpr std::int64_t FloorDiv(std::int64_t a, std::int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

}  // namespace

void Spec::Finish() {
  for (unsigned w = 0; w < 7; ++w) {
    // Bit i of `week`: day i+1 of a month starting on weekday w, i.e. weekday (w+i)%7.
    const std::uint64_t week = ((dow >> w) | (dow << (7 - w))) & 0x7f;
    const std::uint64_t month = week | week << 7 | week << 14 | week << 21 | week << 28;
    dow_pattern[w] = (month << 1) & (Bit(32) - 2);
  }
}

std::uint64_t Spec::DayMask(int y, unsigned m) const {
  const unsigned dim = DaysInMonth(y, m);
  const std::uint64_t valid = Bit(dim + 1) - 2;
  if (dom_star && dow_star) return valid;
  const unsigned w1 = WeekdayFromDays(DaysFromCivil(y, m, 1));

  std::uint64_t dm = valid;
  if (!dom_star) {
    dm = dom & valid;
    if (dom_specials) {
      for (std::uint32_t b = dom_last; b != 0; b &= b - 1) {
        const unsigned n = static_cast<unsigned>(Lowest(b));
        if (n < dim) dm |= Bit(dim - n);
      }
      for (std::uint32_t b = dom_last_weekday; b != 0; b &= b - 1) {
        const unsigned n = static_cast<unsigned>(Lowest(b));
        if (n < dim) dm |= Bit(NearestWeekday(dim - n, dim, w1));
      }
      for (std::uint64_t b = dom_nearest; b != 0; b &= b - 1) {
        const unsigned n = static_cast<unsigned>(Lowest(b));
        if (n <= dim) dm |= Bit(NearestWeekday(n, dim, w1));
      }
    }
  }

  std::uint64_t wm = valid;
  if (!dow_star) {
    wm = dow_pattern[w1] & valid;
    if (dow_specials) {
      const unsigned wd_last = (w1 + dim - 1) % 7;
      for (std::uint32_t b = dow_last; b != 0; b &= b - 1) {
        const unsigned x = static_cast<unsigned>(Lowest(b));
        wm |= Bit(dim - (wd_last + 7 - x) % 7);
      }
      for (std::uint64_t b = dow_nth; b != 0; b &= b - 1) {
        const unsigned k = static_cast<unsigned>(Lowest(b));
        const unsigned x = k % 7, n = k / 7;
        const unsigned day = 1 + (x + 7 - w1) % 7 + 7 * n;
        if (day <= dim) wm |= Bit(day);
      }
    }
  }

  if (rule == DayRule::kOr && !dom_star && !dow_star) return dm | wm;
  return dm & wm;
}

std::optional<int> Spec::YearAtOrAfter(int y) const {
  if (y < kMinYear) y = kMinYear;
  if (y > kMaxYear) return std::nullopt;
  unsigned idx = static_cast<unsigned>(y - kMinYear);
  for (unsigned w = idx / 64; w < years.size(); ++w) {
    const std::uint64_t bits = w == idx / 64 ? years[w] & AtOrAbove(static_cast<int>(idx % 64))
                                             : years[w];
    if (bits != 0) return kMinYear + static_cast<int>(w * 64) + Lowest(bits);
  }
  return std::nullopt;
}

std::optional<int> Spec::YearAtOrBefore(int y) const {
  if (y > kMaxYear) y = kMaxYear;
  if (y < kMinYear) return std::nullopt;
  const unsigned idx = static_cast<unsigned>(y - kMinYear);
  for (int w = static_cast<int>(idx / 64); w >= 0; --w) {
    const std::uint64_t bits = static_cast<unsigned>(w) == idx / 64
                                   ? years[w] & AtOrBelow(static_cast<int>(idx % 64))
                                   : years[w];
    if (bits != 0) return kMinYear + w * 64 + Highest(bits);
  }
  return std::nullopt;
}

// Both searches walk down the fields from year to second. At each field they jump to
// the nearest allowed value with one bit operation; when a field has none left they
// carry into the field above and reset the ones below (to their first value for Next,
// their last for Prev). A month's day mask is computed once per visited month, so even
// "29 February" or a far year range costs a handful of iterations, never a scan.
std::optional<std::int64_t> Spec::NextLocal(std::int64_t t) const {
  t += 1;
  const std::int64_t days = FloorDiv(t, kSecondsPerDay);
  const int sod = static_cast<int>(t - days * kSecondsPerDay);
  const CivilDay cd = CivilFromDays(days);
  int y = cd.y;
  int m = static_cast<int>(cd.m), d = static_cast<int>(cd.d);
  int h = sod / 3600, mi = sod / 60 % 60, s = sod % 60;
  const int start_d = d;
  if (y < kMinYear) {
    y = kMinYear;
    m = d = 1;
    h = mi = s = 0;
  }
  int mask_y = 0, mask_m = 0;
  std::uint64_t mask = 0;
  for (;;) {
    if (!HasYear(y)) {
      const auto ny = YearAtOrAfter(y);
      if (!ny) return std::nullopt;
      y = *ny;
      m = d = 1;
      h = mi = s = 0;
    }
    const std::uint64_t mb = months & AtOrAbove(m);
    if (mb == 0) {
      ++y;
      m = d = 1;
      h = mi = s = 0;
      continue;
    }
    if (Lowest(mb) != m) {
      m = Lowest(mb);
      d = 1;
      h = mi = s = 0;
    }
    if (y != mask_y || m != mask_m) {
      mask = DayMask(y, static_cast<unsigned>(m));
      mask_y = y;
      mask_m = m;
    }
    const std::uint64_t db = mask & AtOrAbove(d);
    if (db == 0) {
      ++m;
      d = 1;
      h = mi = s = 0;
      continue;
    }
    if (Lowest(db) != d) {
      d = Lowest(db);
      h = mi = s = 0;
    }
    const std::uint64_t hb = hours & AtOrAbove(h);
    if (hb == 0) {
      ++d;
      h = mi = s = 0;
      continue;
    }
    if (Lowest(hb) != h) {
      h = Lowest(hb);
      mi = s = 0;
    }
    const std::uint64_t mib = minutes & AtOrAbove(mi);
    if (mib == 0) {
      ++h;
      mi = s = 0;
      continue;
    }
    if (Lowest(mib) != mi) {
      mi = Lowest(mib);
      s = 0;
    }
    const std::uint64_t sb = seconds & AtOrAbove(s);
    if (sb == 0) {
      ++mi;
      s = 0;
      continue;
    }
    s = Lowest(sb);
    // Frequent schedules fire the same day: skip the calendar arithmetic.
    if (d == start_d && y == cd.y && m == static_cast<int>(cd.m)) {
      return days * kSecondsPerDay + h * 3600 + mi * 60 + s;
    }
    return DaysFromCivil(y, static_cast<unsigned>(m), static_cast<unsigned>(d)) *
               kSecondsPerDay +
           h * 3600 + mi * 60 + s;
  }
}

std::optional<std::int64_t> Spec::PrevLocal(std::int64_t t) const {
  t -= 1;
  const std::int64_t days = FloorDiv(t, kSecondsPerDay);
  const int sod = static_cast<int>(t - days * kSecondsPerDay);
  const CivilDay cd = CivilFromDays(days);
  int y = cd.y;
  int m = static_cast<int>(cd.m), d = static_cast<int>(cd.d);
  int h = sod / 3600, mi = sod / 60 % 60, s = sod % 60;
  if (y > kMaxYear) {
    y = kMaxYear;
    m = 12;
    d = 31;
    h = 23;
    mi = s = 59;
  }
  int mask_y = 0, mask_m = 0;
  std::uint64_t mask = 0;
  for (;;) {
    if (!HasYear(y)) {
      const auto py = YearAtOrBefore(y);
      if (!py) return std::nullopt;
      y = *py;
      m = 12;
      d = 31;
      h = 23;
      mi = s = 59;
    }
    const std::uint64_t mb = months & AtOrBelow(m);
    if (mb == 0) {
      --y;
      m = 12;
      d = 31;
      h = 23;
      mi = s = 59;
      continue;
    }
    if (Highest(mb) != m) {
      m = Highest(mb);
      d = 31;
      h = 23;
      mi = s = 59;
    }
    if (y != mask_y || m != mask_m) {
      mask = DayMask(y, static_cast<unsigned>(m));
      mask_y = y;
      mask_m = m;
    }
    const std::uint64_t db = mask & AtOrBelow(d);
    if (db == 0) {
      --m;
      d = 31;
      h = 23;
      mi = s = 59;
      continue;
    }
    if (Highest(db) != d) {
      d = Highest(db);
      h = 23;
      mi = s = 59;
    }
    const std::uint64_t hb = hours & AtOrBelow(h);
    if (hb == 0) {
      --d;
      h = 23;
      mi = s = 59;
      continue;
    }
    if (Highest(hb) != h) {
      h = Highest(hb);
      mi = s = 59;
    }
    const std::uint64_t mib = minutes & AtOrBelow(mi);
    if (mib == 0) {
      --h;
      mi = s = 59;
      continue;
    }
    if (Highest(mib) != mi) {
      mi = Highest(mib);
      s = 59;
    }
    const std::uint64_t sb = seconds & AtOrBelow(s);
    if (sb == 0) {
      --mi;
      s = 59;
      continue;
    }
    s = Highest(sb);
    return DaysFromCivil(y, static_cast<unsigned>(m), static_cast<unsigned>(d)) *
               kSecondsPerDay +
           h * 3600 + mi * 60 + s;
  }
}

}  // namespace tickd::cron::internal
