// The store's clock check of a claim (ClaimRequest::max_lead, docs/design.md §1 rule 15)
// for the backends that decide a claim in C++ on a reading of the store's clock (etcd's
// Date header, ZooKeeper's scratch-node mtime). Redis and PostgreSQL judge the same in
// their script and function. `store_hi_ms` is the latest the store's clock may read
// (etcd: its Date second + 999 ms): a claim is refused, or a head passed over, only
// when that is sure.
#pragma once

#include <cstdint>
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

}  // namespace tickd::lock
