// The lease's backstop outside the daemon (docs/design.md §1 rule 2): a run whose
// daemon is frozen (SIGSTOP, a debugger, a stopped container whose jobs are not in its
// cgroup) still ends by its lease's valid_until.
//
// The daemon's run supervisor ends a run whose lease is lost: SIGTERM at valid_until −
// stop_grace, SIGKILL at valid_until. A frozen daemon sends nothing, and its job would
// run on beside the replica that took the tick over. So the daemon starts one helper
// process at start, `tickd lease-guard` (this executable, in a process group of its
// own, so that a signal to the daemon's group does not stop it too), and tells it each
// run's process group and valid_until over a pipe: armed when the process is made
// (prepared or started), moved by every confirmed renewal, disarmed when the run ends.
// The guard SIGKILLs a group whose valid_until passes while it is armed, and SIGTERMs it
// at valid_until − stop_grace when the daemon is stopped then (its state in /proc: T
// or t), so that a job gets the grace it would get from a daemon that runs; a daemon
// that runs sends that SIGTERM itself, and the guard leaves it to it. When the daemon
// goes away (the pipe's end: killed, crashed), the guard SIGKILLs every group still
// armed at once — a job's children that outlive their leader too — and exits. A guard
// found gone (killed, crashed) is started again, and every run arms again.
//
// Only process groups: an in-process call cannot be killed from outside. Runs with
// on_lease_lost: continue are not armed. The deadline is on CLOCK_MONOTONIC, which
// both processes share (SteadyTime). A healthy daemon ends its runs first; the guard's
// kill is then a no-op on a group already gone.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/error.h"

namespace tickd::app {

// Thread-safe.
class LeaseGuard {
 public:
  // Called with each restart's new guard process, or why there is none.
  using Restarted = std::function<void(const Result<pid_t>&)>;
  // Starts the guard process: `exe lease-guard` (argv[0] `argv0`, by default `exe`),
  // its stderr the daemon's, its lines in `log_format` ("logfmt" or "json"). A guard
  // found gone (a write's EPIPE) is started again the same way, and `restarted` told.
  // Errors: the pipe, the process.
  static Result<std::unique_ptr<LeaseGuard>> Start(const std::string& exe,
                                                   const std::string& log_format,
                                                   std::string argv0 = {},
                                                   Restarted restarted = {});
  // Closes the pipe: the guard kills what is still armed (nothing, after a drain) and
  // exits; it is reaped here.
  ~LeaseGuard();
  LeaseGuard(const LeaseGuard&) = delete;
  LeaseGuard& operator=(const LeaseGuard&) = delete;

  // `pgid` (a run's process group) is SIGKILLed at `valid_until`, and SIGTERMed at
  // `term_at` (valid_until − stop_grace) if the daemon is stopped then, unless disarmed
  // or armed again with later ones first. `job` and `tick` name it in the guard's lines;
  // with the run's `fence` they also find its processes outside the group by their
  // environment (jobs/process_tree.h; fence 0: not).
  // False: not sent (the pipe is full — the guard is behind — or the guard is gone and
  // could not be started again); the guard keeps what it had, and the caller tries
  // again (RunSupervisor::Upkeep). Never blocks on the guard: a supervisor's own
  // deadlines come first.
  bool Arm(pid_t pgid, SteadyTime term_at, SteadyTime valid_until, const std::string& job,
           const std::string& tick, std::uint64_t fence = 0);
  void Disarm(pid_t pgid);

  // Moves each time a new guard process was started in place of one gone: what was
  // armed before is unknown to it, so each run arms again (RunSupervisor::Upkeep).
  std::uint64_t generation() const { return generation_.load(); }
  // Finds out, at most every kCheckEveryMs whoever calls, whether the guard is still
  // there (a write of nothing), and starts a new one if not: a guard killed while no
  // run had anything to tell it is replaced before a daemon's freeze needs it.
  static constexpr std::int64_t kCheckEveryMs = 500;
  void Check();

  pid_t pid() const;  // the guard process

 private:
  LeaseGuard(std::string exe, std::string argv0, std::string log_format, Restarted restarted,
             int fd, pid_t pid)
      : exe_(std::move(exe)),
        argv0_(std::move(argv0)),
        log_format_(std::move(log_format)),
        restarted_(std::move(restarted)),
        fd_(fd),
        pid_(pid) {}
  bool Send(const std::string& line);
  bool WriteLocked(const std::string& line);  // REQUIRES: mu_ held, fd_ >= 0

  const std::string exe_;
  const std::string argv0_;
  const std::string log_format_;
  const Restarted restarted_;
  mutable std::mutex mu_;
  int fd_;                                        // guarded by mu_
  pid_t pid_;                                     // guarded by mu_
  std::optional<std::int64_t> restart_tried_ms_;  // guarded by mu_: monotonic
  std::int64_t restart_backoff_ms_ = 1'000;       // guarded by mu_
  std::atomic<std::uint64_t> generation_ = 0;
  std::atomic<std::int64_t> last_check_ms_ = 0;
};

// LeaseGuard::Start on this executable (/proc/self/exe); null, with a `lease-guard
// outcome=unavailable` line (warn), when it cannot be started: runs then go unguarded
// while the daemon is frozen, as before the guard.
class Logger;
std::unique_ptr<LeaseGuard> StartLeaseGuard(Logger& log, const std::string& log_format,
                                            const std::string& node);

// `tickd lease-guard`: reads commands from stdin until its end, signals as above, writes
// a `lease-guard` line (warn) for each signal sent. Returns the exit status.
int RunLeaseGuard(const std::string& log_format);

}  // namespace tickd::app
