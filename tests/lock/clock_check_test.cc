// lock/clock_check.h: the clock check of a claim (docs/design.md §1 rule 15) as etcd and
// ZooKeeper decide it, and the bound etcd narrows its whole-second Date with.
#include "lock/clock_check.h"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using namespace tickd::lock;

namespace {

ClaimRequest Checked(std::int64_t tick, std::chrono::milliseconds max_lead) {
  ClaimRequest req;
  req.job = "j";
  req.tick_unix = tick;
  req.node = "n";
  req.max_lead = max_lead;
  return req;
}

SecondClockBound::Steady At(std::int64_t ms) {
  return SecondClockBound::Steady(std::chrono::milliseconds(ms));
}

std::int64_t MsAt(SecondClockBound::Steady t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace

TEST_CASE("clock check: early only beyond max_lead from the due instant; unchecked never") {
  ClaimRequest req = Checked(1'000, 450ms);
  CHECK(ClaimIsEarly(req, 999'549));
  CHECK_FALSE(ClaimIsEarly(req, 999'550));
  req.due_offset = 2'000ms;  // jitter: due at 1002 s
  CHECK(ClaimIsEarly(req, 1'001'549));
  CHECK_FALSE(ClaimIsEarly(req, 1'001'550));
  req.max_lead.reset();
  CHECK_FALSE(ClaimIsEarly(req, 0));
}

TEST_CASE("clock check: a head ahead judges by below and keeps its tick; one in time moves") {
  HeadTicks head{5'000, "ahead", 0, ""};  // an hour ahead of a store at 1400 s
  const std::int64_t store_ms = 1'400'000;
  ClaimRequest req = Checked(1'400, 450ms);
  req.node = "b";
  CHECK(HeadIsAhead(req, head.tick, store_ms));
  CHECK(JudgingHead(head, req, store_ms).first == 0);  // nothing below yet: not superseded
  MoveHead(head, req, store_ms);
  CHECK(head.tick == 5'000);
  CHECK(head.below == 1'400);
  CHECK(head.below_node == "b");
  ClaimRequest lagging = Checked(1'399, 450ms);
  CHECK(JudgingHead(head, lagging, store_ms) == std::pair<std::int64_t, std::string>{1'400, "b"});
  // An unchecked claim (a lock) is judged against the latest tick ever claimed.
  ClaimRequest unchecked = Checked(1'401, 0ms);
  unchecked.max_lead.reset();
  CHECK(JudgingHead(head, unchecked, store_ms).first == 5'000);
  // Once the store's clock reaches it, the head judges every claim again and moves on.
  const std::int64_t later_ms = 5'000'000;
  ClaimRequest on_time = Checked(5'002, 450ms);
  on_time.node = "c";
  CHECK_FALSE(HeadIsAhead(on_time, head.tick, later_ms));
  MoveHead(head, on_time, later_ms + 2'000);
  CHECK(head.tick == 5'002);
  CHECK(head.below == 5'000);  // the tick it left, no longer ahead
}

TEST_CASE("SecondClockBound: replies at other phases of the second narrow Date + 999 ms") {
  SecondClockBound bound;
  // The store's clock is steady + 1'000'000'250 ms; each reply takes 2 ms.
  constexpr std::int64_t kOffset = 1'000'000'250;
  const auto reply = [&](std::int64_t sent_ms) {
    const std::int64_t store_ms = sent_ms + 1 + kOffset;
    return bound.Add(store_ms / 1000 * 1000, At(sent_ms), At(sent_ms + 2));
  };
  // Alone, a reply says no more than its second.
  const std::int64_t first = reply(100);  // store 1'000'000'351: Date ...000
  CHECK(first == 1'000'000'999);
  // Replies at every tenth of a second narrow it to a round trip or so.
  std::int64_t hi = 0;
  for (std::int64_t t = 200; t <= 1'100; t += 100) hi = reply(t);
  const std::int64_t truth = 1'100 + 1 + kOffset;
  CHECK(hi >= truth);
  CHECK(hi <= truth + 110);
  // Read between replies: the clock then, within about a round trip.
  const auto later = bound.Read(At(5'000));
  REQUIRE(later);
  CHECK(later->lo < 5'000 + kOffset);
  CHECK(later->hi > 5'000 + kOffset);
  CHECK(later->hi - later->lo <= 110);
  CHECK_FALSE(bound.Read(At(1'100 + 61'000)));  // every reply older than kKeep
  // The store's clock steps back 5 s: the old replies no longer fit, the newest counts.
  const std::int64_t stepped = bound.Add((1'200 + kOffset - 5'000) / 1000 * 1000, At(1'200),
                                         At(1'202));
  CHECK(stepped <= 1'200 + kOffset - 5'000 + 1'000);
  CHECK(stepped >= 1'200 + kOffset - 5'000);
}

TEST_CASE("BisectingSend: each reply halves the bound, to about a round trip in a dozen") {
  // The store's clock is steady + offset; a reply takes 2 ms and the store reads its
  // clock 1 ms after the send. Whatever the offset's phase in the second, a dozen
  // replies sent when BisectingSend says leave a bound a few ms wide that holds it.
  for (const std::int64_t phase : {0, 1, 250, 499, 500, 731, 998, 999}) {
    INFO("phase " << phase);
    const std::int64_t offset = 1'000'000'000 + phase;
    SecondClockBound bound;
    std::int64_t now_ms = 100;
    const auto reply = [&](std::int64_t sent_ms) {
      bound.Add((sent_ms + 1 + offset) / 1000 * 1000, At(sent_ms), At(sent_ms + 2));
      now_ms = sent_ms + 2;
    };
    reply(now_ms);
    for (int i = 0; i < 12; ++i) {
      const auto at_now = bound.Read(At(now_ms));
      REQUIRE(at_now);
      const auto send = BisectingSend(*at_now, At(now_ms), 1000ms, 250ms, 2ms);
      const std::int64_t send_ms = MsAt(send);
      CHECK(send_ms >= now_ms + 249);  // min_wait, less half the round trip
      CHECK(send_ms <= now_ms + 1'250);
      reply(send_ms);
    }
    const auto after = bound.Read(At(now_ms));
    REQUIRE(after);
    CHECK(after->lo < now_ms + offset);
    CHECK(after->hi > now_ms + offset);
    CHECK(after->hi - after->lo <= 5);
  }
  // The same dozen replies on a fixed cadence of 470 ms: as wide as they happen to land.
  SecondClockBound fixed;
  constexpr std::int64_t kOffset = 1'000'000'731;
  for (std::int64_t t = 100; t <= 100 + 12 * 470; t += 470) {
    fixed.Add((t + 1 + kOffset) / 1000 * 1000, At(t), At(t + 2));
  }
  const auto wide = fixed.Read(At(100 + 12 * 470 + 2));
  REQUIRE(wide);
  CHECK(wide->hi - wide->lo > 20);
}

TEST_CASE("SecondClockBound: clocks whose rates differ keep a narrow bound, not a second's") {
  // The store's clock gains 100 µs a second on the steady clock (100 ppm, more than
  // NTP leaves between two hosts). Replies sent as BisectingSend says keep finding the
  // second's change; the older ones that no longer fit go, and the bound stays a few ms
  // wide about the truth, where starting over from the newest reply would make it 1 s.
  SecondClockBound bound;
  const auto offset = [](std::int64_t steady_ms) { return 1'000'000'437 + steady_ms / 10'000; };
  std::int64_t now_ms = 100;
  std::int64_t widest_after_warmup = 0;
  std::int64_t worst_hi_below_truth = 0;
  std::int64_t worst_lo_above_truth = INT64_MIN;
  const auto reply = [&](std::int64_t sent_ms) {
    bound.Add((sent_ms + 1 + offset(sent_ms + 1)) / 1000 * 1000, At(sent_ms), At(sent_ms + 2));
    now_ms = sent_ms + 2;
  };
  reply(now_ms);
  for (int i = 0; i < 200; ++i) {  // about two and a half minutes
    const auto at_now = bound.Read(At(now_ms));
    REQUIRE(at_now);
    if (i >= 15) {
      widest_after_warmup = std::max(widest_after_warmup, at_now->hi - at_now->lo);
      worst_hi_below_truth = std::max(worst_hi_below_truth, now_ms + offset(now_ms) - at_now->hi);
      worst_lo_above_truth = std::max(worst_lo_above_truth, at_now->lo - (now_ms + offset(now_ms)));
    }
    reply(MsAt(BisectingSend(*at_now, At(now_ms), 1000ms, 250ms, 2ms)));
  }
  CHECK(widest_after_warmup <= 10);
  CHECK(worst_hi_below_truth <= 3);  // an early claim lets through at most that much more
  // A run won on a clock ahead waits from lo (StartDelay): lo above the truth would
  // start it early.
  CHECK(worst_lo_above_truth <= 0);
}

TEST_CASE("ClockKeeperSchedule: a bound that started over is narrow again within a second") {
  // Replies take 2 ms, the store reads its clock 1 ms after the send. The bound is
  // narrowed by bisection, then the store's clock is stepped 5.3 s ahead: the next
  // reply fits none of the others and the bound starts over, a second wide. The
  // schedule's Dates 10 ms apart catch the second's change within about a second, where
  // bisection alone halves it once a second (six seconds to 25 ms).
  const auto run = [](bool dense) {
    SecondClockBound bound;
    ClockKeeperSchedule schedule(ClockKeeperSchedule::Options{
        .dense_for = dense ? 1'200ms : 0ms, .narrow_ms = 25});
    std::int64_t offset = 1'000'000'613;
    std::int64_t now_ms = 100;
    const auto reply = [&](std::int64_t sent_ms) {
      bound.Add((sent_ms + 1 + offset) / 1000 * 1000, At(sent_ms), At(sent_ms + 2));
      now_ms = sent_ms + 2;
    };
    const auto next = [&] {
      return MsAt(schedule.Next(bound.Read(At(now_ms)), At(now_ms), 2ms));
    };
    reply(now_ms);
    for (int i = 0; i < 15; ++i) {  // narrowed as the keeper does
      reply(MsAt(BisectingSend(*bound.Read(At(now_ms)), At(now_ms), 1000ms, 250ms, 2ms)));
    }
    REQUIRE(bound.Read(At(now_ms))->hi - bound.Read(At(now_ms))->lo <= 5);
    offset += 5'300;
    const std::int64_t stepped_at = now_ms;
    reply(now_ms);
    std::int64_t narrow_after = -1;
    while (now_ms < stepped_at + 10'000) {
      const auto at_now = bound.Read(At(now_ms));
      REQUIRE(at_now);
      INFO("at " << now_ms - stepped_at << " ms: [" << at_now->lo << ", " << at_now->hi << "]");
      CHECK(at_now->lo <= now_ms + offset);  // a start that waits from lo is not early
      CHECK(at_now->hi >= now_ms + offset);
      if (narrow_after < 0 && at_now->hi - at_now->lo <= 25) narrow_after = now_ms - stepped_at;
      reply(next());
    }
    return narrow_after;
  };
  const std::int64_t with_dense = run(true);
  CHECK(with_dense >= 0);
  CHECK(with_dense <= 1'300);
  const std::int64_t bisecting_only = run(false);
  CHECK((bisecting_only < 0 || bisecting_only > 3'000));  // what the keeper did before
}

TEST_CASE("ClockKeeperSchedule: a bound that stays wide goes dense once a minute at most") {
  // A round trip of 40 ms keeps the bound wider than 25 ms for good: the schedule goes
  // dense for 1.2 s once, and again only a minute later, not for ever.
  SecondClockBound bound;
  ClockKeeperSchedule schedule;
  constexpr std::int64_t kOffset = 1'000'000'271;
  std::int64_t now_ms = 100;
  int dense_sends = 0;
  int sends = 0;
  while (now_ms < 100 + 180'000) {  // three minutes
    const std::int64_t sent = MsAt(schedule.Next(bound.Read(At(now_ms)), At(now_ms), 40ms));
    if (sent - now_ms < 100) ++dense_sends;
    ++sends;
    bound.Add((sent + 20 + kOffset) / 1000 * 1000, At(sent), At(sent + 40));
    now_ms = sent + 40;
  }
  CHECK(dense_sends > 0);
  CHECK(dense_sends <= 3 * 25);  // 1.2 s of 50 ms sends (the round trip and 10 ms), thrice
  CHECK(sends <= dense_sends + 180 * 4);
}
