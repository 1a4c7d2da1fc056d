#include "app/notify.h"

#include <systemd/sd-daemon.h>

#include <atomic>
#include <string>

namespace tickd::app {

void NotifyReady(std::string_view status) {
  const std::string text = "READY=1\nSTATUS=" + std::string(status);
  sd_notify(0, text.c_str());
}

void NotifyStopping() { sd_notify(0, "STOPPING=1\nSTATUS=stopping"); }

std::optional<std::chrono::milliseconds> WatchdogInterval() {
  std::uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return std::nullopt;
  return std::chrono::milliseconds(usec / 1000);
}

void NotifyWatchdog(std::chrono::milliseconds min_gap) {
  static std::atomic<std::int64_t> last_ms{0};
  const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now().time_since_epoch())
                                  .count();
  std::int64_t last = last_ms.load();
  if (now_ms - last < min_gap.count()) return;
  if (!last_ms.compare_exchange_strong(last, now_ms)) return;
  sd_notify(0, "WATCHDOG=1");
}

}  // namespace tickd::app
