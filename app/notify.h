// systemd service notifications (Type=notify, WatchdogSec=): READY=1 once the
// scheduler runs, STOPPING=1 at shutdown, WATCHDOG=1 from the scheduler loop so the
// pings stop when the loop stalls. Every call is a no-op outside systemd
// (NOTIFY_SOCKET unset).
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace tickd::app {

void NotifyReady(std::string_view status);
void NotifyStopping();
// The watchdog interval systemd asks for (WATCHDOG_USEC for this pid), if any.
std::optional<std::chrono::milliseconds> WatchdogInterval();
// Sends WATCHDOG=1, at most once per `min_gap` (the loop may turn far more often).
void NotifyWatchdog(std::chrono::milliseconds min_gap);

}  // namespace tickd::app
