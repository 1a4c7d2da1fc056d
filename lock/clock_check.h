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
// moves. Intervals older than `keep` are dropped, and each is widened by
// `drift_ms_per_s` per second of its age when read (clock rates differ: NTP slews at
// most 500 ppm); an empty intersection means the store's clock stepped: only the
// newest reply counts from then on. Not thread-safe.
class ClockBound {
 public:
  using Steady = std::chrono::steady_clock::time_point;
  struct Options {
    std::chrono::milliseconds resolution{1'000};  // etcd's Date: whole seconds
    std::chrono::seconds keep{60};                // replies older than this are dropped
    std::int64_t drift_ms_per_s = 0;              // widening per second of a reply's age
  };
  ClockBound() = default;
  explicit ClockBound(Options options) : options_(options) {}

  // A reply of `date_ms` (its Date or mtime, in ms) sent and received then. Returns the
  // latest the store's clock can have read when it wrote the reply.
  std::int64_t Add(std::int64_t date_ms, Steady sent, Steady received) {
    const std::int64_t step = options_.resolution.count();
    samples_.push_back({received, date_ms - Ms(received), date_ms + step - Ms(sent)});
    while (samples_.size() > 64 ||
           (samples_.size() > 1 && samples_.front().at < received - options_.keep)) {
      samples_.pop_front();
    }
    std::int64_t lo = INT64_MIN;
    std::int64_t hi = INT64_MAX;
    for (const Sample& s : samples_) {
      lo = std::max(lo, s.lo - Drift(s, received));
      hi = std::min(hi, s.hi + Drift(s, received));
    }
    if (lo >= hi) {  // the store's clock stepped: start over from this reply
      samples_.erase(samples_.begin(), std::prev(samples_.end()));
      hi = samples_.back().hi;
    }
    return std::min(date_ms + step - 1, Ms(received) + hi);
  }

  // What the store's clock reads at steady instant `at`, from the replies of the last
  // `keep` before it: more than `lo` and less than `hi` (ms). Nothing when there are
  // none (a claim sent without a reply of its own, as a blind claim or a gRPC call,
  // judges its instant on this).
  struct Reading {
    std::int64_t lo;
    std::int64_t hi;
  };
  std::optional<Reading> Read(Steady at) const {
    std::int64_t lo = INT64_MIN;
    std::int64_t hi = INT64_MAX;
    for (const Sample& s : samples_) {
      if (s.at < at - options_.keep) continue;
      lo = std::max(lo, s.lo - Drift(s, at));
      hi = std::min(hi, s.hi + Drift(s, at));
    }
    if (hi == INT64_MAX || lo >= hi) return std::nullopt;
    return Reading{Ms(at) + lo, Ms(at) + hi};
  }

 private:
  struct Sample {
    Steady at;
    std::int64_t lo;  // store clock − steady clock: above this
    std::int64_t hi;  //   and below this
  };
  static std::int64_t Ms(Steady t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  }
  std::int64_t Drift(const Sample& s, Steady at) const {
    if (options_.drift_ms_per_s == 0 || at <= s.at) return 0;
    return (Ms(at) - Ms(s.at)) / 1000 * options_.drift_ms_per_s + options_.drift_ms_per_s;
  }
  Options options_;
  std::deque<Sample> samples_;
};

// etcd's: whole seconds, the last minute, no widening.
using SecondClockBound = ClockBound;

}  // namespace tickd::lock
