// `tickd next` (docs/design.md §3): prints the next firing instants of one expression,
// computed by the same Schedule::Next the daemon's scheduler uses, so what this
// prints is exactly what the daemon would claim. With jitter (--jitter, or a job of a
// job file that has it) each line is the instant the run is due, then its tick: the
// same ScheduledJob::DueMs arithmetic (cron::JitterOffset) as the daemon's.
#include <chrono>
#include <cstdio>
#include <string>

#include "app/commands.h"
#include "base/duration.h"
#include "config/config.h"
#include "cron/schedule.h"

namespace tickd::app {
namespace {

using std::chrono::milliseconds;

// Bad input: one line on stderr that names the place, exit status 2.
int BadInput(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  return kExitBadInput;
}

// What to print the instants of: the expression, its options and the jitter.
struct NextJob {
  std::string expression;
  cron::ScheduleOptions options;
  milliseconds jitter{0};
};

// The job --job of the job file -c (loaded as `tickd validate` does, without the
// plugin and permission checks: nothing runs), or a BadInput exit status.
tl::expected<NextJob, int> FromConfig(const NextArgs& args) {
  if (args.expression) {
    return tl::unexpected(BadInput("tickd next: give EXPR or -c FILE --job NAME, not both"));
  }
  if (args.job.empty()) {
    return tl::unexpected(BadInput("tickd next: -c " + args.config_path + " needs --job NAME"));
  }
  config::LoadOptions load;
  load.check_plugins = false;
  load.check_permissions = false;
  auto loaded = config::LoadConfig(args.config_path, load);
  if (!loaded) {
    for (const config::ConfigError& e : loaded.error()) {
      std::fprintf(stderr, "%s\n", e.ToString().c_str());
    }
    return tl::unexpected(kExitBadInput);
  }
  for (const config::Job& job : loaded->jobs) {
    if (job.name == args.job) return NextJob{job.schedule_text, job.schedule_options, job.jitter};
  }
  return tl::unexpected(
      BadInput("--job " + args.job + ": no such job in " + args.config_path));
}

tl::expected<NextJob, int> FromArguments(const NextArgs& args) {
  if (!args.expression) {
    return tl::unexpected(BadInput("tickd next: give EXPR, or -c FILE --job NAME"));
  }
  // CLI11 already restricts these names; checking again keeps CmdNext safe to call
  // directly (tests, future callers) without relying on main.cc.
  const auto dialect = cron::DialectFromName(args.dialect);
  if (!dialect) {
    return tl::unexpected(
        BadInput("--dialect " + args.dialect + ": expected cron, quartz or spring"));
  }
  const auto dst_gap = cron::DstGapFromName(args.dst_gap);
  if (!dst_gap) {
    return tl::unexpected(BadInput("--dst-gap " + args.dst_gap + ": expected run or skip"));
  }
  const auto dst_overlap = cron::DstOverlapFromName(args.dst_overlap);
  if (!dst_overlap) {
    return tl::unexpected(
        BadInput("--dst-overlap " + args.dst_overlap + ": expected auto, first or both"));
  }
  // Checked here rather than left to Parse so the message names the option at fault,
  // not the expression.
  if (cron::FindZone(args.timezone) == nullptr) {
    return tl::unexpected(BadInput("--tz " + args.timezone +
                                   ": unknown time zone (not in the system tz database)"));
  }
  NextJob out;
  out.expression = *args.expression;
  out.options.dialect = *dialect;
  out.options.timezone = args.timezone;
  out.options.dst_gap = *dst_gap;
  out.options.dst_overlap = *dst_overlap;
  out.options.job_name = args.job;
  if (args.jitter) {
    auto jitter = ParseDuration(*args.jitter);
    if (!jitter) {
      return tl::unexpected(BadInput("--jitter " + *args.jitter + ": " + jitter.error().detail));
    }
    // The offset is a function of the job's name: without it there is none to print.
    if (args.job.empty()) return tl::unexpected(BadInput("--jitter needs --job NAME"));
    out.jitter = *jitter;
  }
  return out;
}

// RFC 3339 with milliseconds ("2026-03-29T03:00:17.312+02:00"): due instants are not
// whole seconds.
std::string FormatMillis(std::int64_t unix_ms, const cron::Zone* zone) {
  const std::int64_t seconds = unix_ms / 1000 - (unix_ms % 1000 < 0 ? 1 : 0);
  const std::int64_t ms = unix_ms - seconds * 1000;
  std::string text = cron::FormatRfc3339(cron::Instant(std::chrono::seconds(seconds)), zone);
  char fraction[8];
  std::snprintf(fraction, sizeof fraction, ".%03d", static_cast<int>(ms));
  text.insert(19, fraction);  // after "YYYY-MM-DDTHH:MM:SS"
  return text;
}

}  // namespace

int CmdNext(const NextArgs& args) {
  if (args.count < 0) return BadInput("-n " + std::to_string(args.count) + ": must be >= 0");
  auto job = args.config_path.empty() ? FromArguments(args) : FromConfig(args);
  if (!job) return job.error();

  const auto now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  cron::Instant from = now;
  if (args.from) {
    auto parsed = cron::ParseRfc3339(*args.from);
    if (!parsed) return BadInput("--from " + *args.from + ": " + parsed.error().detail);
    from = *parsed;
  }

  auto schedule = cron::Schedule::Parse(job->expression, job->options);
  if (!schedule) return BadInput(schedule.error().message);
  // A surprise that is not an error (e.g. the last firing is already past): say it
  // on stderr, still answer on stdout with status 0.
  for (const auto& warning : schedule->WarningsAt(now)) {
    std::fprintf(stderr, "tickd: warning: %s\n", warning.c_str());
  }

  std::string out;
  cron::Instant at = from;
  for (int i = 0; i < args.count; ++i) {
    const auto next = schedule->Next(at);
    if (!next) break;  // past the horizon: fewer lines is the answer, not an error
    if (job->jitter > milliseconds(0)) {
      const milliseconds offset = cron::JitterOffset(job->options.job_name, *next, job->jitter);
      const std::int64_t tick_ms =
          std::chrono::duration_cast<milliseconds>(next->time_since_epoch()).count();
      out += FormatMillis(tick_ms + offset.count(), schedule->zone());
      out += " tick=";
    }
    out += cron::FormatRfc3339(*next, schedule->zone());
    out += '\n';
    at = *next;
  }
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0) {
    std::fprintf(stderr, "tickd: cannot write to stdout\n");
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace tickd::app
