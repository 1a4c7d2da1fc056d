#include "jobs/http_execution.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

namespace tickd::jobs {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr std::size_t kBodyOutputBytes = 4'096;  // of the response body, as output lines

// What the transfer thread and the Execution share; the thread is always joined (a
// cancelled transfer returns within milliseconds), so plain ownership suffices.
class HttpExecution final : public Execution {
 public:
  HttpExecution(HttpRequest request, std::vector<StatusRange> expect, const ProcessSpec& spec,
                OutputSink sink)
      : request_(std::move(request)),
        expect_(std::move(expect)),
        sink_(std::move(sink)),
        max_lines_(spec.max_output_lines),
        max_line_bytes_(spec.max_line_bytes),
        start_(SteadyClock::now()),
        timeout_(std::max(spec.timeout, milliseconds(0))) {}

  ~HttpExecution() override {
    Terminate(RunOutcome::kKilled);
    if (thread_.joinable()) thread_.join();
  }

  void Start() {
    thread_ = std::thread([this] {
      HttpResult r = call_.Run(request_);
      std::size_t dropped = 0;
      if (r.end == HttpEnd::kAnswered) dropped = Output(r.body);
      std::lock_guard lock(mu_);
      answer_ = std::move(r);
      dropped_ = dropped;
      end_ = SteadyClock::now();
      cv_.notify_all();
    });
  }

  void Terminate(RunOutcome reason) override {
    if (reason != RunOutcome::kTimeout && reason != RunOutcome::kLeaseLost) {
      reason = RunOutcome::kKilled;
    }
    {
      std::lock_guard lock(mu_);
      if (reason_ || answer_) return;
      reason_ = reason;
    }
    call_.Cancel();
  }

  std::optional<RunResult> WaitFor(milliseconds d) override {
    const SteadyClock::time_point until =
        SteadyClock::now() + std::min(d, milliseconds(std::chrono::hours(24)));
    std::unique_lock lock(mu_);
    while (true) {
      if (answer_) return MakeResult();
      const SteadyClock::time_point now = SteadyClock::now();
      if (!reason_ && now >= start_ + timeout_) {
        reason_ = RunOutcome::kTimeout;
        lock.unlock();
        call_.Cancel();
        lock.lock();
        continue;
      }
      if (now >= until) return std::nullopt;
      cv_.wait_until(lock, reason_ ? until : std::min(until, start_ + timeout_));
    }
  }

 private:
  // The body's first bytes as lines, on the transfer thread. Returns the lines dropped.
  std::size_t Output(std::string_view body) {
    body = body.substr(0, kBodyOutputBytes);
    std::size_t lines = 0;
    std::size_t dropped = 0;
    while (!body.empty()) {
      const std::size_t nl = body.find('\n');
      std::string_view line = body.substr(0, nl);
      body = nl == std::string_view::npos ? std::string_view() : body.substr(nl + 1);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (lines >= max_lines_) {
        ++dropped;
        continue;
      }
      ++lines;
      if (sink_) sink_("http", line.substr(0, max_line_bytes_));
    }
    return dropped;
  }

  // REQUIRES: mu_ held, answer_ set.
  RunResult MakeResult() {
    if (result_) return *result_;
    RunResult r;
    r.duration = std::chrono::duration_cast<milliseconds>(end_ - start_);
    r.dropped_lines = dropped_;
    const HttpResult& a = *answer_;
    if (reason_ && a.end != HttpEnd::kAnswered) {
      r.outcome = *reason_;  // cancelled (or timed out) by us
    } else if (a.end == HttpEnd::kTimeout) {
      r.outcome = RunOutcome::kTimeout;
      r.error = a.error;
    } else if (a.end == HttpEnd::kAnswered) {
      const bool ok = StatusExpected(a.status, expect_);
      r.outcome = reason_ ? *reason_ : ok ? RunOutcome::kDone : RunOutcome::kFailed;
      if (!ok) {
        r.error = "HTTP status " + std::to_string(a.status) + " (expected " +
                  StatusRangesText(expect_) + ")";
      }
    } else {
      r.outcome = reason_ ? *reason_ : RunOutcome::kFailed;
      r.error = a.error;
    }
    result_ = r;
    return r;
  }

  const HttpRequest request_;
  const std::vector<StatusRange> expect_;
  const OutputSink sink_;
  const std::size_t max_lines_;
  const std::size_t max_line_bytes_;
  const SteadyClock::time_point start_;
  const milliseconds timeout_;
  HttpCall call_;

  std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;
  std::optional<RunOutcome> reason_;
  std::optional<HttpResult> answer_;
  std::size_t dropped_ = 0;
  SteadyClock::time_point end_{};
  std::optional<RunResult> result_;
  std::thread thread_;
};

std::string RangeText(const StatusRange& r) {
  if (r.first == r.second) return std::to_string(r.first);
  if (r.first % 100 == 0 && r.second == r.first + 99) return std::to_string(r.first / 100) + "xx";
  return std::to_string(r.first) + "-" + std::to_string(r.second);
}

}  // namespace

bool StatusExpected(int status, const std::vector<StatusRange>& ranges) {
  return std::any_of(ranges.begin(), ranges.end(),
                     [status](const StatusRange& r) { return status >= r.first && status <= r.second; });
}

std::string StatusRangesText(const std::vector<StatusRange>& ranges) {
  std::string out;
  for (const StatusRange& r : ranges) out += (out.empty() ? "" : ", ") + RangeText(r);
  return out;
}

Result<std::unique_ptr<Execution>> StartHttp(const HttpJob& job, const ProcessSpec& spec,
                                             OutputSink sink) {
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
  auto exec = std::make_unique<HttpExecution>(std::move(request), job.expect_status, spec,
                                              std::move(sink));
  try {
    exec->Start();
  } catch (const std::system_error& e) {
    return MakeError("jobs: http thread", e.what());
  }
  return std::unique_ptr<Execution>(std::move(exec));
}

}  // namespace tickd::jobs
