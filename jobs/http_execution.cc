#include "jobs/http_execution.h"

#include <algorithm>
#include <stop_token>

#include "jobs/thread_execution.h"

namespace tickd::jobs {
namespace {

constexpr std::size_t kBodyOutputBytes = 4'096;  // of the response body, as output lines
// A cancelled transfer ends within milliseconds, so waiting for it costs nothing and
// keeps its result whole even with kill_grace: 0 (the supervisor then hears how the
// run ended, not that its thread ignored the stop).
constexpr milliseconds kCancelledTransferGrace{1'000};

// The body's first kBodyOutputBytes as lines (stream "http"). When the body went on,
// its last line kept is marked as cut (an empty one when the cut fell after a '\n').
void BodyLines(std::string_view body, bool truncated, CallOutput& output) {
  const auto without_cr = [](std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line;
  };
  body = body.substr(0, kBodyOutputBytes);
  for (std::size_t nl; (nl = body.find('\n')) != std::string_view::npos;) {
    output.Line("http", without_cr(body.substr(0, nl)));
    body.remove_prefix(nl + 1);
  }
  // What follows the last '\n': the cut line of a longer body, or a last unended line.
  if (truncated) {
    output.CutLine("http", body);
  } else if (!body.empty()) {
    output.Line("http", without_cr(body));
  }
}

// How one transfer ended, as the run's CallEnd. A stop (Terminate, spec.timeout)
// decides the outcome itself (thread_execution.h); a transfer it cancelled says nothing.
CallEnd TransferEnd(const HttpResult& a, const std::vector<StatusRange>& expect,
                    bool stop_requested) {
  if (a.end == HttpEnd::kAnswered) {
    if (StatusExpected(a.status, expect)) return CallEnd{true, std::nullopt, ""};
    return CallEnd{false, std::nullopt,
                   "HTTP status " + std::to_string(a.status) + " (expected " +
                       StatusRangesText(expect) + ")"};
  }
  if (stop_requested) return CallEnd{false, std::nullopt, ""};
  CallEnd end{false, std::nullopt, a.error};
  end.timed_out = a.end == HttpEnd::kTimeout;  // the request's own timeout
  return end;
}

std::string RangeText(const StatusRange& r) {
  if (r.first == r.second) return std::to_string(r.first);
  if (r.first % 100 == 0 && r.second == r.first + 99) return std::to_string(r.first / 100) + "xx";
  return std::to_string(r.first) + "-" + std::to_string(r.second);
}

}  // namespace

bool StatusExpected(int status, const std::vector<StatusRange>& ranges) {
  return std::any_of(ranges.begin(), ranges.end(), [status](const StatusRange& r) {
    return status >= r.first && status <= r.second;
  });
}

std::string StatusRangesText(const std::vector<StatusRange>& ranges) {
  std::string out;
  for (const StatusRange& r : ranges) out += (out.empty() ? "" : ", ") + RangeText(r);
  return out;
}

namespace {

// One attempt's transfer as a thread call, its options and its spec.
struct HttpAttempt {
  ThreadCall call;
  ThreadCallOptions options;
  ProcessSpec spec;
};

HttpAttempt MakeAttempt(const HttpJob& job, const ProcessSpec& spec, OutputSink sink) {
  HttpRequest request = job.request;
  constexpr std::pair<const char*, const char*> kTickHeaders[] = {
      {"X-Tickd-Job", "TICKD_JOB"},     {"X-Tickd-Tick", "TICKD_TICK"},
      {"X-Tickd-Tick-Unix", "TICKD_TICK_UNIX"}, {"X-Tickd-Fence", "TICKD_FENCE"},
      {"X-Tickd-Node", "TICKD_NODE"},   {"X-Tickd-Attempt", "TICKD_ATTEMPT"}};
  for (const auto& [header, var] : kTickHeaders) {
    if (auto it = spec.env.find(var); it != spec.env.end()) {
      request.headers.emplace_back(header, it->second);
    }
  }
  request.max_response_bytes = kBodyOutputBytes;
  auto output = std::make_shared<CallOutput>(std::move(sink), spec);
  HttpAttempt a;
  a.call = [output, request = std::move(request),
            expect = job.expect_status](std::stop_token stop) {
    HttpCall transfer;
    const std::stop_callback cancel(stop, [&transfer] { transfer.Cancel(); });
    const HttpResult r = transfer.Run(request);
    if (r.end == HttpEnd::kAnswered) BodyLines(r.body, r.body_truncated, *output);
    return TransferEnd(r, expect, stop.stop_requested());
  };
  a.options.ignored_stop = "the HTTP transfer did not end within kill_grace of its cancellation";
  a.options.output = std::move(output);
  a.spec = spec;
  a.spec.kill_grace = std::max(spec.kill_grace, kCancelledTransferGrace);
  return a;
}

}  // namespace

Result<std::unique_ptr<Execution>> StartHttp(const HttpJob& job, const ProcessSpec& spec,
                                             OutputSink sink) {
  HttpAttempt a = MakeAttempt(job, spec, std::move(sink));
  return StartThreadCall(a.spec, std::move(a.call), std::move(a.options));
}

Result<std::unique_ptr<PreparedStart>> PrepareHttp(
    const HttpJob& job, const ProcessSpec& spec, OutputSink sink,
    std::chrono::system_clock::time_point start_at,
    std::chrono::steady_clock::time_point start_bound) {
  HttpAttempt a = MakeAttempt(job, spec, std::move(sink));
  return PrepareThreadCall(a.spec, std::move(a.call), std::move(a.options), start_at,
                           start_bound);
}

}  // namespace tickd::jobs
