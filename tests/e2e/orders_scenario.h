// The orders-cleanup plugin end to end: three replicas close stale unpaid orders in a
// SQLite shop while new orders keep arriving (tests/e2e/orders_e2e_test.cc).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tests/e2e/harness.h"

namespace tickd::e2e {

struct OrdersOutcome {
  std::map<std::string, long long> counts;  // `shopctl check`: orders unpaid paid closed
                                            // restocks restored_twice stock_off fence
  std::string check_line;
  std::vector<LogLine> lines;      // every replica's log
  std::vector<int> exit_statuses;  // of the replicas after SIGTERM
};

// Three replicas on `backend` run the cleanup plugin (isolation: process) @every 1s
// with older_than 2s and a 300 ms pause between reading and writing, while orders
// arrive for 6 s; then waits (≤ 8 s) for no unpaid order to be left, stops the
// replicas with SIGTERM and reads the shop.
OrdersOutcome RunOrdersCleanup(BackendFixture& backend, bool check_fence);

// A lock section for `backend: none` (every replica runs every tick).
std::unique_ptr<BackendFixture> MakeNoneFixture();

}  // namespace tickd::e2e
