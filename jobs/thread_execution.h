// A run that is a call on a thread of this process rather than a child process: an
// in-process plugin (isolation: none, plugin_inprocess.cc), an http: job's request
// (http_execution.cc) or a function of a libtickd program (lib/callable_runner.cc).
// Stopping is cooperative — a thread cannot be killed — so the call is handed a
// std::stop_token that Terminate and the timeout fire, and a call that does not return
// in time is reported, not waited for.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>

#include "base/error.h"
#include "jobs/execution.h"
#include "jobs/output_capture.h"

namespace tickd::jobs {

// How a call ended, as it says itself.
struct CallEnd {
  bool ok = false;               // kDone; else kFailed (when no stop was requested)
  std::optional<int> exit_code;  // RunResult::exit_code, when the call returns a status
  std::string error;             // RunResult::error: why it failed
  bool timed_out = false;        // !ok because the call's own time limit passed: kTimeout
};

// REQUIRES: does not throw (it runs on a thread of its own: catch inside).
using ThreadCall = std::function<CallEnd(std::stop_token stop)>;

// The output lines of a call, bounded as a process's are: at most
// spec.max_output_lines reach the sink, each cut as FitLine does; the rest are
// counted as dropped. Thread-safe: the call writes, its Execution detaches the sink
// when it goes (the sink's owner may go with it) and reports the lines dropped.
class CallOutput {
 public:
  CallOutput(OutputSink sink, const ProcessSpec& spec)
      : lines_(std::move(sink), spec.max_output_lines), max_line_bytes_(spec.max_line_bytes) {}

  // One line of `stream`, without its '\n'. Never throws (a throwing sink loses the line).
  void Line(std::string_view stream, std::string_view text);
  // The first bytes of a line whose rest was not kept (CutLine: marked as cut).
  void CutLine(std::string_view stream, std::string_view prefix);
  // Lines beyond max_output_lines so far.
  std::size_t dropped() const;
  // No line reaches the sink after this returns.
  void Detach();

 private:
  mutable std::mutex mu_;
  LineBudget lines_;  // guarded by mu_
  const std::size_t max_line_bytes_;
};

struct ThreadCallOptions {
  // RunResult::error of a call still running spec.kill_grace after its stop was
  // requested.
  std::string ignored_stop;
  // Where the call writes its output lines, if it has any: detached when the
  // Execution is destroyed; its dropped() is RunResult::dropped_lines.
  std::shared_ptr<CallOutput> output;
};

// Starts `call` on a new, detached thread that owns it until it returns, whether or
// not the Execution is still there. Outcomes (WaitFor):
//  - the call returned before any stop was requested: kDone when CallEnd::ok, else
//    kTimeout when CallEnd::timed_out, else kFailed, with its exit_code and error;
//  - Terminate(reason) or spec.timeout requested the stop (the token fires): once the
//    call returns, that reason (kTimeout, kLeaseLost; anything else reads kKilled);
//  - the call still running spec.kill_grace after that, or when Kill(reason) is
//    called: the reason, with options.ignored_stop as the error and left_running; the
//    thread goes on until the call returns.
// The destructor requests the stop (kKilled) and waits up to the kill grace.
// An Error only when no thread can be started (the call is then never made).
Result<std::unique_ptr<Execution>> StartThreadCall(const ProcessSpec& spec, ThreadCall call,
                                                   ThreadCallOptions options);

// `call` made ready ahead of its instant (docs/design.md §1 "Early claims"), as
// PrepareProcess makes a process ready: its thread is started now and waits on the
// wall clock itself (base/wall_alarm.h: an absolute CLOCK_REALTIME wait, so a step of the clock
// moves it) until `start_at`, then makes the call at once: at the instant, no other thread of the
// daemon has to run first. Unless, when it wakes, the monotonic clock reads `start_bound` or later
// (the run's lease is over by then, as its caller counts it; ExtendStartBound moves it): the call
// is then never made, and Release gives a finished kLeaseLost run ("the lease ran out before the
// job started"). Release() waits until the thread has made the call or declined it (sooner than
// start_at, it waits for start_at) and returns the Execution, with the outcomes of
// StartThreadCall, its timeout and duration counted from the call's start; started()
// is the wall clock's reading then; settle() gives the other starts of the instant
// time to be made before the caller's thread wants a CPU. Destroyed unreleased:
// before start_at the call is never made (the thread wakes and ends); after it, the
// call is stopped (kKilled) and waited for up to its kill grace, as the Execution's
// destructor does. An Error only when no thread can be started.
Result<std::unique_ptr<PreparedStart>> PrepareThreadCall(
    const ProcessSpec& spec, ThreadCall call, ThreadCallOptions options,
    std::chrono::system_clock::time_point start_at,
    std::chrono::steady_clock::time_point start_bound);

}  // namespace tickd::jobs
