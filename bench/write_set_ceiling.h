// The "job-tick write-set ceiling" of the batched claim benchmarks (etcd_claim_bench,
// zookeeper_claim_bench): how fast the store absorbs the writes a job-tick needs at
// minimum when a client does nothing else — no reads, no compares, no decisions, every
// write accepted — batched as well as the store allows. Our batched path
// (bench/batch_claim_driver.h) can never beat it; ours / ceiling says how much of the
// store's capacity the protocol's reads, checks and round trips leave unused.
//
// The work comes in rounds, one round = one instant T of every job (job j, tick
// T0 + round), on N connections (the replicas, one thread each) in lockstep:
//   step 0 (claims):   the winner of each job (replica j % N) writes its claim;
//   step 1 (finish):   the winner writes its complete, and every replica writes its
//                      observation of every job (the ledger), as each replica does.
// All connections finish step 0 before any starts step 1, so a complete never
// overtakes its claim. The run stops after the round in which `seconds` ran out, or
// after `max_rounds`.
#pragma once

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace tickd::bench {

struct CeilingRun {
  long rounds = 0;  // instants of every job written
  double secs = 0;  // wall time of those rounds
  long errors = 0;  // requests the store refused or did not answer
  long requests = 0;
};

// Runs rounds of `step(replica, round, step_index)` (which returns {requests sent,
// errors}) on `replicas` threads in lockstep, as described above.
template <typename Step>
CeilingRun RunCeilingRounds(int replicas, double seconds, long max_rounds, Step step) {
  std::atomic<long> errors{0}, requests{0};
  std::atomic<bool> stop{false};
  long rounds = 0;
  const auto start = std::chrono::steady_clock::now();
  auto after_finish = [&]() noexcept {  // runs once per round, on one thread
    ++rounds;
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (secs >= seconds || rounds >= max_rounds) stop = true;
  };
  std::barrier claims_done(replicas);
  std::barrier round_done(replicas, after_finish);
  std::vector<std::thread> threads;
  for (int r = 0; r < replicas; ++r) {
    threads.emplace_back([&, r] {
      for (long round = 0; !stop; ++round) {
        for (int s = 0; s < 2; ++s) {
          const auto [sent, failed] = step(r, round, s);
          requests += sent;
          errors += failed;
          if (s == 0) claims_done.arrive_and_wait();
        }
        round_done.arrive_and_wait();
      }
    });
  }
  for (auto& t : threads) t.join();
  CeilingRun run;
  run.rounds = rounds;
  run.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
      "%.0f requests/s, errors %ld\n",
      label, run.rounds, jobs, run.secs, job_ticks / run.secs,
      job_ticks * changes_per_job_tick / run.secs, changes,
      static_cast<double>(run.requests) / run.secs, run.errors);
  std::fflush(stdout);
}

// True when the arguments ask for the usage text (the benches take "--key value" pairs).
inline bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

}  // namespace tickd::bench
