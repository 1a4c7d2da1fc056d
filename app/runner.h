// How the daemon starts one attempt of a job. The scheduler and the per-run
// supervisor see only this interface, so tests can supply runs that end on command;
// the real one (NewProcessRunner) is jobs::StartProcess.
#pragma once

#include <memory>
#include <string>

#include "base/clock.h"
#include "base/error.h"
#include "config/config.h"
#include "jobs/execution.h"

namespace tickd::app {

// Thread-safe: supervisors of different runs call Start concurrently.
class Runner {
 public:
  virtual ~Runner() = default;
  // Starts one attempt of `job` as described by `spec` (argv, environment, workdir,
  // timeout). An Error when it could not be started at all; the attempt then
  // counts as failed. May throw: the supervisor still completes the claim.
  virtual Result<std::unique_ptr<jobs::Execution>> Start(const config::Job& job,
                                                         const jobs::ProcessSpec& spec,
                                                         jobs::OutputSink sink) = 0;
  // Makes the first attempt ready to start when the wall clock reads `start_at`
  // (jobs::PreparedStart). `start_bound` is when the lease ends for a start, on the
  // Steady() time line: a prepared start that checks it itself
  // (PreparedStart::checks_start_bound) does not start at or past it. The default
  // prepares nothing: Release calls Start.
  // REQUIRES: `job` outlives the PreparedStart.
  virtual Result<std::unique_ptr<jobs::PreparedStart>> Prepare(const config::Job& job,
                                                               const jobs::ProcessSpec& spec,
                                                               jobs::OutputSink sink,
                                                               WallTime /*start_at*/,
                                                               SteadyTime /*start_bound*/) {
    return jobs::StartOnRelease([this, &job, spec, sink = std::move(sink)]() mutable {
      return Start(job, spec, std::move(sink));
    });
  }
};

// shell: and run: jobs as child processes (jobs::StartProcess); http: jobs as one
// request on a thread (jobs::StartHttp); plugin: jobs in a
// child `tickd plugin-host` (isolation: process, the host being this executable,
// /proc/self/exe resolved now) or on a worker thread (isolation: none; see
// jobs/plugin_execution.h). Prepared ahead: processes and plugin hosts
// (jobs::PrepareProcess), in-process plugins and http: requests
// (jobs::PrepareThreadCall; the clocks
// are the real ones: start_at on system_clock, start_bound on steady_clock).
std::unique_ptr<Runner> NewProcessRunner();
// The same with an explicit plugin host binary (tests running outside tickd).
std::unique_ptr<Runner> NewProcessRunner(std::string plugin_host);

}  // namespace tickd::app
