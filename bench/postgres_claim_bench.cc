// Claim throughput on one PostgreSQL 15 (the sibling of claim_bench.cc, which measures
// Redis): N replicas (threads, each with its own backend and connection) × M jobs
// `@every 1s`, through the real backend (lock/postgres).
//
//   1. paced: for S seconds, at every whole second T each replica sends the M claims
//      due at T in one ClaimBatch (one pipeline, one transaction per claim, the ledger
//      row inside the claim: observe), then completes what it won in one CompleteBatch.
//      Checked: every (job, T) has exactly one winner, no error, no missed. Measured:
//      claims answered − T and tick done (completes too) − T, per replica and tick.
//   2. saturation: the replicas claim and complete ticks back to back for K ticks:
//      claims per second and job-ticks per second decided.
//
// Usage: postgres_claim_bench [--replicas N] [--jobs M] [--seconds S] [--sat-ticks K]
//                             [--fsync 0] [--op-timeout-ms T]
// It starts its own PostgreSQL (tests/postgres/postgres_server.h) with fsync on, as a
// production server runs (--fsync 0: fsync=off, to see what the commit flush costs).
// op_timeout is 30 s unless --op-timeout-ms says otherwise (the daemon's default: 2000).
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

#include "lock/postgres/postgres_backend.h"
#include "tests/postgres/postgres_server.h"
#include "bench/claim_stats.h"

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using std::chrono::system_clock;
using tickd::lock::Backend;
using tickd::lock::ClaimRequest;
using tickd::lock::ClaimStatus;
using tickd::lock::CompleteRequest;
using tickd::lock::CompleteStatus;
using tickd::lock::Completion;
using tickd::lock::HeldClaim;

using tickd::bench::ExactlyOnceViolations;
using tickd::bench::Percentile;

namespace {

struct Args {
  int replicas = 3;
  int jobs = 1000;
  int seconds = 10;
  int sat_ticks = 5;
  bool fsync = true;
  int op_timeout_ms = 30'000;  // a batch of thousands under saturation: answer, do not give up
};

struct Tally {
  std::mutex mu;
  tickd::bench::Winners winners;
  std::vector<double> claimed_ms;  // claims of T answered − T
  std::vector<double> done_ms;     // claims and completes of T answered − T
  std::atomic<int> errors{0};
  std::atomic<int> missed{0};
  std::atomic<long> claims{0};
};

std::unique_ptr<Backend> Open(const tickd::testing::PostgresServer& server, const Args& a) {
  tickd::lock::PostgresOptions options;
  options.url = server.url();
  options.password = server.password();
  options.op_timeout = std::chrono::milliseconds(a.op_timeout_ms);
  auto backend = tickd::lock::NewPostgresBackend(options);
  if (!backend) {
    std::fprintf(stderr, "%s\n", backend.error().ToString().c_str());
    std::exit(1);
  }
  return std::move(*backend);
}

double MsSince(std::int64_t tick) {
  return std::chrono::duration<double, std::milli>(
             system_clock::now() - system_clock::time_point(std::chrono::seconds(tick)))
      .count();
}

// One replica's claims of tick T for every job (one batch), then its completes (one batch).
void ClaimTick(Backend& backend, int replica, int jobs, std::int64_t tick, bool paced,
               Tally& tally) {
  std::vector<ClaimRequest> reqs(static_cast<std::size_t>(jobs));
  for (int j = 0; j < jobs; ++j) {
    ClaimRequest& r = reqs[static_cast<std::size_t>(j)];
    r.job = "job-" + std::to_string(j);
    r.tick_unix = tick;
    r.node = "replica-" + std::to_string(replica);
    r.owner_token = r.node + "-" + std::to_string(tick) + "-" + std::to_string(j);
    r.forbid_overlap = false;
    if (!paced) r.starting_deadline = std::nullopt;  // saturation ticks are in the past
    r.config_hash = "h";
    r.node_wall = std::chrono::time_point_cast<std::chrono::milliseconds>(system_clock::now());
    r.observe = true;
  }
  const auto outcomes = backend.ClaimBatch(reqs);
  const double claimed = MsSince(tick);
  tally.claims += jobs;
  std::vector<CompleteRequest> completes;
  for (int j = 0; j < jobs; ++j) {
    const auto& out = outcomes[static_cast<std::size_t>(j)];
    if (!out) {
      ++tally.errors;
      continue;
    }
    if (out->status == ClaimStatus::kMissed) ++tally.missed;
    if (out->status != ClaimStatus::kWon) continue;
    const ClaimRequest& r = reqs[static_cast<std::size_t>(j)];
    completes.push_back(
        {HeldClaim{r.job, tick, r.owner_token, out->fence, r.lease}, Completion{"done", 0, 1ms}});
  }
  for (const auto& done : backend.CompleteBatch(completes)) {
    if (!done || *done != CompleteStatus::kCompleted) ++tally.errors;
  }
  std::lock_guard lock(tally.mu);
  for (const CompleteRequest& c : completes) {
    ++tally.winners[{std::stoi(c.held.job.substr(4)), tick}];
  }
  tally.claimed_ms.push_back(claimed);
  tally.done_ms.push_back(MsSince(tick));
}

// Runs every replica on its own thread over ticks [first, first + count).
void RunReplicas(std::vector<std::unique_ptr<Backend>>& replicas, const Args& a, std::int64_t first,
                 int count, bool paced, Tally& tally) {
  std::vector<std::thread> threads;
  for (int r = 0; r < a.replicas; ++r) {
    threads.emplace_back([&, r] {
      for (std::int64_t t = first; t < first + count; ++t) {
        if (paced) std::this_thread::sleep_until(system_clock::time_point(std::chrono::seconds(t)));
        ClaimTick(*replicas[static_cast<std::size_t>(r)], r, a.jobs, t, paced, tally);
      }
    });
  }
  for (auto& th : threads) th.join();
}

}  // namespace

int main(int argc, char** argv) {
  if (tickd::bench::WantsHelp(argc, argv)) {
    std::printf(
        "usage: postgres_claim_bench [--replicas N] [--jobs M] [--seconds S] [--sat-ticks K]\n"
        "         [--fsync 0] [--op-timeout-ms T]\n"
        "Starts its own PostgreSQL 15; runs N replicas x M jobs @every 1s (paced S s, then K\n"
        "saturation ticks). See bench/README.md.\n");
    return 0;
  }
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (key == "--replicas") a.replicas = value;
    if (key == "--jobs") a.jobs = value;
    if (key == "--seconds") a.seconds = value;
    if (key == "--sat-ticks") a.sat_ticks = value;
    if (key == "--fsync") a.fsync = value != 0;
    if (key == "--op-timeout-ms") a.op_timeout_ms = value;
  }
  if (!tickd::testing::PostgresServer::Available()) {
    std::fprintf(stderr, "postgres 15 not installed\n");
    return 1;
  }
  tickd::testing::PostgresServer server("", a.fsync);
  if (!server.running()) {
    std::fprintf(stderr, "postgres did not start: %s\n", server.LogTail().c_str());
    return 1;
  }
  std::vector<std::unique_ptr<Backend>> replicas;
  for (int r = 0; r < a.replicas; ++r) replicas.push_back(Open(server, a));

  Tally paced;
  const std::int64_t first =
      std::chrono::duration_cast<std::chrono::seconds>(system_clock::now().time_since_epoch())
          .count() +
      1;
  RunReplicas(replicas, a, first, a.seconds, /*paced=*/true, paced);
  const int paced_bad = ExactlyOnceViolations(paced.winners, a.jobs, first, first + a.seconds - 1);

  Tally sat;
  const std::int64_t sat_first = 1'000'000'000;
  const auto start = steady_clock::now();
  RunReplicas(replicas, a, sat_first, a.sat_ticks, /*paced=*/false, sat);
  const double secs = std::chrono::duration<double>(steady_clock::now() - start).count();
  const int sat_bad =
      ExactlyOnceViolations(sat.winners, a.jobs, sat_first, sat_first + a.sat_ticks - 1);

  std::printf(
      "postgres_claim_bench: %d replicas x %d jobs @every 1s, PostgreSQL 15 "
      "127.0.0.1:%d, fsync %s\n",
      a.replicas, a.jobs, server.port(), a.fsync ? "on" : "off");
  std::printf(
      "paced %ds: %ld claims, exactly-once violations %d, errors %d, missed %d, "
      "claims answered p50 %.0f ms p99 %.0f ms; tick done p50 %.0f ms p99 %.0f ms max %.0f ms\n",
      a.seconds, paced.claims.load(), paced_bad, paced.errors.load(), paced.missed.load(),
      Percentile(paced.claimed_ms, 0.5), Percentile(paced.claimed_ms, 0.99),
      Percentile(paced.done_ms, 0.5), Percentile(paced.done_ms, 0.99),
      Percentile(paced.done_ms, 1.0));
  std::printf(
      "saturation %d ticks: %ld claims in %.2f s = %.0f claims/s, %.0f job-ticks/s, "
      "violations %d, errors %d\n",
      a.sat_ticks, sat.claims.load(), secs, static_cast<double>(sat.claims.load()) / secs,
      a.jobs * a.sat_ticks / secs, sat_bad, sat.errors.load());
  return paced_bad + sat_bad + paced.errors + sat.errors + paced.missed == 0 ? 0 : 2;
}
