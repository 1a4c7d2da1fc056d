// The "job-tick write-set ceiling" of the batched claim benchmarks (etcd_claim_bench,
// zookeeper_claim_bench): how fast the store absorbs the writes a job-tick needs at
// minimum when a client does nothing else — no reads, no compares, no decisions, every
// write accepted — batched as well as the store allows. Our batched path
// (bench/batch_claim_driver.h) can never beat it; ours / ceiling says how much of the
// store's capacity the protocol's reads, checks and round trips leave unused.
//
// The work comes in rounds, one round = one instant T of every job (job j, tick
// T0 + round), on N connections (the replicas, one thread each) in lockstep steps:
//   kClaims:        the winner of each job (replica j % N) writes its claim;
//   kObservations:  the replicas write their observations of every job (the ledger),
//                   as ours does after each chunk of claims (a lean write set: only
//                   the replicas that did not win; the winner's is in its claim);
//   kCompletes:     the winner writes its complete.
// Every connection finishes a step before any starts the next, so a complete never
// overtakes its claim, and each step's wall time is measured. The run stops after the
// round in which `seconds` ran out, or after `max_rounds`.
#pragma once

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace tickd::bench {

enum CeilingStep { kClaims, kObservations, kCompletes, kCeilingSteps };

struct CeilingRun {
  long rounds = 0;  // instants of every job written
  double secs = 0;  // wall time of those rounds
  long errors = 0;  // requests the store refused or did not answer
  long requests = 0;
  double step_secs[kCeilingSteps] = {};  // wall time spent in each step
};

// Runs rounds of `step(replica, round, CeilingStep)` (which returns {requests sent,
// errors}) on `replicas` threads in lockstep, as described above.
template <typename Step>
CeilingRun RunCeilingRounds(int replicas, double seconds, long max_rounds, Step step) {
  using Clock = std::chrono::steady_clock;
  std::atomic<long> errors{0}, requests{0};
  std::atomic<bool> stop{false};
  CeilingRun run;
  const auto start = Clock::now();
  auto step_start = start;
  int current = 0;
  // Runs once per step, on one thread, when every replica is through it.
  auto step_done = [&]() noexcept {
    const auto now = Clock::now();
    run.step_secs[current] += std::chrono::duration<double>(now - step_start).count();
    step_start = now;
    if (++current < kCeilingSteps) return;
    current = 0;
    ++run.rounds;
    if (std::chrono::duration<double>(now - start).count() >= seconds ||
        run.rounds >= max_rounds) {
      stop = true;
    }
  };
  std::barrier steps_done(replicas, step_done);
  std::vector<std::thread> threads;
  for (int r = 0; r < replicas; ++r) {
    threads.emplace_back([&, r] {
      for (long round = 0; !stop; ++round) {
        for (int s = 0; s < kCeilingSteps; ++s) {
          const auto [sent, failed] = step(r, round, static_cast<CeilingStep>(s));
          requests += sent;
          errors += failed;
          steps_done.arrive_and_wait();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  run.secs = std::chrono::duration<double>(Clock::now() - start).count();
  run.errors = errors;
  run.requests = requests;
  return run;
}

// One result line: job-ticks/s and store changes (keys or nodes)/s.
inline void PrintCeiling(const char* label, const CeilingRun& run, int jobs,
                         int changes_per_job_tick, const char* changes) {
  const double job_ticks = static_cast<double>(run.rounds) * jobs;
  std::printf(
      "ceiling %s: %ld rounds x %d jobs in %.2f s = %.0f job-ticks/s, %.0f %s/s, "
      "%.0f requests/s, errors %ld\n  per round: claims %.0f ms, observations %.0f ms, "
      "completes %.0f ms\n",
      label, run.rounds, jobs, run.secs, job_ticks / run.secs,
      job_ticks * changes_per_job_tick / run.secs, changes,
      static_cast<double>(run.requests) / run.secs, run.errors,
      1000 * run.step_secs[kClaims] / static_cast<double>(run.rounds),
      1000 * run.step_secs[kObservations] / static_cast<double>(run.rounds),
      1000 * run.step_secs[kCompletes] / static_cast<double>(run.rounds));
  std::fflush(stdout);
}

}  // namespace tickd::bench
