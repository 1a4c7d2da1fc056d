// The paced and saturation runs of the batched claim benchmarks (etcd_claim_bench,
// zookeeper_claim_bench): N replicas (threads, each with its own backend) × M jobs
// `@every 1s`, through a real backend's batched path, as the scheduler uses it.
//
//   1. paced: for S seconds, at every whole second T each replica hands the M claims
//      due at T to one ClaimBatchAsAnswered (the scheduler's call), then completes
//      what it won in one CompleteBatch. Checked: every (job, T) has exactly one
//      winner, no error, no missed. Measured: claim lateness = each claim's answer − T
//      (per job-tick and replica: when that replica knew whether to run it), the
//      batch's last answer − T, and tick done (completes too) − T.
//   2. saturation: the same back to back for K later ticks (no deadline):
//      claims/s and job-ticks/s decided. With `sat_barrier`, every replica begins tick
//      k together (a barrier per tick), as the daemon's replicas all take up an instant
//      at the same moment (its claim lead, by the clock); without it, a replica that
//      gets ahead claims into the others' slices of ticks they have not begun.
#pragma once

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/claim_stats.h"
#include "bench/process_cpu.h"
#include "lock/backend.h"

namespace tickd::bench {

struct BatchArgs {
  int replicas = 3;
  int jobs = 1000;
  int seconds = 10;
  int sat_ticks = 5;
  bool sat_barrier = false;  // saturation: all replicas begin each tick together
  pid_t server_pid = 0;      // the store's process: its CPU in saturation is reported
};

struct BatchTally {
  std::mutex mu;
  Winners winners;
  std::vector<double> claim_ms;  // each claim's answer − T
  std::vector<double> batch_ms;  // a replica's last answer of T − T
  std::vector<double> done_ms;   // claims and completes of T answered − T
  std::vector<double> claim_phase_ms;     // a replica's ClaimBatchAsAnswered of T (observations in)
  std::vector<double> complete_phase_ms;  // its CompleteBatch of T
  std::atomic<int> errors{0};
  std::atomic<int> missed{0};
  std::atomic<long> claims{0};
};

inline double MsSince(std::int64_t tick) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::system_clock::now() -
             std::chrono::system_clock::time_point(std::chrono::seconds(tick)))
      .count();
}

// One replica's claims of tick T for every job (one batch), then its completes (one batch).
inline void ClaimTickBatched(lock::Backend& backend, int replica, int replicas, int jobs,
                             std::int64_t tick, bool paced, BatchTally& tally) {
  using namespace std::chrono_literals;
  const double started = MsSince(tick);
  std::vector<lock::ClaimRequest> reqs(static_cast<std::size_t>(jobs));
  for (int j = 0; j < jobs; ++j) {
    lock::ClaimRequest& r = reqs[static_cast<std::size_t>(j)];
    // Each replica starts at its own slice, as the scheduler spreads them: replica r's
    // is the jobs with job × replicas / jobs = r, from ⌈r × jobs / replicas⌉ on.
    const int job = (j + (replica * jobs + replicas - 1) / replicas) % jobs;
    r.job = "job-" + std::to_string(job);
    r.tick_unix = tick;
    r.node = "replica-" + std::to_string(replica);
    r.owner_token = r.node + "-" + std::to_string(tick) + "-" + std::to_string(job);
    r.forbid_overlap = false;
    if (!paced) r.starting_deadline = std::nullopt;  // saturation ticks are not due yet
    r.config_hash = "h";
    r.node_wall =
        std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
    r.observe = true;
    // Past its own slice, the others have most likely decided it (lock/claim_spread.h).
    // Every job is in one replica's slice, as SpreadSlice puts it (until 2026-11-28,
    // later, job 999 of 1,000 was in none: every replica probed, read and claimed it).
    r.likely_decided = job * replicas / jobs != replica;
  }
  std::vector<std::optional<Result<lock::ClaimOutcome>>> outcomes(reqs.size());
  std::vector<double> answered_ms;
  answered_ms.reserve(reqs.size());
  backend.ClaimBatchAsAnswered(reqs, [&](std::size_t i, Result<lock::ClaimOutcome> out) {
    answered_ms.push_back(MsSince(tick));
    if (i < outcomes.size()) outcomes[i] = std::move(out);
  });
  const double claimed = MsSince(tick);
  tally.claims += jobs;
  std::vector<lock::CompleteRequest> completes;
  std::vector<int> won_jobs;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const auto& out = outcomes[i];
    if (!out || !*out) {
      ++tally.errors;
      continue;
    }
    if ((*out)->status == lock::ClaimStatus::kMissed) ++tally.missed;
    if ((*out)->status != lock::ClaimStatus::kWon) continue;
    const lock::ClaimRequest& r = reqs[i];
    completes.push_back({lock::HeldClaim{r.job, tick, r.owner_token, (*out)->fence, r.lease},
                         lock::Completion{"done", 0, 1ms}});
    won_jobs.push_back(std::stoi(r.job.substr(4)));
  }
  for (const auto& done : backend.CompleteBatch(completes)) {
    if (!done || *done != lock::CompleteStatus::kCompleted) ++tally.errors;
  }
  const double done_ms = MsSince(tick);
  std::lock_guard lock(tally.mu);
  for (const int j : won_jobs) ++tally.winners[{j, tick}];
  if (paced) tally.claim_ms.insert(tally.claim_ms.end(), answered_ms.begin(), answered_ms.end());
  tally.batch_ms.push_back(claimed);
  tally.done_ms.push_back(done_ms);
  tally.claim_phase_ms.push_back(claimed - started);
  tally.complete_phase_ms.push_back(done_ms - claimed);
}

// Runs every replica on its own thread over ticks [first, first + count); paced, each
// tick begins at its second; else back to back, together if `a.sat_barrier`.
inline void RunBatchedReplicas(std::vector<std::unique_ptr<lock::Backend>>& replicas,
                               const BatchArgs& a, std::int64_t first, int count, bool paced,
                               BatchTally& tally) {
  std::barrier tick_start(a.replicas);
  std::vector<std::thread> threads;
  for (int r = 0; r < a.replicas; ++r) {
    threads.emplace_back([&, r] {
      for (std::int64_t t = first; t < first + count; ++t) {
        if (paced) {
          std::this_thread::sleep_until(
              std::chrono::system_clock::time_point(std::chrono::seconds(t)));
        } else if (a.sat_barrier) {
          tick_start.arrive_and_wait();
        }
        ClaimTickBatched(*replicas[static_cast<std::size_t>(r)], r, a.replicas, a.jobs, t, paced,
                         tally);
      }
    });
  }
  for (auto& th : threads) th.join();
}

// What one saturation run decided: job-ticks/s, and its exactly-once violations plus
// errors (0: every check held).
struct SaturationRun {
  double job_ticks_per_s = 0;
  int failed = 0;
};

// The saturation run over ticks [first, first + a.sat_ticks), with its report lines.
inline SaturationRun RunSaturation(std::vector<std::unique_ptr<lock::Backend>>& replicas,
                                   const BatchArgs& a, std::int64_t first) {
  BatchTally sat;
  const double server_cpu_before = a.server_pid > 0 ? ProcessCpuSeconds(a.server_pid) : -1;
  const double own_cpu_before = OwnCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  RunBatchedReplicas(replicas, a, first, a.sat_ticks, /*paced=*/false, sat);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double server_cpu =
      a.server_pid > 0 ? ProcessCpuSeconds(a.server_pid) - server_cpu_before : -1;
  const double own_cpu = OwnCpuSeconds() - own_cpu_before;
  const int bad = ExactlyOnceViolations(sat.winners, a.jobs, first, first + a.sat_ticks - 1);
  SaturationRun run;
  run.job_ticks_per_s = a.jobs * a.sat_ticks / secs;
  run.failed = bad + sat.errors;
  std::printf(
      "saturation %d ticks%s: %ld claims in %.2f s = %.0f claims/s, %.0f job-ticks/s, "
      "violations %d, errors %d\n"
      "  per replica and tick: claims (observations in) p50 %.0f ms, completes p50 %.0f ms\n",
      a.sat_ticks, a.sat_barrier ? " (replicas begin each tick together)" : "", sat.claims.load(),
      secs, static_cast<double>(sat.claims.load()) / secs, run.job_ticks_per_s, bad,
      sat.errors.load(), Percentile(sat.claim_phase_ms, 0.5),
      Percentile(sat.complete_phase_ms, 0.5));
  // Per job-tick, as the ceilings' `cpu:` lines give it per 1,000 key changes (whole
  // clock ticks of the kernel: about ±1% over a second of saturation).
  const double job_ticks = static_cast<double>(a.jobs) * a.sat_ticks;
  if (server_cpu >= 0) {
    std::printf("  cpu: server %.2f s (%.0f us per job-tick), clients %.2f s (%.0f us)\n",
                server_cpu, 1e6 * server_cpu / job_ticks, own_cpu, 1e6 * own_cpu / job_ticks);
  }
  std::fflush(stdout);
  return run;
}

// Both runs, their report, and the exit status (0: every check held).
inline int RunBatchBench(std::vector<std::unique_ptr<lock::Backend>>& replicas,
                         const BatchArgs& a) {
  BatchTally paced;
  const std::int64_t first = std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count() +
                             1;
  RunBatchedReplicas(replicas, a, first, a.seconds, /*paced=*/true, paced);
  const int paced_bad = ExactlyOnceViolations(paced.winners, a.jobs, first, first + a.seconds - 1);

  std::printf(
      "paced %ds: %ld claims, %d job-ticks, exactly-once violations %d, errors %d, missed %d\n"
      "  claim lateness (each answer - T) p50 %.0f ms p99 %.0f ms max %.0f ms\n"
      "  batch answered p50 %.0f ms p99 %.0f ms; tick done p50 %.0f ms p99 %.0f ms\n",
      a.seconds, paced.claims.load(), a.jobs * a.seconds, paced_bad, paced.errors.load(),
      paced.missed.load(), Percentile(paced.claim_ms, 0.5), Percentile(paced.claim_ms, 0.99),
      Percentile(paced.claim_ms, 1.0), Percentile(paced.batch_ms, 0.5),
      Percentile(paced.batch_ms, 0.99), Percentile(paced.done_ms, 0.5),
      Percentile(paced.done_ms, 0.99));
  std::fflush(stdout);
  // Saturation ticks lie after the paced ones (claims are monotonic per job), without a
  // starting deadline.
  const SaturationRun sat = RunSaturation(replicas, a, first + a.seconds + 1'000'000);
  return paced_bad + paced.errors + paced.missed + sat.failed == 0 ? 0 : 2;
}

// --replicas N --jobs M --seconds S --sat-ticks K --sat-barrier 0|1, and
// `extra(key, value)` for the rest.
template <typename Extra>
BatchArgs ParseBatchArgs(int argc, char** argv, BatchArgs a, Extra extra) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (key == "--replicas") {
      a.replicas = value;
    } else if (key == "--jobs") {
      a.jobs = value;
    } else if (key == "--seconds") {
      a.seconds = value;
    } else if (key == "--sat-ticks") {
      a.sat_ticks = value;
    } else if (key == "--sat-barrier") {
      a.sat_barrier = value != 0;
    } else {
      extra(key, value);
    }
  }
  return a;
}

}  // namespace tickd::bench
