// `tickd trigger -c FILE JOB` (docs/design.md §9): one tick of JOB now. The tick is the
// current second and goes through the same claim as a scheduled one (so it is won
// by at most one replica, gets a fence, respects concurrency: forbid, and lands in
// the ledger); the run is supervised like any other (lease watchdog, completion in
// a scope guard). Its tick and run lines say manual=true.
//
// The claim is monotonic per job like every other: when a later tick (second) of
// the job was already claimed — only possible when some replica's clock is ahead of
// this one's — the trigger is `superseded` and runs nothing.
//
// A host whose clock is ahead of the store's by more than lock.clock_tolerance hears
// `early` (docs/design.md §1 rule 15) and runs nothing.
//
// Exit status: 0 when the run ended `done`; 1 when it ended otherwise or the tick
// was not won (lost / busy / missed / superseded / early / backend error); 2 for bad input.
#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <thread>

#include "app/backend_call.h"
#include "app/commands.h"
#include "app/run_supervisor.h"
#include "app/runner.h"
#include "app/scheduled_job.h"
#include "app/scheduler.h"
#include "app/status_cli.h"
#include "base/steady_waits.h"

namespace tickd::app {
namespace {

// Why a manual tick did not run, in the operator's words.
std::string NotRunReason(const Result<lock::ClaimOutcome>& claimed, const lock::ClaimRequest& req) {
  if (!claimed) return "the lock backend did not answer: " + claimed.error().ToString();
  switch (claimed->status) {
    case lock::ClaimStatus::kLost:
      // The tick is the current second: a second trigger within it is the same tick.
      return "tick " + FormatTick(req.tick_unix) + " was already claimed by " +
             claimed->holder_node + ", which runs it (a trigger is the tick of the current " +
             "second, and a tick runs once)";
    case lock::ClaimStatus::kBusy:
      return "its tick " + FormatTick(claimed->holder_tick_unix) + " still runs on " +
             claimed->holder_node + " (concurrency: forbid)";
    case lock::ClaimStatus::kMissed:
      return "the backend's clock is past the tick's starting deadline";
    case lock::ClaimStatus::kSuperseded:
      // Claims are monotonic per job, manual ones too: a later second was claimed
      // already (by a replica whose clock is ahead of this one's).
      return "a later tick " + FormatTick(claimed->holder_tick_unix) + " was already claimed" +
             (claimed->holder_node.empty() ? std::string() : " by " + claimed->holder_node) +
             " (claims of a job are monotonic; is this host's clock behind?)";
    case lock::ClaimStatus::kStoreReset:
      // A manual trigger knows no earlier claim (known_tick 0): no backend answers this.
      return "the lock store lost claims it held (it restarted without its data)";
    case lock::ClaimStatus::kEarly:
      return "this host's clock is " +
             FormatSeconds(req.node_wall - WallTime(std::chrono::milliseconds(claimed->store_ms))) +
             " ahead of the lock store's (more than lock.clock_tolerance): fix its clock";
    case lock::ClaimStatus::kWon:
      break;
  }
  return "unknown";
}

}  // namespace

int CmdTrigger(const TriggerArgs& args) {
  RealClock clock;
  auto opened = OpenOpsContext(args.config_path, clock);
  if (const int* status = std::get_if<int>(&opened)) return *status;
  OpsContext& ctx = std::get<OpsContext>(opened);
  const config::Job* job = FindJobOrSay(ctx.config, args.config_path, args.job);
  if (job == nullptr) return kExitBadInput;
  auto scheduled = MakeScheduledJob(*job);
  if (!scheduled) {
    std::cerr << args.config_path << ": " << scheduled.error().ToString() << "\n";
    return kExitBadInput;
  }
  // The run's lease renewals and timeout wait on the monotonic clock (as `tickd run`).
  if (Result<void> waits = CheckSteadyWaits(); !waits) {
    std::cerr << "tickd: " << waits.error().ToString() << "\n";
    return kExitFailure;
  }
  Logger log(clock, LogFormatFromName(args.log_format).value_or(LogFormat::kLogfmt),
             LogLevel::kInfo, Logger::FdWriter(STDOUT_FILENO));
  const std::string node = NodeIdFor(args.node_id, ctx.config);

  lock::ClaimRequest req;
  req.job = job->name;
  req.node_wall = clock.Wall();
  req.tick_unix = req.node_wall.time_since_epoch().count() / 1000;
  req.node = node;
  req.owner_token = NewOwnerToken();
  req.lease = ctx.config.lock.lease;
  req.starting_deadline = (*scheduled)->StartingDeadline(req.tick_unix);
  req.forbid_overlap = job->concurrency == config::Concurrency::kForbid;
  req.config_hash = (*scheduled)->config_hash;
  // The store refuses the current second of a clock ahead of its own (rule 15).
  req.max_lead = ctx.config.lock.clock_tolerance;
  const SteadyTime claim_sent = clock.Steady();
  Result<lock::ClaimOutcome> claimed =
      CallBackend("claim", [&] { return ctx.backend->Claim(req); });

  std::vector<Field> fields = {
      {"job", req.job},
      {"tick", FormatTick(req.tick_unix)},
      {"node", node},
      {"outcome", claimed ? lock::ClaimStatusName(claimed->status) : std::string_view("error")}};
  if (!claimed) {
    fields.emplace_back("error", claimed.error().ToString());
  } else if (claimed->status == lock::ClaimStatus::kWon) {
    fields.emplace_back("fence", claimed->fence);
  } else if (claimed->status == lock::ClaimStatus::kSuperseded) {
    fields.emplace_back("later_tick", FormatTick(claimed->holder_tick_unix));
    if (!claimed->holder_node.empty()) fields.emplace_back("later_node", claimed->holder_node);
  } else if (!claimed->holder_node.empty()) {
    fields.emplace_back(claimed->status == lock::ClaimStatus::kBusy ? "holder" : "winner",
                        claimed->holder_node);
  }
  fields.emplace_back("manual", "true");
  const bool won = claimed && claimed->status == lock::ClaimStatus::kWon;
  log.Log(won ? LogLevel::kInfo : LogLevel::kWarn, "tick", fields);

  lock::Observation obs{
      req.job,         req.tick_unix,           node, std::string(fields[3].value), req.node_wall,
      req.config_hash, won ? claimed->fence : 0};
  if (Result<void> r = CallBackend("ledger", [&] { return ctx.backend->Record(obs); }); !r) {
    LogBackendError(log, LogLevel::kWarn, "ledger", req.job, FormatTick(req.tick_unix), node,
                    r.error());
  }
  if (!won) {
    std::cerr << "tickd: " << req.job << " was not run: " << NotRunReason(claimed, req) << "\n";
    return kExitFailure;
  }

  std::unique_ptr<Runner> runner = NewProcessRunner();
  WonTick tick{*scheduled,
               lock::HeldClaim{req.job, req.tick_unix, req.owner_token, claimed->fence, req.lease},
               claim_sent, node};
  tick.manual = true;
  tick.output_bytes = ctx.config.lock.history.output_bytes;
  tick.keep_outputs = ctx.config.lock.history.runs;
  tick.stop_grace = ctx.config.lock.stop_grace;
  ::signal(SIGPIPE, SIG_IGN);  // a lease guard gone is a write error, not the end of us
  const std::unique_ptr<LeaseGuard> lease_guard = StartLeaseGuard(log, args.log_format, node);
  tick.lease_guard = lease_guard.get();
  RunSupervisor run(clock, *ctx.backend, *runner, log, std::move(tick),
                    std::chrono::milliseconds(1'000), {});
  ThreadPool threads;
  run.Start(threads);
  run.Join();
  return run.outcome() == jobs::RunOutcome::kDone ? kExitOk : kExitFailure;
}

}  // namespace tickd::app
