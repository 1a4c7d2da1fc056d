// Properties over thousands of random expressions and instants (seeded, reproducible):
// Next is strictly after its start and matches the expression (judged by an independent
// matcher built from the generated value sets, with the standard library's calendar), chains are
// monotone, Prev and Next invert each other, and for 5-field expressions in UTC the
// firings over a year equal a brute-force minute-by-minute scan.
#include <catch2/catch.hpp>


#include <array>
#include <random>
#include <string>
#include <vector>

#include "cron/schedule.h"

namespace tickd::cron {
namespace {

using std::chrono::seconds;

// A random expression together with the sets it stands for.
struct Expr {
  std::string text;
  std::array<bool, 60> sec{}, min{};
  std::array<bool, 24> hour{};
  std::array<bool, 13> month{};
  std::array<bool, 32> dom{};
  std::array<bool, 7> dow{};
  int dom_special = 0;  // 0 none, 1 L-n, 2 nW
  int dom_arg = 0;
  int dow_special = 0;  // 0 none, 1 xL, 2 x#n
  int dow_x = 0, dow_n = 0;
  bool dom_star = true, dow_star = true;
  int year_lo = 0, year_hi = 0;  // 0 = any year
};

class Gen {
 public:
  explicit Gen(std::uint32_t seed) : rng_(seed) {}
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  // A numeric field over [lo, hi]; `set[v]` for each value it matches.
  template <std::size_t N>
  std::string Field(int lo, int hi, std::array<bool, N>& set, bool allow_star = true) {
    const int kind = Int(allow_star ? 0 : 1, 6);
    auto mark = [&](int a, int b, int step) {
      for (int v = a; v <= b; v += step) set[static_cast<std::size_t>(v)] = true;
    };
    if (kind == 0) {
      mark(lo, hi, 1);
      return "*";
    }
    if (kind == 1 || kind == 2) {
      const int v = Int(lo, hi);
      mark(v, v, 1);
      return std::to_string(v);
    }
    if (kind == 3) {
      const int a = Int(lo, hi), b = Int(a, hi);
      mark(a, b, 1);
      return std::to_string(a) + "-" + std::to_string(b);
    }
    if (kind == 4) {
      const int n = Int(1, std::max(1, (hi - lo) / 2));
      mark(lo, hi, n);
      return "*/" + std::to_string(n);
    }
    if (kind == 5) {
      const int a = Int(lo, hi), b = Int(a, hi), n = Int(1, std::max(1, hi - lo));
      mark(a, b, n);
      return std::to_string(a) + "-" + std::to_string(b) + "/" + std::to_string(n);
    }
    std::string out;
    for (int i = Int(2, 3); i > 0; --i) {
      const int v = Int(lo, hi);
      mark(v, v, 1);
      out += (out.empty() ? "" : ",") + std::to_string(v);
    }
    return out;
  }

  // `seconds`: 6/7-field form; `year`: 7-field form; `specials`: L/W/#.
  Expr Make(bool with_seconds, bool with_year, bool specials) {
    Expr e;
    std::string s;
    if (with_seconds || with_year) {  // 6 fields are seconds-first: a year needs all 7
      s += Field(0, 59, e.sec) + " ";
    } else {
      e.sec[0] = true;
    }
    s += Field(0, 59, e.min) + " " + Field(0, 23, e.hour) + " ";
    if (specials && Int(0, 4) == 0) {
      e.dom_star = false;
      if (Int(0, 1) == 0) {
        e.dom_special = 1;
        e.dom_arg = Int(0, 5);
        s += e.dom_arg == 0 ? "L" : "L-" + std::to_string(e.dom_arg);
      } else {
        e.dom_special = 2;
        e.dom_arg = Int(1, 31);
        s += std::to_string(e.dom_arg) + "W";
      }
    } else {
      const std::string f = Field(1, 31, e.dom);
      e.dom_star = f == "*";
      s += f;
    }
    s += " " + Field(1, 12, e.month, /*allow_star=*/Int(0, 2) != 0) + " ";
    if (specials && Int(0, 4) == 0) {
      e.dow_star = false;
      e.dow_x = Int(0, 6);
      if (Int(0, 1) == 0) {
        e.dow_special = 1;
        s += std::to_string(e.dow_x) + "L";
      } else {
        e.dow_special = 2;
        e.dow_n = Int(1, 5);
        s += std::to_string(e.dow_x) + "#" + std::to_string(e.dow_n);
      }
    } else {
      std::array<bool, 8> dow8{};
      const std::string f = Field(0, 7, dow8, Int(0, 1) == 0);
      e.dow_star = f == "*";
      for (int d = 0; d < 8; ++d) {
        if (dow8[static_cast<std::size_t>(d)]) e.dow[static_cast<std::size_t>(d % 7)] = true;
      }
      s += f;
    }
    if (with_year) {
      e.year_lo = Int(1975, 2150);
      e.year_hi = Int(e.year_lo, e.year_lo + Int(0, 40));
      s += " " + std::to_string(e.year_lo) + "-" + std::to_string(e.year_hi);
    }
    e.text = s;
    return e;
  }

  Instant Time(int from_year, int to_year) {
    const auto lo = std::chrono::sys_days{std::chrono::year{from_year} / 1 / 1}.time_since_epoch();
    const auto hi = std::chrono::sys_days{std::chrono::year{to_year} / 1 / 1}.time_since_epoch();
    return Instant(seconds(std::uniform_int_distribution<std::int64_t>(
        seconds(lo).count(), seconds(hi).count())(rng_)));
  }

 private:
  std::mt19937 rng_;
};

// Independent day matcher: std::chrono's calendar, the generated sets, the OR/AND rule.
bool DayMatches(const Expr& e, std::chrono::year_month_day ymd) {
  const unsigned d = static_cast<unsigned>(ymd.day());
  const unsigned last =
      static_cast<unsigned>((ymd.year() / ymd.month() / std::chrono::last).day());
  const std::chrono::weekday wd{std::chrono::sys_days{ymd}};
  bool dom_ok = e.dom[d];
  if (e.dom_special == 1) dom_ok = d + static_cast<unsigned>(e.dom_arg) == last;
  if (e.dom_special == 2) {
    // Nearest weekday to dom_arg within the month; none when the month is shorter.
    const unsigned n = static_cast<unsigned>(e.dom_arg);
    dom_ok = false;
    if (n <= last) {
      const std::chrono::weekday wn{
          std::chrono::sys_days{ymd.year() / ymd.month() / std::chrono::day{n}}};
      unsigned target = n;
      if (wn == std::chrono::Saturday) target = n == 1 ? 3 : n - 1;
      if (wn == std::chrono::Sunday) target = n == last ? n - 2 : n + 1;
      dom_ok = d == target;
    }
  }
  bool dow_ok = e.dow[wd.c_encoding()];
  if (e.dow_special == 1) {
    dow_ok = wd.c_encoding() == static_cast<unsigned>(e.dow_x) && d + 7 > last;
  }
  if (e.dow_special == 2) {
    dow_ok = wd.c_encoding() == static_cast<unsigned>(e.dow_x) &&
             (d - 1) / 7 + 1 == static_cast<unsigned>(e.dow_n);
  }
  if (!e.dom_star && !e.dow_star) return dom_ok || dow_ok;
  return dom_ok && dow_ok;
}

bool Matches(const Expr& e, Instant t) {
  const auto day = std::chrono::floor<std::chrono::days>(t);
  const std::chrono::year_month_day ymd{day};
  const std::chrono::hh_mm_ss<seconds> tod{t - day};
  const int y = static_cast<int>(ymd.year());
  if (e.year_lo != 0 && (y < e.year_lo || y > e.year_hi)) return false;
  return e.month[static_cast<unsigned>(ymd.month())] && DayMatches(e, ymd) &&
         e.hour[static_cast<std::size_t>(tod.hours().count())] &&
         e.min[static_cast<std::size_t>(tod.minutes().count())] &&
         e.sec[static_cast<std::size_t>(tod.seconds().count())];
}

}  // namespace

TEST_CASE("5-field expressions in UTC equal a brute-force scan over a year",
          "[cron][property]") {
  Gen gen(20260329);
  std::size_t compared = 0, firings = 0;
  for (int i = 0; i < 120; ++i) {
    const Expr e = gen.Make(false, false, i % 3 == 0);
    auto s = Schedule::Parse(e.text);
    if (!s) continue;  // e.g. "0 0 31 2 *": never fires
    const Instant start = gen.Time(1971, 2190);
    const Instant end = start + seconds(366 * 86400);
    std::vector<Instant> brute;
    // Minute by minute over every day whose date matches (the others hold no firing).
    for (auto day = std::chrono::floor<std::chrono::days>(start); day <= end;
         day += std::chrono::days{1}) {
      if (!e.month[static_cast<unsigned>(std::chrono::year_month_day{day}.month())] ||
          !DayMatches(e, std::chrono::year_month_day{day})) {
        continue;
      }
      for (int m = 0; m < 1440; ++m) {
        const Instant t = Instant(day) + seconds(60 * m);
        if (t > start && t <= end && Matches(e, t)) brute.push_back(t);
      }
    }
    std::vector<Instant> engine;
    for (auto t = s->Next(start); t && *t <= end; t = s->Next(*t)) engine.push_back(*t);
    INFO(e.text << " from " << FormatRfc3339(start, nullptr));
    REQUIRE(engine.size() == brute.size());
    CHECK(engine == brute);
    ++compared;
    firings += brute.size();
  }
  // The comparison is not vacuous: most expressions parse and fire often.
  CHECK(compared > 90);
  CHECK(firings > 100000);
}

TEST_CASE("next is strictly after, matches, is monotone; prev inverts it", "[cron][property]") {
  Gen gen(7);
  int checked = 0;
  for (int i = 0; i < 3000; ++i) {
    const Expr e = gen.Make(i % 2 == 0, i % 5 == 0, i % 3 == 0);
    auto s = Schedule::Parse(e.text);
    if (!s) continue;
    Instant at = gen.Time(1971, 2195);
    INFO(e.text << " from " << FormatRfc3339(at, nullptr));
    for (int k = 0; k < 4; ++k) {
      const auto next = s->Next(at);
      if (!next) break;
      REQUIRE(*next > at);
      REQUIRE(Matches(e, *next));
      // Nothing fires in between: the firing before `next` is at or before `at`.
      const auto prev = s->Prev(*next);
      if (prev) {
        CHECK(*prev <= at);
        CHECK(Matches(e, *prev));
        CHECK(s->Next(*prev) == next);
      }
      at = *next;
      ++checked;
    }
  }
  CHECK(checked > 3000);
}

TEST_CASE("prev and next invert each other in zones with DST", "[cron][property]") {
  Gen gen(11);
  const char* zones[] = {"America/New_York", "Europe/Berlin", "Australia/Lord_Howe",
                         "America/Sao_Paulo"};
  const std::pair<DstGap, DstOverlap> policies[] = {{DstGap::kRun, DstOverlap::kAuto},
                                                    {DstGap::kSkip, DstOverlap::kBoth},
                                                    {DstGap::kRun, DstOverlap::kFirst}};
  int checked = 0;
  for (int i = 0; i < 1500; ++i) {
    const Expr e = gen.Make(i % 4 == 0, false, i % 3 == 0);
    ScheduleOptions o;
    o.timezone = zones[i % 4];
    o.dst_gap = policies[i % 3].first;
    o.dst_overlap = policies[i % 3].second;
    auto s = Schedule::Parse(e.text, o);
    if (!s) continue;
    Instant at = gen.Time(2000, 2030);
    INFO(e.text << " in " << o.timezone << " from " << FormatRfc3339(at, s->zone()));
    for (int k = 0; k < 6; ++k) {
      const auto next = s->Next(at);
      if (!next) break;
      REQUIRE(*next > at);
      const auto prev = s->Prev(*next);
      if (prev) {
        CHECK(*prev <= at);
        CHECK(s->Next(*prev) == next);
      }
      at = *next;
      ++checked;
    }
  }
  CHECK(checked > 3000);
}

}  // namespace tickd::cron
