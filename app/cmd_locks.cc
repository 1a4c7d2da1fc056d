// `tickd locks -c FILE [--release JOB --yes] [--json]`: the claims still running in
// the lock store (holder, tick, fence, lease left), and — for an operator who knows
// a holder is gone — freeing such a claim. A claim whose holder still holds a live
// lease is never freed (the backend refuses); --release without --yes only says
// what it would do. Each release is logged as a `release` line.
#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/log.h"
#include "app/status_cli.h"
#include "app/tzdata.h"

namespace tickd::app {
namespace {

std::string LeaseLeft(const lock::RunningClaim& c) {
  if (!c.lease_left) return "?";
  return FormatSeconds(std::max(std::chrono::milliseconds(0), *c.lease_left));
}

void PrintTable(const std::vector<lock::RunningClaim>& claims) {
  if (claims.empty()) {
    std::cout << "no running claims\n";
    return;
  }
  std::vector<std::vector<std::string>> rows = {
      {"JOB", "TICK", "HOLDER", "FENCE", "LEASE LEFT", "HOLDER ALIVE"}};
  for (const lock::RunningClaim& c : claims) {
    rows.push_back({c.job, FormatTick(c.tick_unix), c.node, std::to_string(c.fence), LeaseLeft(c),
                    c.holder_alive ? "yes" : "no (gone)"});
  }
  std::vector<std::size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

std::string ClaimsJson(const std::vector<lock::RunningClaim>& claims) {
  nlohmann::json out = nlohmann::json::array();
  for (const lock::RunningClaim& c : claims) {
    out.push_back({{"job", c.job},
                   {"tick", FormatTick(c.tick_unix)},
                   {"tick_unix", c.tick_unix},
                   {"holder", c.node},
                   {"fence", c.fence},
                   {"config_hash", SplitClaimHash(c.config_hash).config},
                   {"tzdata", SplitClaimHash(c.config_hash).tzdata},
                   {"lease_left_seconds",
                    c.lease_left ? nlohmann::json(static_cast<double>(c.lease_left->count()) / 1000)
                                 : nlohmann::json(nullptr)},
                   {"holder_alive", c.holder_alive}});
  }
  return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

int CmdLocks(const LocksArgs& args) {
  RealClock clock;
  auto opened = OpenOpsContext(args.config_path, clock);
  if (const int* status = std::get_if<int>(&opened)) return *status;
  OpsContext& ctx = std::get<OpsContext>(opened);
  Result<std::vector<lock::RunningClaim>> claims = ctx.backend->ListRunning();
  if (!claims) {
    std::cerr << "tickd: " << claims.error().ToString() << "\n";
    return kExitFailure;
  }
  if (args.release_job.empty()) {
    if (args.json) {
      std::cout << ClaimsJson(*claims);
    } else {
      PrintTable(*claims);
    }
    return kExitOk;
  }

  std::vector<lock::RunningClaim> mine;
  for (const lock::RunningClaim& c : *claims) {
    if (c.job == args.release_job) mine.push_back(c);
  }
  if (mine.empty()) {
    std::cerr << "tickd: no running claim of job " << args.release_job << "\n";
    return kExitFailure;
  }
  if (!args.yes) {
    PrintTable(mine);
    std::cerr << "tickd: not releasing without --yes (only claims whose holder is gone are "
                 "released)\n";
    return kExitBadInput;
  }
  Logger log(clock, LogFormat::kLogfmt, LogLevel::kInfo, Logger::FdWriter(STDOUT_FILENO));
  int status = kExitOk;
  for (const lock::RunningClaim& c : mine) {
    Result<lock::ForceReleaseStatus> r = ctx.backend->ForceRelease(c.job, c.tick_unix);
    std::string outcome = !r                                             ? "error"
                          : *r == lock::ForceReleaseStatus::kReleased    ? "released"
                          : *r == lock::ForceReleaseStatus::kHolderAlive ? "holder-alive"
                                                                         : "not-running";
    std::vector<Field> fields = {{"job", c.job},       {"tick", FormatTick(c.tick_unix)},
                                 {"holder", c.node},   {"fence", c.fence},
                                 {"outcome", outcome}, {"by", NodeIdFor("", ctx.config)}};
    if (!r) fields.emplace_back("error", r.error().ToString());
    const bool ok = r && *r == lock::ForceReleaseStatus::kReleased;
    log.Log(ok ? LogLevel::kWarn : LogLevel::kError, "release", fields);
    if (!ok) status = kExitFailure;
  }
  return status;
}

}  // namespace tickd::app
