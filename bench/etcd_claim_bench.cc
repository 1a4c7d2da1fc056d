// Claim throughput on one etcd member (the sibling of claim_bench.cc, which measures
// Redis): N replicas (threads, each with its own backend and HTTP connection) × M jobs
// `@every 1s`, through the real backend (lock/etcd).
//
//   1. paced: for S seconds, at every whole second T each replica claims the M ticks
//      due at T; winners complete them right after (a run of ~0 s). Checked: every
//      (job, T) has exactly one winner, no error. Measured: lateness = the last claim
//      of T answered − T (p50/p99/max over the ticks of every replica).
//   2. saturation: the replicas claim and complete ticks back to back for K ticks:
//      claims per second and jobs-ticks per second decided.
//
// Usage: etcd_claim_bench [--replicas N] [--jobs M] [--seconds S] [--sat-ticks K]
// It starts its own etcd (tests/etcd/etcd_server.h: one member, WAL fsync as default).
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

#include "lock/etcd/etcd_backend.h"
#include "tests/etcd/etcd_server.h"
#include "bench/claim_stats.h"

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using std::chrono::system_clock;
using tickd::lock::Backend;
using tickd::lock::ClaimRequest;
using tickd::lock::ClaimStatus;
using tickd::lock::Completion;
using tickd::lock::HeldClaim;

using tickd::bench::ExactlyOnceViolations;
using tickd::bench::Percentile;

namespace {

struct Args {
  int replicas = 3;
  int jobs = 100;
  int seconds = 10;
  int sat_ticks = 5;
};

// Winners per (job, T), errors, and how late each replica finished each tick's claims.
struct Tally {
  std::mutex mu;
  tickd::bench::Winners winners;
  std::vector<double> lateness_ms;
  std::atomic<int> errors{0};
  std::atomic<long> claims{0};
};

std::unique_ptr<Backend> Open(const tickd::testing::EtcdServer& server) {
  tickd::lock::EtcdOptions options;
  options.url = server.url();
  options.op_timeout = 10s;  // under saturation: answer, do not give up
  auto backend = tickd::lock::NewEtcdBackend(options);
  if (!backend) {
    std::fprintf(stderr, "%s\n", backend.error().ToString().c_str());
    std::exit(1);
  }
  return std::move(*backend);
}

// One replica's claims of tick T for every job; winners complete at once.
void ClaimTick(Backend& backend, int replica, int jobs, std::int64_t tick, Tally& tally) {
  for (int j = 0; j < jobs; ++j) {
    ClaimRequest r;
    r.job = "job-" + std::to_string(j);
    r.tick_unix = tick;
    r.node = "replica-" + std::to_string(replica);
    r.owner_token = r.node + "-" + std::to_string(tick) + "-" + std::to_string(j);
    r.forbid_overlap = false;
    r.starting_deadline = std::nullopt;  // saturation ticks are in the past
    r.config_hash = "h";
    auto out = backend.Claim(r);
    ++tally.claims;
    if (!out) {
      ++tally.errors;
      continue;
    }
    if (out->status != ClaimStatus::kWon) continue;
    {
      std::lock_guard lock(tally.mu);
      ++tally.winners[{j, tick}];
    }
    auto done = backend.Complete(HeldClaim{r.job, tick, r.owner_token, out->fence, r.lease},
                                 Completion{"done", 0, 1ms});
    if (!done || *done != tickd::lock::CompleteStatus::kCompleted) ++tally.errors;
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (key == "--replicas") a.replicas = value;
    if (key == "--jobs") a.jobs = value;
    if (key == "--seconds") a.seconds = value;
    if (key == "--sat-ticks") a.sat_ticks = value;
  }
  if (!tickd::testing::EtcdServer::Available()) {
    std::fprintf(stderr, "etcd not installed\n");
    return 1;
  }
  tickd::testing::EtcdServer server;
  if (!server.running()) {
    std::fprintf(stderr, "etcd did not start\n");
    return 1;
  }
  std::vector<std::unique_ptr<Backend>> replicas;
  for (int r = 0; r < a.replicas; ++r) replicas.push_back(Open(server));

  // 1. paced
  Tally paced;
  const std::int64_t first =
      std::chrono::duration_cast<std::chrono::seconds>(system_clock::now().time_since_epoch())
          .count() +
      1;
  const std::int64_t last = first + a.seconds - 1;
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < a.replicas; ++r) {
      threads.emplace_back([&, r] {
        for (std::int64_t t = first; t <= last; ++t) {
          std::this_thread::sleep_until(system_clock::time_point(std::chrono::seconds(t)));
          ClaimTick(*replicas[r], r, a.jobs, t, paced);
          const double late =
              std::chrono::duration<double, std::milli>(
                  system_clock::now() - system_clock::time_point(std::chrono::seconds(t)))
                  .count();
          std::lock_guard lock(paced.mu);
          paced.lateness_ms.push_back(late);
        }
      });
    }
    for (auto& th : threads) th.join();
  }
  const int paced_bad = ExactlyOnceViolations(paced.winners, a.jobs, first, last);

  // 2. saturation: ticks far in the past, back to back.
  Tally sat;
  const std::int64_t sat_first = 1'000'000'000;
  const auto start = steady_clock::now();
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < a.replicas; ++r) {
      threads.emplace_back([&, r] {
        for (int k = 0; k < a.sat_ticks; ++k)
          ClaimTick(*replicas[r], r, a.jobs, sat_first + k, sat);
      });
    }
    for (auto& th : threads) th.join();
  }
  const double secs = std::chrono::duration<double>(steady_clock::now() - start).count();
  const int sat_bad =
      ExactlyOnceViolations(sat.winners, a.jobs, sat_first, sat_first + a.sat_ticks - 1);

  std::printf("etcd_claim_bench: %d replicas x %d jobs @every 1s, etcd 127.0.0.1:%d (one member)\n",
              a.replicas, a.jobs, server.port());
  std::printf(
      "paced %ds: %ld claims, exactly-once violations %d, errors %d, "
      "tick done lateness p50 %.0f ms p99 %.0f ms max %.0f ms\n",
      a.seconds, paced.claims.load(), paced_bad, paced.errors.load(),
      Percentile(paced.lateness_ms, 0.5), Percentile(paced.lateness_ms, 0.99),
      Percentile(paced.lateness_ms, 1.0));
  std::printf(
      "saturation %d ticks: %ld claims in %.2f s = %.0f claims/s, %.0f job-ticks/s, "
      "violations %d, errors %d\n",
      a.sat_ticks, sat.claims.load(), secs, static_cast<double>(sat.claims.load()) / secs,
      a.jobs * a.sat_ticks / secs, sat_bad, sat.errors.load());
  return paced_bad + sat_bad + paced.errors + sat.errors == 0 ? 0 : 2;
}
