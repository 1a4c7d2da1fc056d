// tickd::Scheduler (include/tickd/scheduler.h): the daemon's engine — app::Scheduler,
// its run supervisors, the Logger and PrometheusMetrics — with library jobs: a
// config::Job that names a function instead of a command, run by CallableRunner.
#include "app/scheduler.h"

#include <unistd.h>

#include <mutex>
#include <set>
#include <stdexcept>

#include "app/log.h"
#include "app/metrics.h"
#include "app/scheduled_job.h"
#include "app/status_cli.h"
#include "base/duration.h"
#include "base/steady_waits.h"
#include "config/config.h"
#include "cron/tzdata_version.h"
#include "lib/callable_runner.h"
#include "lib/store_impl.h"

namespace tickd {
namespace {

using std::chrono::milliseconds;

constexpr std::size_t kMaxJobNameBytes = 64;

bool ValidJobName(std::string_view name) {
  return !name.empty() && name.size() <= kMaxJobNameBytes &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                  c == '-';
         });
}

[[noreturn]] void Invalid(const std::string& what) {
  throw std::invalid_argument("tickd::Scheduler: " + what);
}

cron::Dialect EngineDialect(Dialect d) {
  switch (d) {
    case Dialect::kQuartz:
      return cron::Dialect::kQuartz;
    case Dialect::kSpring:
      return cron::Dialect::kSpring;
    case Dialect::kCron:
      break;
  }
  return cron::Dialect::kCron;
}

app::Logger::Writer LogWriter(const SchedulerOptions& options) {
  if (!options.log) return app::Logger::FdWriter(STDERR_FILENO);
  return [sink = options.log](std::string_view line) { sink(line); };
}

}  // namespace

struct Scheduler::Impl {
  Impl(Store store_in, SchedulerOptions options_in)
      : store(std::move(store_in)),
        options(std::move(options_in)),
        node(options.node.empty() ? app::DefaultNodeId() : options.node),
        clock(*store.impl()->clock),
        log(clock,
            options.log_format == LogFormat::kJson ? app::LogFormat::kJson
                                                   : app::LogFormat::kLogfmt,
            options.log_debug ? app::LogLevel::kDebug : app::LogLevel::kInfo, LogWriter(options)),
        metrics(clock),
        runner(store.impl()->own_clock != nullptr) {}

  Store store;
  const SchedulerOptions options;
  const std::string node;
  Clock& clock;
  app::Logger log;
  app::PrometheusMetrics metrics;
  lib::CallableRunner runner;

  std::mutex stop_mu;     // held through stop(): a second caller waits for the first
  mutable std::mutex mu;  // guards the fields below
  app::JobSet jobs;
  std::set<std::string> names;
  std::unique_ptr<app::Scheduler> engine;  // from start() on
  bool stopped = false;
};

Scheduler::Scheduler(Store store, SchedulerOptions options) {
  if (options.lease < milliseconds(100)) Invalid("lease below 100 ms");
  if (options.claim_lead < milliseconds(0) || options.claim_lead >= milliseconds(1'000)) {
    Invalid("claim_lead outside [0, 1 s)");
  }
  if (options.max_concurrent_runs < 1) Invalid("max_concurrent_runs below 1");
  if (const std::string problem = config::NodeIdProblem(options.node); !problem.empty()) {
    Invalid("node '" + options.node + "' " + problem);
  }
  impl_ = std::make_unique<Impl>(std::move(store), std::move(options));
  impl_->metrics.TzdataVersion(cron::TzdataVersionInUse());
}

Scheduler::~Scheduler() {
  stop(milliseconds(0));
  impl_->runner.WaitForCalls();
}

void Scheduler::add(std::string name, std::string schedule, JobFunction fn, JobOptions options) {
  const std::string job_text = "job " + name;
  if (!ValidJobName(name)) Invalid(job_text + ": the name is not [a-z0-9._-]{1,64}");
  if (!fn) Invalid(job_text + ": no function");
  if (options.lease && *options.lease < milliseconds(100))
    Invalid(job_text + ": lease below 100 ms");
  if (options.starting_deadline && *options.starting_deadline <= milliseconds(0)) {
    Invalid(job_text + ": starting_deadline not positive");
  }
  if (options.timeout <= milliseconds(0)) Invalid(job_text + ": timeout not positive");
  if (options.stop_grace < milliseconds(0)) Invalid(job_text + ": stop_grace negative");

  config::Job job;
  job.name = name;
  job.schedule_text = std::move(schedule);
  job.schedule_options.dialect = EngineDialect(options.dialect);
  job.schedule_options.timezone = options.zone;
  job.schedule_options.job_name = name;
  // What the config hash sees of a function: that it is one, of this program's job
  // (a daemon's command job of the same name hashes differently: config-mismatch).
  job.argv = {"tickd-library-function", name};
  job.timeout = options.timeout;
  job.kill_grace = options.stop_grace;
  job.concurrency = options.concurrency == Concurrency::kAllow ? config::Concurrency::kAllow
                                                               : config::Concurrency::kForbid;
  job.misfire =
      options.misfire == Misfire::kRunOnce ? config::Misfire::kRunOnce : config::Misfire::kSkip;
  job.starting_deadline = options.starting_deadline;
  auto scheduled = app::MakeScheduledJob(job, options.lease);
  if (!scheduled) Invalid(scheduled.error().ToString());

  std::lock_guard lock(impl_->mu);
  if (impl_->engine) throw std::logic_error("tickd::Scheduler::add: after start()");
  if (!impl_->names.insert(name).second) Invalid(job_text + ": added twice");
  impl_->runner.Add(name, std::move(fn));
  impl_->jobs.push_back(std::move(*scheduled));
}

void Scheduler::start() {
  std::lock_guard lock(impl_->mu);
  if (impl_->engine || impl_->stopped) throw std::logic_error("tickd::Scheduler::start: twice");
  // Every wait of the engine (the loop's sleep, renewals, the lease's end) is on the
  // monotonic clock: in a process where such waits never end it would run one tick
  // and then hold its claims unrenewed without a word, as the daemon did (docs/design.md
  // §7). The daemon refuses to start then; a library cannot restart its host, so it
  // throws.
  if (Result<void> waits = CheckSteadyWaits(); !waits) {
    impl_->log.Log(
        app::LogLevel::kError, "start",
        {{"node", impl_->node}, {"library", "true"}, {"error", waits.error().ToString()}});
    throw std::runtime_error("tickd::Scheduler::start: " + waits.error().ToString());
  }
  const Store::Impl& store = *impl_->store.impl();
  app::SchedulerOptions options;
  options.node = impl_->node;
  options.lease = impl_->options.lease;
  options.claim_lead = impl_->options.claim_lead;
  options.max_concurrent_runs = impl_->options.max_concurrent_runs;
  options.max_real_wait = store.max_real_wait;
  options.max_sleep = milliseconds(5'000);
  options.metrics = &impl_->metrics;
  impl_->engine = std::make_unique<app::Scheduler>(impl_->clock, *store.backend, impl_->runner,
                                                   impl_->log, options);
  for (const std::string& w : store.backend->StartupWarnings()) {
    impl_->log.Log(app::LogLevel::kWarn, "backend", {{"node", impl_->node}, {"warning", w}});
  }
  impl_->log.Log(app::LogLevel::kInfo, "start",
                 {{"node", impl_->node},
                  {"library", "true"},
                  {"backend", store.backend->name()},
                  {"url", store.url},
                  {"lease", FormatDuration(impl_->options.lease)},
                  {"stop_grace", FormatDuration(config::DefaultStopGrace(impl_->options.lease))},
                  {"claim_lead", FormatDuration(impl_->options.claim_lead)},
                  {"tzdata", cron::TzdataVersionInUse()},
                  {"jobs", impl_->jobs.size()},
                  {"pid", ::getpid()}});
  impl_->engine->Start(impl_->jobs);
}

void Scheduler::stop(std::chrono::milliseconds grace) {
  std::lock_guard stopping(impl_->stop_mu);
  app::Scheduler* engine = nullptr;
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopped || !impl_->engine) {
      impl_->stopped = true;
      return;
    }
    impl_->stopped = true;
    engine = impl_->engine.get();
  }
  impl_->log.Log(app::LogLevel::kInfo, "shutdown",
                 {{"node", impl_->node},
                  {"running", engine->active_runs()},
                  {"grace", FormatDuration(grace)}});
  engine->Shutdown(grace);
  impl_->log.Log(app::LogLevel::kInfo, "stopped", {{"node", impl_->node}});
}

const std::string& Scheduler::node() const { return impl_->node; }

int Scheduler::active_runs() const {
  std::lock_guard lock(impl_->mu);
  return impl_->engine ? impl_->engine->active_runs() : 0;
}

std::string Scheduler::metrics_text() const { return impl_->metrics.Render(); }

}  // namespace tickd
