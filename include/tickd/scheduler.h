// Once-per-tick scheduling inside a program: register functions on cron schedules;
// at each tick every program (and every `tickd run` daemon) on the same store races
// to claim it, one wins and calls the function under a renewed lease with a fencing
// token. The engine, claims, log lines and metrics are the daemon's own
// (docs/design.md §1, §6; what is shared: §10).
//
//   tickd::Store store = tickd::Store::open("sqlite:///var/lib/shop/tickd.db").value();
//   tickd::Scheduler scheduler(store);
//   scheduler.add("orders-cleanup", "*/5 * * * *", [&](const tickd::RunContext& run) {
//     db.cancel_unpaid_orders(/*older_than=*/30min, /*fence=*/run.fence, run.stop);
//   });
//   scheduler.start();
//   ...
//   scheduler.stop();  // waits for running functions, completes their claims
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "tickd/export.h"
#include "tickd/store.h"

namespace tickd {

// What a function is told about its run. Valid for the duration of the call.
struct RunContext {
  std::string job;                        // the name given to Scheduler::add
  std::chrono::sys_seconds tick;          // T: the scheduled instant (the claim key)
  std::uint64_t fence = 0;                // strictly increasing per job across the store
  std::string node;                       // this program's node id
  int attempt = 1;                        // always 1 (retries are the daemon's only)
  // Fires when the run must stop: the lease was lost (another node may run the tick
  // now), the job's timeout passed, or the scheduler is stopping past its grace.
  // A function that ignores it for JobOptions::stop_grace more is reported
  // (docs/design.md §10) and left running on its thread.
  std::stop_token stop;
};

// The function run at each won tick, on a thread of its own. Returning is success;
// an exception is a failed run (its what() in the `run` log line). Either way the
// claim is completed: the tick is never left claimed.
using JobFunction = std::function<void(const RunContext&)>;

enum class Dialect {
  kCron,    // 5 fields, 6 (seconds first) or 7 (+ year); @hourly, @every 10s, …
  kQuartz,  // Quartz: seconds first, ? L W #
  kSpring,  // Spring's @Scheduled(cron = …): 6 fields
};

enum class Concurrency {
  kForbid,  // a tick is skipped (busy) while the job's previous run still goes anywhere
  kAllow,   // runs of successive ticks may overlap
};

enum class Misfire {
  kSkip,     // ticks missed while no node was up are not run
  kRunOnce,  // at start, the latest missed tick is run once
};

// Per job; the defaults are the job file's.
struct JobOptions {
  std::string zone = "UTC";              // IANA time zone the schedule is read in
  Dialect dialect = Dialect::kCron;
  // The claim's lease, renewed every lease/3 while the function runs.
  // nullopt: SchedulerOptions::lease.
  std::optional<std::chrono::milliseconds> lease;
  Concurrency concurrency = Concurrency::kForbid;
  Misfire misfire = Misfire::kSkip;
  // How late after T a tick may still start (a node that comes late does not run
  // it). nullopt: min(60 s, the gap to the following tick).
  std::optional<std::chrono::milliseconds> starting_deadline;
  // The run's stop token fires after this (outcome timeout).
  std::chrono::milliseconds timeout{std::chrono::hours(1)};
  // How long a function may go on after its stop token fired before it is reported
  // as ignoring it (outcome lease-lost, timeout or killed, with an error) and its
  // claim completed without it.
  std::chrono::milliseconds stop_grace{std::chrono::seconds(10)};
};

enum class LogFormat { kLogfmt, kJson };

struct SchedulerOptions {
  // "": <hostname>-<pid>. At most 128 bytes of UTF-8 without spaces, control characters,
  // '"' or '=' (the daemon's node.id).
  std::string node;
  std::chrono::milliseconds lease{15'000};           // lock.lease: default of every job
  // lock.claim_lead: ticks are claimed this long before T; the function still starts
  // at T. Below 1 s; the daemon's default.
  std::chrono::milliseconds claim_lead{200};
  // Runs going at once at most: ticks of an instant beyond the room left are not
  // claimed (left to other replicas), so a won tick always runs.
  int max_concurrent_runs = 64;
  // The daemon's log lines (docs/design.md §6). `log` receives each line, newline
  // included, one call at a time; empty: written to stderr.
  LogFormat log_format = LogFormat::kLogfmt;
  bool log_debug = false;
  std::function<void(std::string_view line)> log;
};

// Thread-safe. add() before start(); start() once; stop() (or the destructor) once.
class TICKD_API Scheduler {
 public:
  // REQUIRES: options as documented (else std::invalid_argument).
  explicit Scheduler(Store store, SchedulerOptions options = {});
  // stop(0) if still running, then waits for every function the scheduler called,
  // abandoned ones included (a function that never returns blocks here).
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Registers `fn` on `schedule` under `name`. Throws std::invalid_argument (naming
  // the job) when the name is not [a-z0-9._-]{1,64} or taken, the schedule does not
  // parse in its dialect and zone, or an option is out of range; std::logic_error
  // after start().
  void add(std::string name, std::string schedule, JobFunction fn, JobOptions options = {});

  // Starts claiming. Ticks due now within their starting deadline are claimed at
  // once; misfire kRunOnce jobs claim their latest missed tick. std::logic_error when
  // called twice; std::runtime_error ("… clock: …", also logged as an `error start`
  // line) when this process's waits on the monotonic clock do not end when due, which
  // it checks first (~20 ms; up to 3 s when they do not): the known cause is
  // libfaketime in LD_PRELOAD without FAKETIME_DONT_FAKE_MONOTONIC=1.
  void start();

  // Stops claiming; running functions may finish for `grace`, then their stop
  // tokens fire (outcome killed); returns once every claim this scheduler won is
  // completed in the store. Idempotent (a second caller waits for the first); before
  // start() it only makes a later start() throw std::logic_error.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(30));

  // This scheduler's node id (SchedulerOptions::node or the default).
  const std::string& node() const;
  // Runs whose claims are not completed yet.
  int active_runs() const;
  // The Prometheus text of the daemon's metrics for this scheduler's runs
  // (docs/design.md §9), for the program's own /metrics.
  std::string metrics_text() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tickd
