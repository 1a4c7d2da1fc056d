// Job notifications: `on_failure:`, `on_success:` and `on_miss:` (docs/design.md §4
// "Notifications"). Not to be confused with app/notify.h (systemd's sd_notify).
//
// Who sends: a run's notification goes out from the replica that won the tick (its
// supervisor calls RunEnded once, at the end of the run), so once per tick. A missed
// tick is seen by every replica; each asks the store (ClaimMissNotice) and only the
// one that wins a claim of the same tick under a reserved key sends it.
//
// How: never on the caller's thread. Notifications go into a bounded queue served by
// one worker thread of the Notifier; a full queue drops the newest with a `notify`
// line. Each notification is tried up to Notifier::attempts times, 1 s, 2 s, 4 s …
// (at most 30 s) apart, each try bounded by its timeout; a retry waits in the queue,
// so a dead endpoint holds up neither the scheduler nor the other notifications.
// The outcome is one `notify` line and tickd_notifications_total{job_name,event,
// result}. At shutdown the queue gets a short grace, then what is left is dropped
// (one line each) and a try under way is cancelled.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app/log.h"
#include "app/metrics.h"
#include "base/clock.h"
#include "config/config.h"
#include "jobs/output_tail.h"
#include "lock/backend.h"

namespace tickd::app {

// What one notification tells (the JSON body, the TICKD_NOTIFY_* variables).
struct NotifyEvent {
  std::string event;                 // "failure" "success" "miss"
  std::string job;
  std::int64_t tick_unix = 0;
  std::string node;                  // the winner; for a miss, the replica that sends it
  std::uint64_t fence = 0;           // the run's fence; 0 for a miss
  std::string outcome;               // the run's outcome (§6), or "missed"
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::chrono::milliseconds duration{0};
  int attempts = 0;                  // tries of the run (0 for a miss)
  std::string error;                 // the run line's error, if any
  std::string output;                // the last lines of the run's output (OutputTail)
  bool output_truncated = false;     // earlier output was left out
  // For a shell notifier: the job's own environment and folder.
  std::map<std::string, std::string> job_env;
  std::string workdir;
};

// The JSON body (one object; see docs/design.md §4 for its fields).
std::string NotifyJson(const NotifyEvent& e);
// The environment of a shell notifier: the job's env, its TICKD_* variables (§5,
// TICKD_NODE the winner) and TICKD_NOTIFY_EVENT, _OUTCOME, _EXIT, _SIGNAL, _DURATION,
// _ATTEMPTS, _ERROR, _OUTPUT.
std::map<std::string, std::string> NotifyEnvironment(const NotifyEvent& e);

// How much of a run's output a notification carries (its last lines).
inline constexpr std::size_t kNotifyOutputBytes = 4'096;

// The lines of `tail` as plain text, '\n'-joined, without their stream tags;
// `truncated`: earlier output was let go.
std::string NotifyOutputText(const jobs::OutputTail& tail, bool* truncated);

// Cancels one try under way (HttpCall::Cancel, Execution::Terminate) from another
// thread. Thread-safe.
class CancelToken {
 public:
  // Runs `cancel` now if already cancelled, otherwise on Cancel(). Clear with {}.
  void OnCancel(std::function<void()> cancel);
  void Cancel();
  bool cancelled() const;

 private:
  mutable std::mutex mu_;
  bool cancelled_ = false;
  std::function<void()> on_cancel_;
};

// One try of one notification: true when it was delivered (HTTP 2xx, shell exit 0),
// else false with the reason in *error (never a header value).
using NotifySender = std::function<bool(const config::Notifier& target, const NotifyEvent& e,
                                        CancelToken& cancel, std::string* error)>;
// The real one: HTTP POST of NotifyJson through jobs::HttpCall, or /bin/sh -c with the
// JSON on stdin and NotifyEnvironment.
bool SendNotification(const config::Notifier& target, const NotifyEvent& e, CancelToken& cancel,
                      std::string* error);

// Whether this replica sends the on_miss notification of (job, tick): it claims the
// tick under the reserved key kMissNoticePrefix + job (no user job can have it) with
// no starting deadline, and completes that claim at once; only the winner sends.
// `store_said_missed`: the store answered the tick's claim `missed`; otherwise this
// replica only found the tick past its deadline itself (it was late: paused, asleep),
// and the tick is first claimed with a zero starting deadline, which the store
// answers `missed` only when nobody claimed it (a tick someone ran answers `lost`).
// False on any doubt (an error, another sender): a miss is notified at most once.
// With `backend: none` (nothing shared, every replica runs every tick) always true.
Result<bool> ClaimMissNotice(lock::Backend& backend, const config::Job& job,
                             const std::string& config_hash, std::int64_t tick,
                             const std::string& node, WallTime now, bool store_said_missed);
inline constexpr std::string_view kMissNoticePrefix = "!miss:";

struct NotifierOptions {
  std::size_t queue_limit = 1'000;                 // notifications waiting (retries included)
  std::chrono::milliseconds first_backoff{1'000};  // doubled after each failed try
  std::chrono::milliseconds max_backoff{30'000};
  // The longest real-time wait before the Clock is read again (FakeClock tests: 1 ms).
  std::chrono::milliseconds max_real_wait{1'000};
};

// Thread-safe. The destructor calls Shutdown(0).
class Notifier {
 public:
  Notifier(Clock& clock, Logger& log, Metrics* metrics, std::string node,
           NotifierOptions options = {}, NotifySender sender = SendNotification);
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // A run ended on this replica (the winner): queues on_success (outcome done) or
  // on_failure (any other outcome) when the job has one. Never blocks.
  void RunEnded(const config::Job& job, NotifyEvent e);
  // A tick of `job` was missed: on the worker thread, ClaimMissNotice decides whether
  // this replica sends on_miss. Never blocks. REQUIRES: `backend` outlives the Notifier.
  void Missed(lock::Backend& backend, const config::Job& job, const std::string& config_hash,
              std::int64_t tick, bool store_said_missed);
  // Queues `e` for `target` (the two above end here). Never blocks; drops when full.
  void Enqueue(const config::Notifier& target, NotifyEvent e);
  // Waits up to `grace` for the queue to empty, then cancels the try under way, drops
  // the rest (a `notify` line each) and joins the worker. Idempotent.
  void Shutdown(std::chrono::milliseconds grace);
  // How many notifications wait in the queue for a retry (their backoff set), while no
  // try is under way; 0 while one is. For tests that move a fake clock past a backoff:
  // the backoff counts from when the failed try returned.
  std::size_t WaitingRetries() const;

 private:
  struct Item {
    config::Notifier target;
    NotifyEvent event;
    int tried = 0;
    SteadyTime due;
    // For a miss: the store decides first (ClaimMissNotice) whether it is ours.
    std::function<Result<bool>()> decide;
  };
  void Push(Item item);
  void Work();
  void TryOne(Item item);
  void Finish(const Item& item, std::string_view result, const std::string& error);
  // The fields every `notify` line about `item` starts with: job, tick, node, event.
  std::vector<Field> LineFields(const Item& item) const;

  Clock& clock_;
  Logger& log_;
  Metrics& metrics_;
  const std::string node_;
  const NotifierOptions options_;
  const NotifySender sender_;

  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;
  std::vector<Item> queue_;  // unordered; the worker takes the earliest due
  bool busy_ = false;        // the worker is on an item
  bool stopping_ = false;    // Shutdown: the grace is over, nothing more is tried
  bool draining_ = false;    // Shutdown: nothing new is taken
  CancelToken* current_ = nullptr;  // the try under way
  std::thread worker_;
};

}  // namespace tickd::app
