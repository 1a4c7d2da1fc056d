#include "app/notifier.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "app/backend_call.h"
#include "app/scheduler.h"  // NewOwnerToken
#include "jobs/execution.h"
#include "jobs/http_call.h"

namespace tickd::app {

using std::chrono::milliseconds;

namespace {

// Of a shell notifier's own output, what is kept for its error message.
constexpr std::size_t kNotifierOutputBytes = 512;
// How long a cancelled shell notifier has between SIGTERM and SIGKILL.
constexpr milliseconds kNotifierKillGrace{1'000};
// A miss notice's claim is completed at once; its lease only matters if this replica
// dies in between.
constexpr milliseconds kMissNoticeLease{60'000};

std::string DurationText(milliseconds d) {
  const std::string s = FormatSeconds(d);  // "0.509s"
  return s.empty() || s.back() != 's' ? s : s.substr(0, s.size() - 1);
}

bool SendHttp(const config::Notifier& target, const NotifyEvent& e, CancelToken& cancel,
              std::string* error) {
  jobs::HttpRequest req;
  req.method = "POST";
  req.url = target.url;
  req.headers = target.headers;
  req.headers.emplace_back("Content-Type", "application/json");
  req.body = NotifyJson(e);
  req.timeout = target.timeout;
  req.max_response_bytes = 256;
  jobs::HttpCall call;
  cancel.OnCancel([&call] { call.Cancel(); });
  const jobs::HttpResult r = call.Run(req);
  cancel.OnCancel({});
  if (r.end == jobs::HttpEnd::kAnswered && r.status >= 200 && r.status <= 299) return true;
  if (r.end == jobs::HttpEnd::kAnswered) {
    *error = "HTTP status " + std::to_string(r.status);
  } else {
    *error = r.error;
  }
  return false;
}

bool SendShell(const config::Notifier& target, const NotifyEvent& e, CancelToken& cancel,
               std::string* error) {
  jobs::ProcessSpec spec;
  spec.argv = jobs::ShellArgv(*target.shell);
  spec.env = NotifyEnvironment(e);
  spec.workdir = e.workdir;
  spec.timeout = target.timeout;
  spec.kill_grace = kNotifierKillGrace;
  spec.stdin_data = NotifyJson(e);
  spec.max_output_lines = 20;
  std::string last_output;  // its last lines: a failure's best explanation
  auto sink = [&last_output](std::string_view, std::string_view line) {
    last_output = std::string(line.substr(0, kNotifierOutputBytes));
  };
  Result<std::unique_ptr<jobs::Execution>> started = jobs::StartProcess(spec, sink);
  if (!started) {
    *error = started.error().ToString();
    return false;
  }
  jobs::Execution& exec = **started;
  cancel.OnCancel([&exec] { exec.Terminate(jobs::RunOutcome::kKilled); });
  std::optional<jobs::RunResult> r;
  while (!(r = exec.WaitFor(milliseconds(100)))) {
  }
  cancel.OnCancel({});
  if (r->outcome == jobs::RunOutcome::kDone) return true;
  *error = std::string(jobs::RunOutcomeName(r->outcome));
  if (r->exit_code) *error += " exit " + std::to_string(*r->exit_code);
  if (!r->error.empty()) *error += ": " + r->error;
  if (!last_output.empty()) *error += ": " + last_output;
  return false;
}

}  // namespace

std::string NotifyJson(const NotifyEvent& e) {
  nlohmann::json j;
  j["event"] = e.event;
  j["job"] = e.job;
  j["tick"] = FormatTick(e.tick_unix);
  j["tick_unix"] = e.tick_unix;
  j["node"] = e.node;
  j["fence"] = e.fence == 0 ? nlohmann::json(nullptr) : nlohmann::json(e.fence);
  j["outcome"] = e.outcome;
  j["exit"] = e.exit_code ? nlohmann::json(*e.exit_code) : nlohmann::json(nullptr);
  j["signal"] = e.signal ? nlohmann::json(*e.signal) : nlohmann::json(nullptr);
  j["duration_seconds"] = static_cast<double>(e.duration.count()) / 1000.0;
  j["attempts"] = e.attempts;
  j["error"] = e.error;
  j["output"] = e.output;
  j["output_truncated"] = e.output_truncated;
  // Invalid UTF-8 in a job's output must not cost the notification.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::map<std::string, std::string> NotifyEnvironment(const NotifyEvent& e) {
  std::map<std::string, std::string> env = e.job_env;
  env["TICKD_JOB"] = e.job;
  env["TICKD_TICK"] = FormatTick(e.tick_unix);
  env["TICKD_TICK_UNIX"] = std::to_string(e.tick_unix);
  env["TICKD_NODE"] = e.node;
  if (e.fence != 0) env["TICKD_FENCE"] = std::to_string(e.fence);
  env["TICKD_NOTIFY_EVENT"] = e.event;
  env["TICKD_NOTIFY_OUTCOME"] = e.outcome;
  if (e.exit_code) env["TICKD_NOTIFY_EXIT"] = std::to_string(*e.exit_code);
  if (e.signal) env["TICKD_NOTIFY_SIGNAL"] = std::to_string(*e.signal);
  env["TICKD_NOTIFY_DURATION"] = DurationText(e.duration);
  env["TICKD_NOTIFY_ATTEMPTS"] = std::to_string(e.attempts);
  env["TICKD_NOTIFY_ERROR"] = e.error;
  // NUL cannot be in the environment; the JSON on stdin has the exact text.
  std::string output = e.output;
  std::replace(output.begin(), output.end(), '\0', ' ');
  env["TICKD_NOTIFY_OUTPUT"] = output;
  return env;
}

std::string NotifyOutputText(const jobs::OutputTail& tail, bool* truncated) {
  std::string out;
  for (const jobs::OutputLine& line : jobs::ParseOutputTail(tail.Text())) {
    if (line.stream == "tickd") continue;  // the note of what was cut: `truncated` says it
    out += (out.empty() ? "" : "\n") + line.text;
  }
  *truncated = tail.cut_bytes() > 0;
  return out;
}

void CancelToken::OnCancel(std::function<void()> cancel) {
  std::unique_lock lock(mu_);
  if (cancelled_ && cancel) {
    lock.unlock();
    cancel();
    return;
  }
  on_cancel_ = std::move(cancel);
}

void CancelToken::Cancel() {
  std::lock_guard lock(mu_);  // held while cancelling: the sender cannot clear it meanwhile
  cancelled_ = true;
  if (on_cancel_) on_cancel_();
}

bool CancelToken::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

bool SendNotification(const config::Notifier& target, const NotifyEvent& e, CancelToken& cancel,
                      std::string* error) {
  return target.shell ? SendShell(target, e, cancel, error) : SendHttp(target, e, cancel, error);
}

Result<bool> ClaimMissNotice(lock::Backend& backend, const config::Job& job,
                             const std::string& config_hash, std::int64_t tick,
                             const std::string& node, WallTime now, bool store_said_missed) {
  // `backend: none` shares nothing and always answers won: each replica runs every
  // tick on its own, so each notifies its own misses.
  if (backend.name() == "none") return true;
  lock::ClaimRequest req;
  req.tick_unix = tick;
  req.node = node;
  req.config_hash = config_hash;
  req.node_wall = now;
  req.forbid_overlap = false;
  if (!store_said_missed) {
    // Missed by this replica's reckoning only: ask the store whether anybody claimed
    // it. A zero deadline answers `missed` for a tick nobody claimed and `lost`
    // (someone ran it), `superseded` (nobody did, a later tick was) or `early` (the
    // store's clock is not at T yet) otherwise.
    req.job = job.name;
    req.owner_token = NewOwnerToken();
    req.lease = kMissNoticeLease;
    req.starting_deadline = milliseconds(0);
    // A tick the store's clock has not reached (this replica's clock is ahead) is
    // `early` and nothing is written: without the check the probe would win it, and
    // its released record would keep the tick from running when it comes (rule 15).
    req.max_lead = milliseconds(0);
    Result<lock::ClaimOutcome> real = CallBackend("claim", [&] { return backend.Claim(req); });
    if (!real) return tl::unexpected(real.error());
    if (real->status == lock::ClaimStatus::kWon) {
      // The store's clock is behind T: the tick is not missed there. Give it back.
      lock::HeldClaim held{req.job, tick, req.owner_token, real->fence, req.lease};
      (void)CallBackend("complete", [&] {
        return backend.Complete(held, lock::Completion{"released", std::nullopt, milliseconds(0)});
      });
      return false;
    }
    if (real->status != lock::ClaimStatus::kMissed &&
        real->status != lock::ClaimStatus::kSuperseded) {
      return false;
    }
  }
  req.job = std::string(kMissNoticePrefix) + job.name;
  req.owner_token = NewOwnerToken();
  req.lease = kMissNoticeLease;
  req.starting_deadline = std::nullopt;
  Result<lock::ClaimOutcome> notice = CallBackend("claim", [&] { return backend.Claim(req); });
  if (!notice) return tl::unexpected(notice.error());
  if (notice->status != lock::ClaimStatus::kWon) return false;
  lock::HeldClaim held{req.job, tick, req.owner_token, notice->fence, req.lease};
  Result<lock::CompleteStatus> completed = CallBackend("complete", [&] {
    return backend.Complete(held, lock::Completion{"done", std::nullopt, milliseconds(0)});
  });
  (void)completed;  // won is what counts; an unfinished record expires with its lease
  return true;
}

Notifier::Notifier(Clock& clock, Logger& log, Metrics* metrics, std::string node,
                   NotifierOptions options, NotifySender sender)
    : clock_(clock),
      log_(log),
      metrics_(metrics ? *metrics : NullMetrics()),
      node_(std::move(node)),
      options_(options),
      sender_(std::move(sender)) {
  worker_ = std::thread([this] { Work(); });
}

Notifier::~Notifier() { Shutdown(milliseconds(0)); }

void Notifier::RunEnded(const config::Job& job, NotifyEvent e) {
  const bool done = e.outcome == "done";
  const std::optional<config::Notifier>& target = done ? job.on_success : job.on_failure;
  if (!target) return;
  e.event = done ? "success" : "failure";
  if (e.job_env.empty()) e.job_env = job.env;
  if (e.workdir.empty()) e.workdir = job.workdir;
  Enqueue(*target, std::move(e));
}

void Notifier::Missed(lock::Backend& backend, const config::Job& job,
                      const std::string& config_hash, std::int64_t tick, bool store_said_missed) {
  if (!job.on_miss) return;
  Item item;
  item.target = *job.on_miss;
  item.event.event = "miss";
  item.event.job = job.name;
  item.event.tick_unix = tick;
  item.event.node = node_;
  item.event.outcome = "missed";
  item.event.job_env = job.env;
  item.event.workdir = job.workdir;
  item.due = clock_.Steady();
  item.decide = [this, &backend, job, config_hash, tick, store_said_missed] {
    return ClaimMissNotice(backend, job, config_hash, tick, node_, clock_.Wall(),
                           store_said_missed);
  };
  Push(std::move(item));
}

void Notifier::Enqueue(const config::Notifier& target, NotifyEvent e) {
  Item item;
  item.target = target;
  item.event = std::move(e);
  item.due = clock_.Steady();
  Push(std::move(item));
}

void Notifier::Push(Item item) {
  bool draining = false;
  {
    std::lock_guard lock(mu_);
    draining = draining_;
    if (!draining && queue_.size() < options_.queue_limit) {
      queue_.push_back(std::move(item));
      cv_.notify_all();
      return;
    }
  }
  Finish(item, "dropped", draining ? "shutting down" : "the queue is full");
}

void Notifier::Work() {
  std::unique_lock lock(mu_);
  while (true) {
    if (stopping_ || (draining_ && queue_.empty())) break;
    if (queue_.empty()) {
      cv_.wait(lock);  // an idle daemon's notifier costs no wake-ups: Push and Shutdown notify
      continue;
    }
    auto next = std::min_element(queue_.begin(), queue_.end(),
                                 [](const Item& a, const Item& b) { return a.due < b.due; });
    const SteadyTime now = clock_.Steady();
    if (next->due > now) {
      const milliseconds wait = std::clamp<milliseconds>(next->due - now, milliseconds(1),
                                                         options_.max_real_wait);
      cv_.wait_for(lock, wait);
      continue;
    }
    Item item = std::move(*next);
    queue_.erase(next);
    busy_ = true;
    lock.unlock();
    TryOne(std::move(item));
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
  std::vector<Item> left = std::move(queue_);
  queue_.clear();
  lock.unlock();
  for (const Item& item : left) Finish(item, "dropped", "shutting down");
}

void Notifier::TryOne(Item item) {
  if (item.decide) {
    Result<bool> ours = item.decide();
    if (!ours) {
      std::vector<Field> fields = LineFields(item);
      fields.emplace_back("outcome", "error");
      fields.emplace_back("error", "cannot decide who sends it: " + ours.error().ToString());
      log_.Log(LogLevel::kWarn, "notify", fields);
      metrics_.Notification(item.event.job, item.event.event, "error");
      return;
    }
    if (!*ours) return;  // another replica sends it (or nobody missed it)
    item.decide = nullptr;
  }
  CancelToken cancel;
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      cancel.Cancel();
    } else {
      current_ = &cancel;
    }
  }
  std::string error;
  bool sent = false;
  if (!cancel.cancelled()) {
    try {
      sent = sender_(item.target, item.event, cancel, &error);
    } catch (const std::exception& e) {
      error = std::string("exception: ") + e.what();
    }
  }
  {
    std::lock_guard lock(mu_);
    current_ = nullptr;
  }
  ++item.tried;
  if (sent) {
    Finish(item, "sent", "");
    return;
  }
  if (cancel.cancelled()) {
    Finish(item, "dropped", "shutting down (" + error + ")");
    return;
  }
  if (item.tried >= std::max(1, item.target.attempts)) {
    Finish(item, "failed", error);
    return;
  }
  milliseconds backoff = options_.first_backoff;
  for (int i = 1; i < item.tried && backoff < options_.max_backoff; ++i) backoff *= 2;
  backoff = std::min(backoff, options_.max_backoff);
  if (log_.Enabled(LogLevel::kDebug)) {
    std::vector<Field> fields = LineFields(item);
    fields.emplace_back("outcome", "retry");
    fields.emplace_back("attempt", item.tried);
    fields.emplace_back("backoff", FormatSeconds(backoff));
    fields.emplace_back("error", error);
    log_.Log(LogLevel::kDebug, "notify", fields);
  }
  item.due = clock_.Steady() + backoff;
  std::lock_guard lock(mu_);  // past the grace, Work() drops it with the rest
  queue_.push_back(std::move(item));
  cv_.notify_all();
}

std::size_t Notifier::WaitingRetries() const {
  std::lock_guard lock(mu_);
  if (busy_) return 0;
  return static_cast<std::size_t>(
      std::count_if(queue_.begin(), queue_.end(), [](const Item& i) { return i.tried > 0; }));
}

std::vector<Field> Notifier::LineFields(const Item& item) const {
  return {{"job", item.event.job},
          {"tick", FormatTick(item.event.tick_unix)},
          {"node", node_},
          {"event", item.event.event}};
}

void Notifier::Finish(const Item& item, std::string_view result, const std::string& error) {
  std::vector<Field> fields = LineFields(item);
  fields.emplace_back("target", item.target.shell ? "shell" : "http");
  fields.emplace_back("outcome", result);
  if (item.tried > 0) fields.emplace_back("attempts", item.tried);
  if (!error.empty()) fields.emplace_back("error", error);
  log_.Log(result == "sent" ? LogLevel::kInfo : LogLevel::kWarn, "notify", fields);
  metrics_.Notification(item.event.job, item.event.event, result);
}

void Notifier::Shutdown(milliseconds grace) {
  std::unique_lock lock(mu_);
  if (!worker_.joinable()) return;
  draining_ = true;
  cv_.notify_all();
  const SteadyTime until = clock_.Steady() + grace;
  while ((busy_ || !queue_.empty()) && clock_.Steady() < until) {
    cv_.wait_for(lock, std::clamp<milliseconds>(until - clock_.Steady(), milliseconds(1),
                                                options_.max_real_wait));
  }
  stopping_ = true;
  if (current_ != nullptr) current_->Cancel();
  cv_.notify_all();
  lock.unlock();
  worker_.join();
}

}  // namespace tickd::app
