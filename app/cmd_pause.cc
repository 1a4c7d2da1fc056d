// `tickd pause -c FILE JOB…|--all [--until TIME] [--reason TEXT]` and
// `tickd resume -c FILE JOB…|--all` (docs/design.md §1 rule 13, §3): the pause lives in
// the lock store, so every replica honours it from its next instant; paused ticks are
// logged `skipped` there. Each change is one `pause` line on stdout:
//   pause job=… outcome=paused by=… [until=…] [reason=…]
//   pause job=… outcome=resumed|not-paused by=…
// Exit status: 0 done; 2 bad input (no job or --all, both, an unknown job, an --until
// that is not a future instant or a duration); 1 the store failed.
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "app/backend_call.h"
#include "app/commands.h"
#include "app/log.h"
#include "app/status_cli.h"
#include "base/duration.h"
#include "cron/schedule.h"

namespace tickd::app {
namespace {

// --until: an RFC 3339 instant, or a duration from now ("2h", "30m").
Result<WallTime> ParseUntil(std::string_view text, WallTime now) {
  if (auto d = ParseDuration(text)) return now + *d;
  auto instant = cron::ParseRfc3339(text);
  if (!instant) {
    return MakeError("--until " + std::string(text),
                     "neither an RFC 3339 instant (2026-11-27T18:00:00Z) nor a duration (2h)");
  }
  return WallTime(std::chrono::duration_cast<std::chrono::milliseconds>(
      instant->time_since_epoch()));
}

// The names the command acts on: `jobs`, each checked against the job file (a name in
// `also_known` is accepted too), or kAllJobs. nullopt after a message on stderr.
std::optional<std::vector<std::string>> Targets(const PauseArgs& args, const config::Config& cfg,
                                                const std::vector<std::string>& also_known = {}) {
  if (args.all == !args.jobs.empty()) {
    std::cerr << "tickd: name the jobs, or --all (not both)\n";
    return std::nullopt;
  }
  if (args.all) return std::vector<std::string>{std::string(lock::kAllJobs)};
  for (const std::string& job : args.jobs) {
    if (std::find(also_known.begin(), also_known.end(), job) != also_known.end()) continue;
    if (FindJobOrSay(cfg, args.config_path, job) == nullptr) return std::nullopt;
  }
  return args.jobs;
}

Logger StdoutLogger(Clock& clock) {
  return Logger(clock, LogFormat::kLogfmt, LogLevel::kInfo, Logger::FdWriter(STDOUT_FILENO));
}

}  // namespace

int CmdPause(const PauseArgs& args) {
  RealClock clock;
  const WallTime now = clock.Wall();
  std::optional<WallTime> until;
  if (!args.until.empty()) {
    auto parsed = ParseUntil(args.until, now);
    if (!parsed) {
      std::cerr << "tickd: " << parsed.error().ToString() << "\n";
      return kExitBadInput;
    }
    if (*parsed <= now) {
      std::cerr << "tickd: --until " << args.until << ": not in the future\n";
      return kExitBadInput;
    }
    until = *parsed;
  }
  auto opened = OpenOpsContext(args.config_path, clock);
  if (const int* status = std::get_if<int>(&opened)) return *status;
  OpsContext& ctx = std::get<OpsContext>(opened);
  const auto targets = Targets(args, ctx.config);
  if (!targets) return kExitBadInput;

  Logger log = StdoutLogger(clock);
  const std::string by = NodeIdFor(args.node_id, ctx.config);
  int status = kExitOk;
  for (const std::string& job : *targets) {
    const lock::Pause pause{job, until, now, by, args.reason};
    Result<void> r = CallBackend("pause", [&] { return ctx.backend->SetPause(pause); });
    std::vector<Field> fields = {{"job", job}, {"outcome", r ? "paused" : "error"}, {"by", by}};
    if (until) fields.emplace_back("until", FormatTimestamp(*until));
    if (!args.reason.empty()) fields.emplace_back("reason", args.reason);
    if (!r) fields.emplace_back("error", r.error().ToString());
    log.Log(r ? LogLevel::kInfo : LogLevel::kError, "pause", fields);
    if (!r) status = kExitFailure;
  }
  return status;
}

int CmdResume(const PauseArgs& args) {
  RealClock clock;
  auto opened = OpenOpsContext(args.config_path, clock);
  if (const int* status = std::get_if<int>(&opened)) return *status;
  OpsContext& ctx = std::get<OpsContext>(opened);
  Result<std::vector<lock::Pause>> stored =
      CallBackend("pauses", [&] { return ctx.backend->ListPauses(); });
  if (!stored) {
    std::cerr << "tickd: " << stored.error().ToString() << "\n";
    return kExitFailure;
  }
  // A job no longer in the file can still be resumed while its pause is stored.
  std::vector<std::string> paused_names;
  for (const lock::Pause& p : *stored) paused_names.push_back(p.job);
  auto targets = Targets(args, ctx.config, paused_names);
  if (!targets) return kExitBadInput;
  // --all ends every pause: the one of every job and those of single jobs.
  if (args.all) targets = paused_names;

  Logger log = StdoutLogger(clock);
  const std::string by = NodeIdFor(args.node_id, ctx.config);
  int status = kExitOk;
  for (const std::string& job : *targets) {
    Result<bool> r = CallBackend("resume", [&] { return ctx.backend->ClearPause(job); });
    std::vector<Field> fields = {
        {"job", job}, {"outcome", !r ? "error" : *r ? "resumed" : "not-paused"}, {"by", by}};
    if (!r) fields.emplace_back("error", r.error().ToString());
    log.Log(r ? LogLevel::kInfo : LogLevel::kError, "pause", fields);
    if (!r) status = kExitFailure;
  }
  if (!args.all) {
    const WallTime now = clock.Wall();
    for (const lock::Pause& p : *stored) {
      if (p.job == lock::kAllJobs && lock::PauseHolds(p, "", now)) {
        std::cerr << "tickd: every job stays paused (tickd pause --all by " << p.by
                  << "); tickd resume --all ends that\n";
      }
    }
  }
  return status;
}

}  // namespace tickd::app
