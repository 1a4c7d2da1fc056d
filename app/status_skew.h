// Clock skew between replicas, measured through the ledger (docs/design.md §1 rule 8, §9).
//
// Every replica tries a tick at ITS OWN wall-clock T, so the node_wall values of one
// tick agree however skewed the clocks are (max − min of them only shows jitter and
// late claims). What does show skew is WHEN a peer's observation appears: a peer
// whose clock runs 3 s ahead writes its observation of T 3 s before our clock
// reaches T. So this watcher polls the ledger every `poll` and, for each peer
// observation that appeared between two polls taken at our wall times P1 < P2,
// knows the peer wrote it at a real instant inside (P1, P2]:
//     skew(peer) = peer_wall − our_wall ∈ [node_wall − P2, node_wall − P1)
// The gauge tickd_clock_skew_seconds{peer} gets the midpoint; a `clock-skew` warning
// is logged when the whole interval is beyond ±threshold (no false alarm from the
// poll's own uncertainty), once until that peer is back under the threshold.
// The same read tells app/peers.h which replicas are claiming, and with which tz
// database version each: when the set of peers whose version differs from ours
// changes, a `tzdata-mismatch` warning names them (once, not per tick), the gauge
// tickd_tzdata_mismatch counts them, and a `tzdata-match` line says when they agree
// again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "app/log.h"
#include "app/metrics.h"
#include "app/peers.h"
#include "base/clock.h"
#include "lock/backend.h"

namespace tickd::app {

struct SkewOptions {
  std::string node;                            // this replica (its observations are skipped)
  std::chrono::milliseconds threshold{1'000};  // warn beyond this; 0: never warn
  std::chrono::milliseconds poll{500};         // the measurement's uncertainty
  int lookback = 200;                          // newest ticks read per poll
  // The jobs whose ledger each poll reads (Scheduler::ledger_sample: a few jobs being
  // claimed now), `lookback` ticks between them; unset: every job's (the store lists
  // them all, which at thousands of jobs twice a second would crowd out the claims).
  std::function<std::vector<std::string>()> jobs;
  // When set, every poll also tells it which nodes observed the newest ticks (the
  // scheduler's claim order). REQUIRES: outlives the watch.
  Peers* peers = nullptr;
  // This replica's tz database version (cron::TzdataVersionInUse), compared with the
  // peers' when `peers` is set; "" or "unknown": nothing to compare.
  std::string tzdata;
};

// Thread-safe. Start() once; the destructor stops the thread.
class SkewWatch {
 public:
  SkewWatch(Clock& clock, lock::Backend& backend, Logger& log, Metrics& metrics,
            SkewOptions options);
  ~SkewWatch();
  SkewWatch(const SkewWatch&) = delete;
  SkewWatch& operator=(const SkewWatch&) = delete;

  void Start();
  // One poll (the thread calls it; tests may call it directly instead of Start).
  void PollOnce();

 private:
  using ObsKey = std::tuple<std::string, std::int64_t, std::string>;  // job, tick, node

  // The ledger's newest ticks: of options_.jobs when set (their names go to
  // `jobs_read`), else of every job.
  Result<std::vector<lock::TickHistory>> Read(std::set<std::string>& jobs_read);
  // Hands one read to the peers and reports a change of the tz database versions.
  void WatchPeers(const std::vector<lock::TickHistory>& history);

  Clock& clock_;
  lock::Backend& backend_;
  Logger& log_;
  Metrics& metrics_;
  const SkewOptions options_;

  bool primed_ = false;  // the first poll only learns what exists
  // With options_.jobs: the jobs the last poll read. A job new to the sample only
  // learns what exists, like the first poll: its older observations did not appear
  // between these two polls.
  std::set<std::string> last_jobs_;
  // How long our own entries took to appear (now − node_wall), per poll, for the last
  // kOwnDelayMemory: the widening of each peer's interval (PollOnce).
  static constexpr std::chrono::milliseconds kOwnDelayMemory{60'000};
  std::deque<std::pair<WallTime, std::chrono::milliseconds>> own_delays_;
  WallTime last_poll_;
  std::set<ObsKey> seen_;
  std::map<std::string, bool> warned_;  // peer → warning logged and not cleared
  // The peers whose tz database differs from ours, as last reported (node → version).
  std::map<std::string, std::string> tzdata_differing_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tickd::app
