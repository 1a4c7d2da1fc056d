// One run of a job on this replica: a child process (shell:, run:, and plugins
// with isolation: process) or an in-process plugin call. The scheduler starts an
// Execution and never waits on it from its own thread: a per-run supervisor waits,
// renews the lease and ends the run.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace tickd::jobs {

using std::chrono::milliseconds;

struct ProcessSpec {
  std::vector<std::string> argv;           // argv[0] is looked up in PATH when it has no '/'
  std::map<std::string, std::string> env;  // on top of the daemon's environment (TICKD_*, job env)
  std::string workdir;                     // "" = the daemon's working directory
  std::string stdin_data;                  // the child's stdin (a notifier's JSON); "" = /dev/null
  milliseconds timeout{3'600'000};         // Terminate(kTimeout) after this
  milliseconds kill_grace{10'000};         // SIGKILL this long after SIGTERM
  std::size_t max_output_lines = 1'000;    // per run, both streams together; the rest is counted
  std::size_t max_line_bytes = 4'096;      // longer lines are cut (and marked)
};

// How a run ended (DESIGN §6 `run` outcomes).
enum class RunOutcome {
  kDone,       // exit status 0
  kFailed,     // non-zero exit, killed by a signal of its own, or could not start
  kTimeout,    // ran past its timeout and was terminated
  kLeaseLost,  // terminated because the lease was lost
  kKilled,     // terminated by the daemon's shutdown
};

std::string_view RunOutcomeName(RunOutcome o);  // "done" "failed" "timeout" "lease-lost" "killed"

struct RunResult {
  RunOutcome outcome = RunOutcome::kFailed;
  std::optional<int> exit_code;      // when the process exited
  std::optional<int> signal;         // when a signal ended it
  milliseconds duration{0};
  std::string error;                 // why it could not start, or what the plugin reported
  std::size_t dropped_lines = 0;     // output lines beyond max_output_lines
  // A call on a thread (thread_execution.h) that had not returned when this result was
  // given (it ignored its stop, or Kill gave up on it): its thread goes on.
  bool left_running = false;
  // The process exited leaving others in its process group; they were ended (SIGTERM,
  // SIGKILL after the kill grace) before this result was given.
  bool leftovers_ended = false;
};

// Receives each line of output as it arrives: stream is "stdout" or "stderr".
// Called from the execution's own thread.
using OutputSink = std::function<void(std::string_view stream, std::string_view line)>;

// Thread-safe.
class Execution {
 public:
  // A run still going is terminated (kKilled) and waited for (up to its kill grace);
  // no thread or zombie outlives the Execution. REQUIRES: not called from the sink.
  virtual ~Execution() = default;
  // Ends the run: SIGTERM to its process group (or the cancel flag of an in-process
  // plugin), SIGKILL after the kill grace. `reason` becomes the outcome (kTimeout,
  // kLeaseLost, kKilled). Idempotent; returns at once. The first reason wins; one
  // given after the process has exited does not change the outcome.
  virtual void Terminate(RunOutcome reason) = 0;
  // Ends the run now, without a grace: SIGKILL to its process group. A call on a
  // thread cannot be killed: its stop is requested (as Terminate does) and WaitFor no
  // longer waits for it (its result says left_running). `reason` as for Terminate (the
  // first reason given wins). Idempotent; returns at once; nothing once the run ended.
  virtual void Kill(RunOutcome reason) = 0;
  // Waits up to `d` for the end of the run (its output drained). nullopt: still running.
  // Once it returns a result, every later call returns the same result.
  virtual std::optional<RunResult> WaitFor(milliseconds d) = 0;
  // The run's process group (a child process: its pid), for the lease guard
  // (app/lease_guard.h); nullopt for a call on a thread.
  virtual std::optional<int> process_group() const { return std::nullopt; }
};

// Starts argv in its own process group (a vfork-style clone, jobs/process.cc) with
// stdin from /dev/null (or spec.stdin_data), an empty signal mask and default signal dispositions;
// stdout and stderr go to `sink`. Outcomes:
//  - an Execution that runs. It has no thread of its own: WaitFor (and the destructor)
//    call `sink`, enforce spec.timeout and the kill grace, and reap the process
//    (waitpid on its pid only; no SIGCHLD handler is installed), so the caller keeps
//    calling WaitFor until it returns a result. Terminate sends SIGTERM at once;
//  - an already finished Execution with a kFailed RunResult (and `error` set) when the
//    job itself cannot start: a missing program (exit_code 127, as a shell reports it),
//    one that cannot be executed (exit_code 126), a bad workdir (no exit_code), an
//    empty argv;
//  - an Error only when the daemon lacks a resource (pipes, fds, processes).
Result<std::unique_ptr<Execution>> StartProcess(const ProcessSpec& spec, OutputSink sink);

// The settle() of a run that starts itself at its instant (a prepared process or
// call): the runs of an instant start on their own timers, and the threads that look
// at them keep off the CPUs until those starts are done.
inline constexpr milliseconds kSettleAfterStart{20};

// A run made ready ahead of its instant (docs/design.md §1 "Early claims"). Destroying
// it unreleased leaves nothing behind (a prepared child process is killed and
// reaped; before its instant, the job never ran). Not thread-safe: one owner.
class PreparedStart {
 public:
  virtual ~PreparedStart() = default;
  // The run: with the outcomes of StartProcess. Once only, at its instant + settle()
  // or later (sooner, it waits for the instant).
  virtual Result<std::unique_ptr<Execution>> Release() = 0;
  // How long after the instant Release is best called: 0 when Release is what starts
  // the run; for a process that starts itself at its instant, long enough for the
  // other starts of that instant to be done.
  virtual milliseconds settle() const { return milliseconds(0); }
  // After Release: when the job started by the job's own clock reading (a prepared
  // process: just before its exec); nullopt when it is not known.
  virtual std::optional<std::chrono::system_clock::time_point> started() const {
    return std::nullopt;
  }
  // True when the run checks its lease itself at its instant (PrepareThreadCall: a
  // call past its start bound is never made); false when the caller must check it
  // before Release (a prepared process execs at its instant whatever the lease).
  virtual bool checks_start_bound() const { return false; }
  // Moves the start bound of a run that checks it (a renewal confirmed before the
  // start: the wall clock was set back); nothing for the others.
  virtual void ExtendStartBound(std::chrono::steady_clock::time_point /*bound*/) {}
  // The prepared child's process group (its pid) while unreleased; nullopt for a call.
  virtual std::optional<int> process_group() const { return std::nullopt; }
};

// The monotonic instant as far from now as the wall clock now says `start_at` is, less
// 1 ms. A prepared start waits until both clocks have reached their instant: the wall
// clock's timer makes the start of a clock that is right (the monotonic instant has
// passed by then: one wake-up, at T), a wall clock stepped ahead, or running fast,
// after the preparation starts nothing more than 1 ms early (docs/design.md §1 rule
// 15), and one stepped back delays the start as before.
std::chrono::steady_clock::time_point SteadyDeadline(
    std::chrono::system_clock::time_point start_at);

// Does everything StartProcess does before `start_at`, and leaves only the exec for
// it: the program is looked up, the environment and the pipes are built, and a child
// is cloned (sharing the daemon's memory, as the vfork-style clone does, so no page
// tables are copied) that sets itself up (process group, stdio, parent-death signal,
// workdir, descriptors), then sleeps on absolute timers until SteadyDeadline(start_at)
// and start_at and execs: at the instant, no thread of the daemon has to run first.
// Release() waits until the child has exec'd (or failed to) and returns the
// Execution. The child is killed (SIGKILL) and reaped when the PreparedStart is
// destroyed unreleased, and dies with the thread that prepared it (parent-death
// signal), so a daemon that is killed leaves no child waiting.
// REQUIRES: the preparing thread outlives the run (RunSupervisor's does).
// Errors: as StartProcess (a program that cannot start gives a finished Execution
// at Release, not an Error here).
Result<std::unique_ptr<PreparedStart>> PrepareProcess(
    const ProcessSpec& spec, OutputSink sink, std::chrono::system_clock::time_point start_at);

// A PreparedStart that does nothing before Release and then calls `start` (runs that
// are not made ready ahead: a plugin that cannot load, test runners).
std::unique_ptr<PreparedStart> StartOnRelease(
    std::function<Result<std::unique_ptr<Execution>>()> start);

// {"/bin/sh", "-c", cmd}: the argv of a `shell:` job.
std::vector<std::string> ShellArgv(const std::string& cmd);

// An Execution that has already ended with `result` (WaitFor returns it at once,
// Terminate does nothing). For runs that fail before they start, and for tests.
std::unique_ptr<Execution> FinishedExecution(RunResult result);

}  // namespace tickd::jobs
