// The Runner of library jobs (app/runner.h): each attempt calls the job's function on
// a thread of its own, as an Execution (jobs/thread_execution.h) the run supervisor
// drives like any other run — renewal, lease loss, timeout, completion, the `run` line and
// the metrics are the daemon's.
//
// Outcomes of one call (the `run` line's outcome= and error=):
//   returned            → done
//   threw               → failed, error="exception: <what()>"
//   stop requested (lease lost, timeout, shutdown) and returned within stop_grace
//                       → lease-lost / timeout / killed
//   stop requested and still running stop_grace later
//                       → the same outcome, error="the function ignored its stop
//                         token …"; the claim is completed without it and the thread
//                         keeps running until the function returns (WaitForCalls).
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "app/runner.h"
#include "jobs/thread_execution.h"
#include "tickd/scheduler.h"

namespace tickd::lib {

// Thread-safe.
class CallableRunner final : public app::Runner {
 public:
  // `prepare_ahead`: the engine's clock is the real one, so a run claimed ahead of T
  // is prepared as an in-process plugin is (jobs::PrepareThreadCall: its thread waits
  // for T on the wall clock and calls the function then, unless the lease's bound has
  // passed). Without it (a FakeClock in tests) the supervisor starts it at T.
  explicit CallableRunner(bool prepare_ahead = false) : prepare_ahead_(prepare_ahead) {}

  // REQUIRES: before the first Start of `name`.
  void Add(const std::string& name, JobFunction fn);

  // The context comes from spec.env (TICKD_TICK_UNIX, TICKD_FENCE, TICKD_NODE,
  // TICKD_ATTEMPT: app::JobEnvironment). A job without a function ends failed.
  Result<std::unique_ptr<jobs::Execution>> Start(const config::Job& job,
                                                 const jobs::ProcessSpec& spec,
                                                 jobs::OutputSink sink) override;

  Result<std::unique_ptr<jobs::PreparedStart>> Prepare(const config::Job& job,
                                                       const jobs::ProcessSpec& spec,
                                                       jobs::OutputSink sink, WallTime start_at,
                                                       SteadyTime start_bound) override;

  // Blocks until every function called has returned, abandoned ones included (and
  // every call prepared but never made has gone).
  void WaitForCalls();

 private:
  class Counted;
  // The call of `job`'s function; nullopt when it has none.
  std::optional<jobs::ThreadCall> MakeCall(const config::Job& job, const jobs::ProcessSpec& spec);

  const bool prepare_ahead_;
  struct Calls {
    std::mutex mu;
    std::condition_variable cv;
    int running = 0;
  };
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const JobFunction>> fns_;
  std::shared_ptr<Calls> calls_ = std::make_shared<Calls>();
};

}  // namespace tickd::lib
