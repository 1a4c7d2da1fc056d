// A run that is a call on a thread of this process rather than a child process: an
// in-process plugin (isolation: none, plugin_inprocess.cc) or a function of a
// libtickd program (lib/callable_runner.cc). Stopping is cooperative — a thread
// cannot be killed — so the call is handed a std::stop_token that Terminate and the
// timeout fire, and a call that does not return in time is reported, not waited for.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "base/error.h"
#include "jobs/execution.h"

namespace tickd::jobs {

// How a call ended, as it says itself.
struct CallEnd {
  bool ok = false;               // kDone; else kFailed (when no stop was requested)
  std::optional<int> exit_code;  // RunResult::exit_code, when the call returns a status
  std::string error;             // RunResult::error: why it failed
};

// REQUIRES: does not throw (it runs on a thread of its own: catch inside).
using ThreadCall = std::function<CallEnd(std::stop_token stop)>;

struct ThreadCallOptions {
  // RunResult::error of a call still running spec.kill_grace after its stop was
  // requested.
  std::string ignored_stop;
  // Runs when the Execution is destroyed, on the thread destroying it (a sink the
  // call writes to can be detached here: its owner may go once the Execution does).
  std::function<void()> on_destroy;
  // RunResult::dropped_lines when the run ends (null: 0). Called under no lock of
  // the Execution's.
  std::function<std::size_t()> dropped_lines;
};

// Starts `call` on a new, detached thread that owns it until it returns, whether or
// not the Execution is still there. Outcomes (WaitFor):
//  - the call returned before any stop was requested: kDone when CallEnd::ok, else
//    kFailed, with its exit_code and error;
//  - Terminate(reason) or spec.timeout requested the stop (the token fires): once the
//    call returns, that reason (kTimeout, kLeaseLost; anything else reads kKilled);
//  - the call still running spec.kill_grace after that: the reason, with
//    options.ignored_stop as the error; the thread goes on until the call returns.
// The destructor requests the stop (kKilled) and waits up to the kill grace.
// An Error only when no thread can be started (the call is then never made).
Result<std::unique_ptr<Execution>> StartThreadCall(const ProcessSpec& spec, ThreadCall call,
                                                   ThreadCallOptions options);

}  // namespace tickd::jobs
