// `tickd next` (docs/design.md §3): prints the next firing instants of one expression,
// computed by the same Schedule::Next the daemon's scheduler uses, so what this
// prints is exactly what the daemon would claim.
#include <chrono>
#include <cstdio>
#include <string>

#include "app/commands.h"
#include "cron/schedule.h"

namespace tickd::app {
namespace {

// Bad input: one line on stderr that names the place, exit status 2.
int BadInput(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  return kExitBadInput;
}

}  // namespace

int CmdNext(const NextArgs& args) {
  // CLI11 already restricts these names; checking again keeps CmdNext safe to call
  // directly (tests, future callers) without relying on main.cc.
  const auto dialect = cron::DialectFromName(args.dialect);
  if (!dialect) return BadInput("--dialect " + args.dialect + ": expected cron, quartz or spring");
  const auto dst_gap = cron::DstGapFromName(args.dst_gap);
  if (!dst_gap) return BadInput("--dst-gap " + args.dst_gap + ": expected run or skip");
  const auto dst_overlap = cron::DstOverlapFromName(args.dst_overlap);
  if (!dst_overlap) {
    return BadInput("--dst-overlap " + args.dst_overlap + ": expected auto, first or both");
  }
  if (args.count < 0) return BadInput("-n " + std::to_string(args.count) + ": must be >= 0");
  // Checked here rather than left to Parse so the message names the option at fault,
  // not the expression.
  if (cron::FindZone(args.timezone) == nullptr) {
    return BadInput("--tz " + args.timezone +
                    ": unknown time zone (not in the system tz database)");
  }

  const auto now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  cron::Instant from = now;
  if (args.from) {
    auto parsed = cron::ParseRfc3339(*args.from);
    if (!parsed) return BadInput("--from " + *args.from + ": " + parsed.error().detail);
    from = *parsed;
  }

  cron::ScheduleOptions options;
  options.dialect = *dialect;
  options.timezone = args.timezone;
  options.dst_gap = *dst_gap;
  options.dst_overlap = *dst_overlap;
  auto schedule = cron::Schedule::Parse(args.expression, options);
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
