// The tickd command line (docs/design.md §3). Parses arguments with CLI11 and hands off
// to one subcommand. It lives in libtickd.so, exported as tickd::run_command_line
// (lib/command_line.cc): the tickd executable, app/tickd_main.cc, calls it, so the
// daemon runs on the library's engine. This file alone maps failures to exit statuses: bad input is
// always 2 with a message on stderr, never a crash or a stack trace.
#include <cstdio>
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "app/commands.h"
#include "app/lease_guard.h"
#include "base/utf8.h"
#include "config/config.h"

namespace {

using tickd::app::kExitBadInput;
using tickd::app::kExitFailure;

int Main(int argc, char** argv) {
  CLI::App cli{"tickd — scheduled jobs that run exactly once per tick across a fleet", "tickd"};
  cli.set_version_flag("--version", std::string("tickd ") + TICKD_VERSION);
  cli.require_subcommand(1);

  tickd::app::RunArgs run_args;
  CLI::App* run = cli.add_subcommand("run", "Run the daemon");
  run->add_option("-c,--config", run_args.config_path, "Job file")->required();
  // --node-id follows node.id's rules; "" is as if it were not given (the job file's
  // node.id, else <hostname>-<pid>), like node.id's `${TICKD_NODE_ID:-}`.
  const auto node_id_check = [](const std::string& id) {
    return tickd::config::NodeIdProblem(id);
  };
  run->add_option("--node-id", run_args.node_id, "This replica's node id")
      ->check(node_id_check, "node id");
  run->add_option("--log-format", run_args.log_format, "logfmt or json")
      ->check(CLI::IsMember({"logfmt", "json"}));
  run->add_option("--log-level", run_args.log_level, "debug, info, warn or error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));

  tickd::app::ValidateArgs validate_args;
  CLI::App* validate = cli.add_subcommand("validate", "Check a job file; exit 0, or 2 with errors");
  validate->add_option("-c,--config", validate_args.config_path, "Job file")->required();

  tickd::app::NextArgs next_args;
  CLI::App* next = cli.add_subcommand("next", "Print the next firing instants of an expression");
  next->add_option("--dialect", next_args.dialect, "cron, quartz or spring")
      ->check(CLI::IsMember({"cron", "quartz", "spring"}));
  next->add_option("--tz", next_args.timezone, "IANA time zone (default UTC)");
  next->add_option("--from", next_args.from, "Start instant, RFC 3339 (default now)");
  next->add_option("-n", next_args.count, "How many instants (default 5)")
      ->check(CLI::Range(0, 100000));
  next->add_option("--dst-gap", next_args.dst_gap, "run or skip")
      ->check(CLI::IsMember({"run", "skip"}));
  next->add_option("--dst-overlap", next_args.dst_overlap, "auto, first or both")
      ->check(CLI::IsMember({"auto", "first", "both"}));
  next->add_option("EXPR", next_args.expression, "Cron expression (not with -c)");
  next->add_option("--job", next_args.job, "Job name: what H hashes, whose jitter offsets");
  CLI::Option* next_jitter =
      next->add_option("--jitter", next_args.jitter, "Print due instants with this jitter");
  next->add_option("-c,--config", next_args.config_path,
                   "Job file: the schedule and jitter of --job from it")
      ->excludes(next_jitter)
      ->excludes("--dialect")
      ->excludes("--tz")
      ->excludes("--dst-gap")
      ->excludes("--dst-overlap");

  // Hidden (empty group): the child of a plugin run with isolation: process (DESIGN §8).
  tickd::app::PluginHostArgs plugin_host_args;
  CLI::App* plugin_host = cli.add_subcommand("plugin-host", "")->group("");
  plugin_host->add_option("PATH", plugin_host_args.plugin_path, "Plugin library")->required();
  plugin_host->add_flag("--check", plugin_host_args.check, "Only load and check it (validator)");

  // Hidden: the daemon's lease guard (app/lease_guard.h).
  tickd::app::LeaseGuardArgs lease_guard_args;
  CLI::App* lease_guard = cli.add_subcommand("lease-guard", "")->group("");
  lease_guard->add_option("--log-format", lease_guard_args.log_format, "logfmt or json");

  tickd::app::StatusArgs status_args;
  CLI::App* status = cli.add_subcommand("status", "Show the cluster-wide ledger of recent ticks");
  status->add_option("-c,--config", status_args.config_path, "Job file")->required();
  status->add_option("JOB", status_args.job, "Only this job");
  status->add_option("--job", status_args.job, "Only this job (as JOB)");
  status->add_option("--last", status_args.last, "Ticks per job (default 10)")
      ->check(CLI::Range(1, 100000));
  CLI::Option* status_runs =
      status->add_flag("--runs", status_args.runs, "The job's last runs with what they printed");
  status->add_option("--limit", status_args.limit, "Runs shown with --runs (default 5)")
      ->check(CLI::Range(1, 1000))
      ->needs(status_runs);
  status->add_flag("--json", status_args.json, "JSON for scripts");

  tickd::app::TriggerArgs trigger_args;
  CLI::App* trigger = cli.add_subcommand("trigger", "Run one tick of a job now (claimed as usual)");
  trigger->add_option("-c,--config", trigger_args.config_path, "Job file")->required();
  trigger->add_option("--node-id", trigger_args.node_id, "This replica's node id")
      ->check(node_id_check, "node id");
  trigger->add_option("--log-format", trigger_args.log_format, "logfmt or json")
      ->check(CLI::IsMember({"logfmt", "json"}));
  trigger->add_option("JOB", trigger_args.job, "Job name")->required();

  tickd::app::LocksArgs locks_args;
  CLI::App* locks =
      cli.add_subcommand("locks", "List running claims; free one whose holder is gone");
  locks->add_option("-c,--config", locks_args.config_path, "Job file")->required();
  locks->add_option("--release", locks_args.release_job, "Release JOB's claim (holder gone)");
  locks->add_flag("--yes", locks_args.yes, "Confirm --release");
  locks->add_flag("--json", locks_args.json, "JSON for scripts");

  tickd::app::PauseArgs pause_args;
  CLI::App* pause = cli.add_subcommand("pause", "Pause jobs on every replica (until resumed)");
  pause->add_option("-c,--config", pause_args.config_path, "Job file")->required();
  pause->add_option("JOB", pause_args.jobs, "Jobs to pause");
  pause->add_flag("--all", pause_args.all, "Pause every job");
  pause->add_option("--until", pause_args.until,
                    "End of the pause: RFC 3339, or a duration from now (2h)");
  pause->add_option("--reason", pause_args.reason, "Why, for the operators")
      ->check(
          [](const std::string& reason) -> std::string {
            if (reason.size() <= 4096 && tickd::IsValidUtf8(reason)) return "";
            return "must be at most 4096 bytes of UTF-8 text";
          },
          "text");
  pause->add_option("--node-id", pause_args.node_id, "Who pauses (default: hostname-pid)")
      ->check(node_id_check, "node id");

  tickd::app::PauseArgs resume_args;
  CLI::App* resume = cli.add_subcommand("resume", "End the pause of jobs");
  resume->add_option("-c,--config", resume_args.config_path, "Job file")->required();
  resume->add_option("JOB", resume_args.jobs, "Jobs to resume");
  resume->add_flag("--all", resume_args.all, "End every pause");
  resume->add_option("--node-id", resume_args.node_id, "Who resumes (default: hostname-pid)")
      ->check(node_id_check, "node id");

  try {
    cli.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return cli.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return cli.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return cli.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "tickd: " << e.what() << "\n" << "Run 'tickd --help' for usage.\n";
    return kExitBadInput;
  }

  if (*run) return tickd::app::CmdRun(run_args);
  if (*validate) return tickd::app::CmdValidate(validate_args);
  if (*next) return tickd::app::CmdNext(next_args);
  if (*plugin_host) return tickd::app::CmdPluginHost(plugin_host_args);
  if (*lease_guard) return tickd::app::RunLeaseGuard(lease_guard_args.log_format);
  if (*status) return tickd::app::CmdStatus(status_args);
  if (*trigger) return tickd::app::CmdTrigger(trigger_args);
  if (*locks) return tickd::app::CmdLocks(locks_args);
  if (*pause) return tickd::app::CmdPause(pause_args);
  if (*resume) return tickd::app::CmdResume(resume_args);
  return kExitBadInput;
}

}  // namespace

int tickd::app::RunCommandLine(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tickd: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "tickd: internal error\n");
  }
  return kExitFailure;
}
