// `tickd run -c FILE [--node-id ID]` (docs/design.md §3, §7): the daemon.
//
// Signals: SIGTERM, SIGINT and SIGHUP are blocked before any thread exists, so every
// thread inherits the mask and only this function's loop receives them, through
// sigtimedwait (no async handler runs anywhere). The same loop looks at the job
// file every second and reloads it when it changed (inode, size or mtime).
//   SIGTERM / SIGINT → stop claiming, let runs finish for shutdown_grace, terminate
//                      the rest, complete every claim, exit 0. A second one ends
//                      the grace at once.
//   SIGHUP / change  → reload; a file that fails validation is rejected whole.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <string>
#include <thread>

#include "app/commands.h"
#include "app/http.h"
#include "app/metrics.h"
#include "app/notify.h"
#include "app/log.h"
#include "app/reload.h"
#include "app/runner.h"
#include "app/scheduled_job.h"
#include "app/scheduler.h"
#include "app/status.h"
#include "app/status_cli.h"
#include "app/status_skew.h"
#include "app/tzdata.h"
#include "base/duration.h"
#include "base/steady_waits.h"
#include "config/config.h"
#include "cron/tzdata_version.h"
#include "lock/registry.h"

namespace tickd::app {
namespace {

using std::chrono::milliseconds;

constexpr std::timespec kFilePollInterval{1, 0};
constexpr int kOpenAttempts = 10;  // ~6 s of backoff in all
// After the runs have ended, how long queued notifications may still go out.
constexpr milliseconds kNotifyShutdownGrace{5'000};

std::string SignalName(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
  }
  return std::to_string(sig);
}

// Serves signals and file changes until SIGTERM or SIGINT; returns that signal.
int ServeSignals(const sigset_t& signals, const std::string& path, Scheduler& scheduler,
                 Logger& log, const std::string& node) {
  std::optional<FileIdentity> seen = IdentifyFile(path);
  // A reload also looks at the tz database again: an update needs a restart.
  TzdataUpdateCheck tzdata(cron::TzdataVersionInUse());
  while (true) {
    siginfo_t info{};
    const int sig = ::sigtimedwait(&signals, &info, &kFilePollInterval);
    if (sig == SIGTERM || sig == SIGINT) return sig;
    if (sig == SIGHUP) {
      log.Log(LogLevel::kInfo, "signal",
              {{"node", node}, {"signal", "SIGHUP"}, {"action", "reload"}});
      seen = IdentifyFile(path);
      ReloadJobs(path, scheduler, log, CommandLoadOptions());
      tzdata.Check(cron::TzdataVersion(), log, node);
      continue;
    }
    // Timeout (or EINTR): has the job file changed?
    std::optional<FileIdentity> now = IdentifyFile(path);
    if (now && (!seen || !(*now == *seen))) {
      seen = now;
      log.Log(LogLevel::kInfo, "signal",
              {{"node", node}, {"file", path}, {"action", "reload"}, {"reason", "file changed"}});
      ReloadJobs(path, scheduler, log, CommandLoadOptions());
      tzdata.Check(cron::TzdataVersion(), log, node);
    }
  }
}

}  // namespace

int CmdRun(const RunArgs& args) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  ::pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // `tickd run | head`: a closed stdout is not fatal
  FixMallocThresholds();
  // Every thread made from here on inherits it: a run claimed ahead of its instant is
  // released by a timer at T, and the default slack (50 µs) would let the kernel
  // fire it that much later to batch wake-ups. Jobs get the default back (jobs/process.cc).
  ::prctl(PR_SET_TIMERSLACK, 1'000UL);  // ns

  // The jobs live once, in the job set (the config keeps the settings): with
  // thousands of jobs they are most of the daemon's memory.
  auto loaded = LoadJobFile(args.config_path, CommandLoadOptions());
  if (!loaded) {
    for (const config::ConfigError& e : loaded.error()) std::cerr << e.ToString() << "\n";
    return kExitBadInput;
  }
  const config::Config cfg = std::move(loaded->config);
  JobSet jobs = std::move(loaded->jobs);

  RealClock clock;
  Logger log(clock, LogFormatFromName(args.log_format).value_or(LogFormat::kLogfmt),
             LogLevelFromName(args.log_level).value_or(LogLevel::kInfo),
             Logger::FdWriter(STDOUT_FILENO));
  const std::string node = NodeIdFor(args.node_id, cfg);
  for (const config::ConfigError& w : cfg.warnings) {
    log.Log(LogLevel::kWarn, "config", {{"file", args.config_path}, {"warning", w.ToString()}});
  }
  // Every wait of the daemon (the loop's sleep, lease renewals, timeouts) is on the
  // monotonic clock: a process whose such waits never end would hold claims it
  // cannot renew and stop scheduling without a word (docs/design.md §7).
  if (Result<void> waits = CheckSteadyWaits(); !waits) {
    log.Log(LogLevel::kError, "start", {{"node", node}, {"error", waits.error().ToString()}});
    std::cerr << "tickd: " << waits.error().ToString() << "\n";
    return kExitFailure;
  }

  auto backend_options_or = BackendOptionsFor(cfg);
  if (!backend_options_or) {
    log.Log(LogLevel::kError, "start",
            {{"node", node}, {"error", backend_options_or.error().ToString()}});
    std::cerr << "tickd: " << backend_options_or.error().ToString() << "\n";
    return kExitFailure;
  }
  const lock::BackendOptions& backend_options = *backend_options_or;
  // A store that is briefly unavailable at start (a server still starting, SQLite
  // busy while another replica creates the schema) is retried for a few seconds.
  auto backend = lock::OpenBackend(backend_options, clock);
  std::timespec backoff{0, 100'000'000};
  for (int attempt = 1; !backend && attempt < kOpenAttempts; ++attempt) {
    log.Log(LogLevel::kWarn, "backend",
            {{"node", node},
             {"outcome", "error"},
             {"error", backend.error().ToString()},
             {"attempt", attempt}});
    const int sig = ::sigtimedwait(&signals, nullptr, &backoff);
    if (sig == SIGTERM || sig == SIGINT) return kExitOk;
    backoff.tv_nsec *= 2;
    if (backoff.tv_nsec >= 1'000'000'000) backoff = {1, 0};
    backend = lock::OpenBackend(backend_options, clock);
  }
  if (!backend) {
    log.Log(LogLevel::kError, "start", {{"node", node}, {"error", backend.error().ToString()}});
    std::cerr << "tickd: " << backend.error().ToString() << "\n";
    return kExitFailure;
  }
  for (const std::string& w : (*backend)->StartupWarnings()) {
    log.Log(LogLevel::kWarn, "backend", {{"node", node}, {"warning", w}});
  }

  std::unique_ptr<Runner> runner = NewProcessRunner();
  SchedulerOptions options;
  options.node = node;
  options.lease = cfg.lock.lease;
  options.stop_grace = cfg.lock.stop_grace;
  options.claim_lead = cfg.lock.claim_lead;
  options.claim_lead_max = cfg.lock.claim_lead_max;
  options.clock_tolerance = cfg.lock.clock_tolerance;
  options.store_clock_warning = cfg.clock_skew_warning;
  options.max_concurrent_runs = cfg.max_concurrent_runs;
  options.retention = cfg.lock.retention;
  options.history = cfg.lock.history;
  // Metrics and the systemd watchdog: the loop pings at each turn, and turns at least
  // every max_sleep. Its watch (a thread of the scheduler) and /healthz judge it
  // against the wake-up it planned and the progress of its turn (docs/design.md §9).
  const std::optional<milliseconds> watchdog = WatchdogInterval();
  PrometheusMetrics metrics(clock, [watchdog] {
    if (watchdog) NotifyWatchdog(*watchdog / 4);
  });
  options.metrics = &metrics;
  metrics.TzdataVersion(cron::TzdataVersionInUse());
  options.max_sleep = watchdog ? std::min(milliseconds(5'000), *watchdog / 3) : milliseconds(5'000);
  options.loop_check_every = milliseconds(1'000);
  options.loop_slack = milliseconds(5'000);
  // Between two signs of progress a turn makes about one store call (op_timeout).
  options.turn_stall = 3 * cfg.lock.op_timeout + milliseconds(5'000);
  Peers peers(node);  // learnt by the skew watch below, read by the scheduler
  options.peers = &peers;
  // Before the scheduler: its runs hand their ends to it until the last has finished.
  Notifier notifier(clock, log, &metrics, node);
  options.notifier = &notifier;
  // The runs' backstop while this daemon cannot act (frozen): see app/lease_guard.h.
  const std::unique_ptr<LeaseGuard> lease_guard = StartLeaseGuard(log, args.log_format, node);
  options.lease_guard = lease_guard.get();
  Scheduler scheduler(clock, **backend, *runner, log, options);
  lock::Backend& store = **backend;
  std::unique_ptr<HttpServer> http;
  if (!cfg.http.listen.empty()) {
    HttpHandlers handlers;
    handlers.metrics = [&metrics] { return metrics.Render(); };
    handlers.healthy = [&scheduler, &store](std::string* why) {
      if (const Scheduler::LoopHealth loop = scheduler.loop_health(); loop.stuck) {
        *why = "scheduler loop stuck for " + FormatSeconds(loop.behind) +
               (loop.sleeping ? " past its planned wake-up" : " without progress in a turn");
        return false;
      }
      // One job's ledger, not every job's: at thousands of jobs a probe must stay cheap.
      const std::vector<std::string> sample = scheduler.ledger_sample();
      if (auto r = store.History(sample.empty() ? "" : sample.front(), 1); !r) {
        *why = "backend: " + r.error().ToString();
        return false;
      }
      return true;
    };
    // The file as it is now (a reload may have changed it), else (it does not load)
    // the jobs the scheduler runs (disabled ones are not among them).
    auto jobs_now = [&scheduler, path = args.config_path]() {
      config::LoadOptions schedules_only;  // a status page loads no plugin
      schedules_only.check_plugins = false;
      auto now_cfg = config::LoadConfig(path, schedules_only);
      if (now_cfg) return std::move(now_cfg->jobs);
      std::vector<config::Job> running;
      for (const auto& scheduled : scheduler.jobs()) running.push_back(scheduled->job);
      return running;
    };
    handlers.status_json = [&clock, &store, jobs_now](const std::string& job,
                                                      int last) -> Result<std::string> {
      Result<StatusReport> report = CollectStatus(jobs_now(), store, clock.Wall(), job, last);
      if (!report) return tl::unexpected(report.error());
      return FormatStatusJson(*report);
    };
    handlers.runs_json = [&clock, &store, jobs_now](const std::string& job,
                                                    int limit) -> Result<std::string> {
      Result<RunsReport> report = CollectRuns(jobs_now(), store, clock.Wall(), job, limit);
      if (!report) return tl::unexpected(report.error());
      return FormatRunsJson(*report);
    };
    auto started = HttpServer::Start(cfg.http.listen, std::move(handlers));
    if (!started) {
      log.Log(LogLevel::kError, "start", {{"node", node}, {"error", started.error().ToString()}});
      std::cerr << "tickd: " << started.error().ToString() << "\n";
      return kExitFailure;
    }
    http = std::move(*started);
    log.Log(LogLevel::kInfo, "http", {{"node", node}, {"listen", cfg.http.listen}});
  }
  SkewOptions skew_options;
  skew_options.node = node;
  skew_options.threshold = cfg.clock_skew_warning;
  skew_options.peers = &peers;
  skew_options.tzdata = cron::TzdataVersionInUse();
  skew_options.jobs = [&scheduler] { return scheduler.ledger_sample(); };
  SkewWatch skew(clock, store, log, metrics, skew_options);
  log.Log(LogLevel::kInfo, "start",
          {{"node", node},
           {"file", args.config_path},
           {"backend", (*backend)->name()},
           {"url", cfg.lock.url.empty() ? "-" : lock::RedactUrl(cfg.lock.url)},
           {"lease", FormatDuration(cfg.lock.lease)},
           {"stop_grace",
            FormatDuration(cfg.lock.stop_grace.value_or(config::DefaultStopGrace(cfg.lock.lease)))},
           {"claim_lead", FormatDuration(cfg.lock.claim_lead)},
           {"tzdata", cron::TzdataVersionInUse()},
           {"jobs", jobs.size()},
           {"pid", ::getpid()}});
  scheduler.Start(std::move(jobs));
  skew.Start();
  NotifyReady("scheduling " + std::to_string(scheduler.job_names().size()) + " jobs as " + node);

  const int sig = ServeSignals(signals, args.config_path, scheduler, log, node);
  NotifyStopping();
  log.Log(LogLevel::kInfo, "shutdown",
          {{"node", node},
           {"signal", SignalName(sig)},
           {"running", scheduler.active_runs()},
           {"grace", FormatDuration(cfg.shutdown_grace)}});
  // The grace runs on its own thread so that a second SIGTERM/SIGINT can cut it short.
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    scheduler.Shutdown(cfg.shutdown_grace);
    stopped = true;
  });
  constexpr std::timespec kStopPoll{0, 100'000'000};
  while (!stopped) {
    const int again = ::sigtimedwait(&signals, nullptr, &kStopPoll);
    if (again == SIGTERM || again == SIGINT) {
      log.Log(LogLevel::kWarn, "signal",
              {{"node", node}, {"signal", SignalName(again)}, {"action", "kill"}});
      scheduler.EndGrace();
    }
  }
  stopper.join();
  // Notifications of the last runs get a short grace; the rest are dropped (logged).
  notifier.Shutdown(kNotifyShutdownGrace);
  log.Log(LogLevel::kInfo, "stopped", {{"node", node}});
  return kExitOk;
}

}  // namespace tickd::app
