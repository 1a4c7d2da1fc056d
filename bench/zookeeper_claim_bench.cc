// Claim throughput on one ZooKeeper: N replicas (threads, each with its own backend
// and session) × M jobs, claiming K ticks back to back through the real backend (the
// winner completes each tick at once). Checked: every (job, T) won exactly once, no
// error. Printed: claims/s, job-ticks/s, and the per-claim latency of winners and
// losers (p50/p99). A plain program with a report, like claim_bench.
//
// Usage: zookeeper_claim_bench [--replicas N] [--jobs M] [--ticks K]
// It starts its own standalone ZooKeeper (tests/zookeeper/zookeeper_server.h: loopback,
// default forceSync=yes, i.e. every write fsync'd to the txn log before the answer).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lock/zookeeper/zookeeper_backend.h"
#include "tests/zookeeper/zookeeper_server.h"
#include "bench/claim_stats.h"

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using tickd::lock::ClaimRequest;
using tickd::lock::ClaimStatus;
using tickd::lock::Completion;
using tickd::lock::HeldClaim;

using tickd::bench::ExactlyOnceViolations;
using tickd::bench::Percentile;

namespace {

}  // namespace

int main(int argc, char** argv) {
  int replicas = 3, jobs = 100, ticks = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--replicas") replicas = value;
    if (flag == "--jobs") jobs = value;
    if (flag == "--ticks") ticks = value;
  }
  tickd::testing::ZookeeperServer server;
  if (!server.running()) {
    std::fprintf(stderr, "zookeeper did not start\n");
    return 1;
  }
  const std::string url = server.url("/bench");
  const std::int64_t t0 = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  std::mutex mu;
  tickd::bench::Winners winners;
  std::vector<double> won_ms, lost_ms;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  const auto start = steady_clock::now();
  for (int r = 0; r < replicas; ++r) {
    threads.emplace_back([&, r] {
      tickd::lock::ZookeeperOptions options;
      options.url = url;
      auto backend = tickd::lock::NewZookeeperBackend(options);
      if (!backend) {
        std::fprintf(stderr, "%s\n", backend.error().ToString().c_str());
        errors += jobs * ticks;
        return;
      }
      std::vector<double> my_won, my_lost;
      for (int k = 0; k < ticks; ++k) {
        for (int j = 0; j < jobs; ++j) {
          ClaimRequest req;
          req.job = "job-" + std::to_string(j);
          req.tick_unix = t0 + k;
          req.node = "node-" + std::to_string(r);
          req.owner_token =
              "tok-" + std::to_string(r) + "-" + std::to_string(k) + "-" + std::to_string(j);
          req.forbid_overlap = false;
          req.starting_deadline = std::nullopt;
          const auto sent = steady_clock::now();
          auto out = (*backend)->Claim(req);
          const double ms =
              std::chrono::duration<double, std::milli>(steady_clock::now() - sent).count();
          if (!out) {
            ++errors;
            continue;
          }
          if (out->status == ClaimStatus::kWon) {
            my_won.push_back(ms);
            {
              std::lock_guard lock(mu);
              ++winners[{j, req.tick_unix}];
            }
            HeldClaim held{req.job, req.tick_unix, req.owner_token, out->fence, req.lease};
            if (!(*backend)->Complete(held, Completion{"done", 0, 1ms})) ++errors;
          } else {
            my_lost.push_back(ms);
          }
        }
      }
      std::lock_guard lock(mu);
      won_ms.insert(won_ms.end(), my_won.begin(), my_won.end());
      lost_ms.insert(lost_ms.end(), my_lost.begin(), my_lost.end());
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(steady_clock::now() - start).count();
  const int exactly_once = jobs * ticks - ExactlyOnceViolations(winners, jobs, t0, t0 + ticks - 1);
  const int claims = replicas * jobs * ticks;
  std::printf("replicas %d, jobs %d, ticks %d: %.2f s\n", replicas, jobs, ticks, seconds);
  std::printf("exactly once: %d / %d job-ticks, errors: %d\n", exactly_once, jobs * ticks,
              errors.load());
  std::printf("claims/s %.0f (job-ticks/s %.0f)\n", claims / seconds, jobs * ticks / seconds);
  std::printf("won claim p50 %.2f ms p99 %.2f ms; lost claim p50 %.2f ms p99 %.2f ms\n",
              Percentile(won_ms, 0.5), Percentile(won_ms, 0.99), Percentile(lost_ms, 0.5),
              Percentile(lost_ms, 0.99));
  return exactly_once == jobs * ticks && errors == 0 ? 0 : 1;
}
