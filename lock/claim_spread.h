// The order in which a replica sends the claims due at one instant, so that
// replicas racing for the same ticks do not all start with the same job.
//
// If every replica sent its batch in the same order, all of them would race for job
// 1 first, then job 2, ...: every tick would be decided only when the first
// replica's claim for it got its turn, and whoever was a little ahead would win
// nearly every tick and run nearly every job. Instead the jobs are cut into
// `replicas` slices by a hash of their names (the same on every replica, whatever
// order the jobs are in), and the replica of rank r sends slice r first, then r+1,
// and so on around. So during the first 1/n of the batch every replica claims ticks
// nobody else claims yet (they all win, at once), and the rest of the batch is what
// the others have already decided. On a backend that serves claims one after
// another (Redis, etcd, ZooKeeper), every tick is decided in about the first third
// of the burst with three replicas instead of over all of it, and the runs are
// shared out evenly. A backend that decides a batch at once (SQLite's one
// transaction) is indifferent to the order.
//
// It is only an order: any rank gives correct claims. Replicas that disagree on the
// ranks (a replica joined and the others have not seen it yet) overlap on a slice
// for a while, and that slice is decided a little later.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/fnv1a.h"

namespace tickd::lock {

// Which slice of `replicas` the job named `job` falls in (FNV-1a of the name: the
// same in every build and on every machine).
inline std::size_t SpreadSlice(std::string_view job, std::size_t replicas) {
  return replicas <= 1 ? 0 : static_cast<std::size_t>(Fnv1a64(job) % replicas);
}

// The positions of `jobs` in the order replica `rank` of `replicas` sends them: its
// own slice first, then the following slices in turn; within a slice, the order
// given. With one replica (or none known) that is the order given.
inline std::vector<std::size_t> SpreadOrder(const std::vector<std::string_view>& jobs,
                                            std::size_t rank, std::size_t replicas) {
  std::vector<std::size_t> order;
  order.reserve(jobs.size());
  if (replicas <= 1) {
    for (std::size_t i = 0; i < jobs.size(); ++i) order.push_back(i);
    return order;
  }
  std::vector<std::vector<std::size_t>> slices(replicas);
  for (std::size_t i = 0; i < jobs.size(); ++i) slices[SpreadSlice(jobs[i], replicas)].push_back(i);
  for (std::size_t k = 0; k < replicas; ++k) {
    const auto& slice = slices[(rank + k) % replicas];
    order.insert(order.end(), slice.begin(), slice.end());
  }
  return order;
}

}  // namespace tickd::lock
