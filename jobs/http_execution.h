// The `http:` job type (docs/design.md §4): one HTTP request per attempt, run as a
// thread call (thread_execution.h) so the supervisor treats it like a process — the
// stop that Terminate (lease lost, shutdown) or the timeout requests cancels the
// transfer at once.
#pragma once

#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "base/error.h"
#include "jobs/execution.h"
#include "jobs/http_call.h"

namespace tickd::jobs {

// An inclusive range of HTTP statuses: 204 is {204, 204}, 2xx is {200, 299}.
using StatusRange = std::pair<int, int>;

struct HttpJob {
  // The job's request. StartHttp adds X-Tickd-Job, X-Tickd-Tick (RFC 3339),
  // X-Tickd-Tick-Unix, X-Tickd-Fence, X-Tickd-Node and X-Tickd-Attempt from the
  // attempt's TICKD_* environment, after the job's own headers.
  HttpRequest request;
  std::vector<StatusRange> expect_status{{200, 299}};  // the statuses that mean `done`
};

// True when `status` is in one of `ranges`.
bool StatusExpected(int status, const std::vector<StatusRange>& ranges);
// "2xx", "204", "200-204", joined with ", ": for messages.
std::string StatusRangesText(const std::vector<StatusRange>& ranges);

// Starts one attempt of `job` (spec: env for the X-Tickd-* headers, timeout,
// max_output_lines, max_line_bytes; argv and workdir are not used). Outcomes:
//   done     a response whose status is in expect_status;
//   failed   another status (RunResult::error says which and what was expected), or
//            no response at all (refused, DNS, TLS: `error` says);
//   timeout  the request's own timeout or spec.timeout passed first;
//   lease-lost / killed: Terminate() cancelled the transfer.
// The first 4,096 bytes of the response body go to `sink` as lines (stream "http"),
// within spec.max_output_lines and max_line_bytes. An Error only when no thread can be
// started.
Result<std::unique_ptr<Execution>> StartHttp(const HttpJob& job, const ProcessSpec& spec,
                                             OutputSink sink);

// StartHttp made ready ahead of `start_at` (PrepareThreadCall): the request is built
// now and its thread waits for start_at, sending it then unless the monotonic clock
// has reached `start_bound` (the lease is over).
Result<std::unique_ptr<PreparedStart>> PrepareHttp(
    const HttpJob& job, const ProcessSpec& spec, OutputSink sink,
    std::chrono::system_clock::time_point start_at,
    std::chrono::steady_clock::time_point start_bound);

}  // namespace tickd::jobs
