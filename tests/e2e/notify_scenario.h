// End-to-end notifications (on_failure, on_miss) and the http: job type, runnable
// against any backend (docs/design.md §4 "Notifications", "HTTP jobs").
#pragma once

#include "tests/e2e/harness.h"

namespace tickd::e2e {

// Three replicas and a cpp-httplib endpoint on 127.0.0.1:
//  - a job failing every second posts on_failure exactly once per tick it ran (the
//    POSTs counted by tick), with the winner and fence of that tick;
//  - an http: job every second reaches the endpoint once per tick, fences increasing
//    with the tick; its on_success goes to a dead endpoint (a refused port, retried)
//    and its ticks still run on time;
//  - every replica SIGSTOPped past a starting deadline, then SIGCONTed: each missed
//    tick of a job with on_miss is posted exactly once in all.
void ScenarioNotifyAndHttp(BackendFixture& backend);

}  // namespace tickd::e2e
