// The store's clock check of a claim (ClaimRequest::max_lead, docs/design.md §1 rule 15)
// for the backends that decide a claim in C++ on a reading of the store's clock (etcd's
// Date header, ZooKeeper's scratch-node mtime). Redis and PostgreSQL judge the same in
// their script and function. `store_hi_ms` is the latest the store's clock may read
// (etcd: its Date second + 999 ms, or less as SecondClockBound tells): a claim is
// refused, or a head passed over, only when that is sure.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "lock/backend.h"

namespace tickd::lock {

// The claim is early: even store_hi_ms is before T + due_offset − max_lead.
inline bool ClaimIsEarly(const ClaimRequest& req, std::int64_t store_hi_ms) {
  return req.max_lead &&
         store_hi_ms < req.tick_unix * 1000 + (req.due_offset - *req.max_lead).count();
}

// A head tick further than max_lead ahead of the store's clock was claimed for the
// future (a wrong clock, an unchecked claim). An unchecked request sees none ahead.
inline bool HeadIsAhead(const ClaimRequest& req, std::int64_t head_tick,
                        std::int64_t store_hi_ms) {
  return req.max_lead && head_tick * 1000 - req.max_lead->count() > store_hi_ms;
}

// The ticks of a claim head (etcd's and ZooKeeper's; Redis keeps the same fields):
// `tick` is the latest tick of the job ever claimed (store-reset compares with it);
// `below` the latest tick claimed that was not ahead of the store's clock while `tick`
// was, which judges a checked claim instead of a head ahead.
struct HeadTicks {
  std::int64_t tick = 0;
  std::string node;
  std::int64_t below = 0;
  std::string below_node;
};

// The tick (and its node) that supersedes an earlier first claim of req's job.
inline std::pair<std::int64_t, std::string> JudgingHead(const HeadTicks& head,
                                                        const ClaimRequest& req,
                                                        std::int64_t store_hi_ms) {
  if (HeadIsAhead(req, head.tick, store_hi_ms)) return {head.below, head.below_node};
  return {head.tick, head.node};
}

// The head once req won: a head ahead keeps its tick and moves `below` forward;
// otherwise the tick moves forward only, and the tick it leaves becomes `below` when it
// was not itself ahead (by max_lead, or by nothing for an unchecked claim).
inline void MoveHead(HeadTicks& head, const ClaimRequest& req, std::int64_t store_hi_ms) {
  if (HeadIsAhead(req, head.tick, store_hi_ms)) {
    if (req.tick_unix > head.below) {
      head.below = req.tick_unix;
      head.below_node = req.node;
    }
    return;
  }
  if (req.tick_unix <= head.tick) return;
  if (head.tick > 0 && head.tick * 1000 - req.max_lead.value_or(milliseconds(0)).count() <=
                           store_hi_ms) {
    head.below = head.tick;
    head.below_node = head.node;
  }
  head.tick = req.tick_unix;
  head.node = req.node;
}

// A store clock read in steps of `resolution` (etcd's Date header: whole seconds;
// ZooKeeper's node mtime: ms), narrowed by many replies. A reply sent at steady instant
// `sent` and received at `received` that says D was written while the store's clock
// read [D, D + resolution), at some instant in [sent, received]: so (store clock −
// steady clock) lies in (D − received, D + resolution − sent). Replies at different
// phases narrow the intersection of those intervals to about a round trip. The steady
// clock is the replica's monotonic one, which no wall-clock step (nor libfaketime)
// moves; its instants are kept in µs, so that rounding adds nothing to the width.
// Intervals older than `keep` are dropped, and each is widened when read by `widen`
// and by `drift_us_per_s` per second of its age (clock rates differ: NTP slews at most
// 500 ppm). A reply that leaves the intersection empty drops the oldest until it is
// not: after a step of the store's clock only the newest reply counts, after a drift
// the few oldest. Not thread-safe.
class ClockBound {
 public:
  using Steady = std::chrono::steady_clock::time_point;
  struct Options {
    std::chrono::milliseconds resolution{1'000};  // etcd's Date: whole seconds
    std::chrono::seconds keep{60};                // replies older than this are dropped
    std::int64_t drift_us_per_s = 0;              // widening per second of a reply's age
    std::chrono::microseconds widen{0};           // and whatever its age
  };
  ClockBound() = default;
  explicit ClockBound(Options options) : options_(options) {}

  // A reply of `date_ms` (its Date or mtime, in ms) sent and received then. Returns the
  // latest the store's clock can have read when it wrote the reply.
  std::int64_t Add(std::int64_t date_ms, Steady sent, Steady received) {
    const std::int64_t date_us = date_ms * 1000;
    const std::int64_t step_us = options_.resolution.count() * 1000;
    samples_.push_back({received, date_us - Us(received), date_us + step_us - Us(sent)});
    while (samples_.size() > 64 ||
           (samples_.size() > 1 && samples_.front().at < received - options_.keep)) {
      samples_.pop_front();
    }
    // Replies that no longer fit this one go, the oldest first.
    while (true) {
      const std::optional<Reading> now = Intersect(received);
      if (now || samples_.size() == 1) {
        const std::int64_t hi = now ? now->hi : CeilMs(Us(received) + samples_.back().hi);
        return std::min(date_ms + options_.resolution.count() - 1, hi);
      }
      samples_.pop_front();
    }
  }

  // What the store's clock reads at steady instant `at`, from the replies of the last
  // `keep` before it: more than `lo` and less than `hi` (ms). Nothing when there are
  // none (a claim sent without a reply of its own, as a blind claim or a gRPC call,
  // judges its instant on this).
  struct Reading {
    std::int64_t lo;
    std::int64_t hi;
  };
  std::optional<Reading> Read(Steady at) const { return Intersect(at); }

 private:
  struct Sample {
    Steady at;
    std::int64_t lo;  // store clock − steady clock, µs: above this
    std::int64_t hi;  //   and below this
  };
  std::optional<Reading> Intersect(Steady at) const {
    std::int64_t lo = INT64_MIN;
    std::int64_t hi = INT64_MAX;
    for (const Sample& s : samples_) {
      if (s.at < at - options_.keep) continue;
      lo = std::max(lo, s.lo - Widening(s, at));
      hi = std::min(hi, s.hi + Widening(s, at));
    }
    if (hi == INT64_MAX || lo >= hi) return std::nullopt;
    const std::int64_t at_us = Us(at);
    return Reading{FloorMs(at_us + lo), CeilMs(at_us + hi)};
  }
  static std::int64_t Us(Steady t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  }
  static std::int64_t FloorMs(std::int64_t us) { return us / 1000 - (us % 1000 < 0); }
  static std::int64_t CeilMs(std::int64_t us) { return us / 1000 + (us % 1000 > 0); }
  std::int64_t Widening(const Sample& s, Steady at) const {
    if (at <= s.at) return 0;
    return options_.widen.count() + (Us(at) - Us(s.at)) / 1'000'000 * options_.drift_us_per_s +
           (Us(at) - Us(s.at)) % 1'000'000 * options_.drift_us_per_s / 1'000'000;
  }
  Options options_;
  std::deque<Sample> samples_;
};

// etcd's: whole seconds, the last minute, widened by 200 µs a second — what two
// quartz clocks left to themselves may differ by — so that replies narrowed to a few
// ms (BisectingSend) still hold the member's clock a minute later.
class SecondClockBound : public ClockBound {
 public:
  SecondClockBound()
      : ClockBound(Options{std::chrono::milliseconds(1'000), std::chrono::seconds(60), 200}) {}
};

// When to send the next request whose reply (a clock read in steps of `step`) halves a
// bound that read `at_now` at steady instant `now`: the instant at which, by the bound's
// midpoint, the store's clock next reaches a multiple of `step` at least `min_wait`
// after `now`, less half a `round_trip` (the store reads its clock about midway). The
// reply then says on which side of that step the store's clock was, so each one halves
// the bound, from a step's width to about a round trip's in ten or so; replies at
// phases that fall as they may narrow it only as close as they happen to land to a
// step, which on a fixed cadence is tens of ms (design.md §1 rule 15).
inline ClockBound::Steady BisectingSend(ClockBound::Reading at_now, ClockBound::Steady now,
                                        std::chrono::milliseconds step,
                                        std::chrono::milliseconds min_wait,
                                        std::chrono::microseconds round_trip) {
  const std::int64_t mid = at_now.lo + (at_now.hi - at_now.lo) / 2;
  const std::int64_t earliest = mid + min_wait.count();
  const std::int64_t next_step = (earliest / step.count() + (earliest % step.count() > 0)) *
                                 step.count();  // store ms are positive: Unix time
  return now + std::chrono::milliseconds(next_step - mid) - round_trip / 2;
}

// When the keeper of a SecondClockBound sends its next request. BisectingSend halves
// the bound once a second and so keeps it about a round trip wide; but a bound that
// started over (a reply that fit none of the others: the store's clock was stepped) is
// a second wide, and halving it back to `narrow_ms` takes six seconds, in which each
// run waits up to its width (design.md §1 rule 15). So once it is wider than
// `narrow_ms`, replies go `spacing` apart for at most `dense_for`, as at a start (they
// catch the second's change within a second), and that at most once per
// `dense_again_after`: a round trip longer than `narrow_ms` keeps it wide for good.
// Without a reading (no reply in the last minute): one every `idle_every`. Not
// thread-safe.
class ClockKeeperSchedule {
 public:
  struct Options {
    std::chrono::milliseconds step{1'000};  // the store clock's resolution
    std::chrono::milliseconds at_least{250};
    std::chrono::milliseconds idle_every{470};
    std::chrono::milliseconds spacing{10};
    std::chrono::milliseconds dense_for{1'200};
    std::chrono::seconds dense_again_after{60};
    std::int64_t narrow_ms = 25;
  };
  ClockKeeperSchedule() = default;
  explicit ClockKeeperSchedule(Options options) : options_(options) {}

  ClockBound::Steady Next(const std::optional<ClockBound::Reading>& reading,
                          ClockBound::Steady now, std::chrono::microseconds round_trip) {
    if (!reading) return now + options_.idle_every;
    const bool wide = reading->hi - reading->lo > options_.narrow_ms;
    if (wide && !wide_ && (!went_dense_ || now - dense_since_ >= options_.dense_again_after)) {
      went_dense_ = true;
      dense_since_ = now;
    }
    wide_ = wide;
    if (wide && went_dense_ && now < dense_since_ + options_.dense_for) {
      return now + options_.spacing;
    }
    return BisectingSend(*reading, now, options_.step, options_.at_least, round_trip);
  }

 private:
  Options options_;
  bool wide_ = false;  // the keeper starts on a bound already narrowed (NarrowClock)
  bool went_dense_ = false;
  ClockBound::Steady dense_since_{};
};

}  // namespace tickd::lock
