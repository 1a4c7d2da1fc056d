// The subcommands of the tickd executable. Each returns the process exit status:
// 0 success, 2 bad input (arguments, job file, expression), 1 a runtime failure.
// main.cc parses the command line and calls exactly one of these.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tickd::app {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;

// The whole command line (app/main.cc): parses argv, runs one subcommand, returns
// its status; maps any exception to 1 ("internal error"). Exported from
// libtickd.so as tickd::run_command_line.
int RunCommandLine(int argc, char** argv);

struct NextArgs {
  std::optional<std::string> expression;  // EXPR; not with config_path
  std::string job;                   // --job: what `H` hashes, whose jitter offsets
  std::optional<std::string> jitter; // --jitter DURATION: print due instants (needs --job)
  std::string config_path;           // -c: the schedule, its options and jitter of --job
                                     // from this job file instead of EXPR and options
  std::string dialect = "cron";
  std::string timezone = "UTC";
  std::optional<std::string> from;   // RFC 3339; default now
  int count = 5;
  std::string dst_gap = "run";
  std::string dst_overlap = "auto";
};
int CmdNext(const NextArgs& args);                     // app/cmd_next.cc

struct ValidateArgs {
  std::string config_path;
};
int CmdValidate(const ValidateArgs& args);             // app/cmd_validate.cc

struct RunArgs {
  std::string config_path;
  std::string node_id;               // "" = from the job file, else <hostname>-<pid>
  std::string log_format = "logfmt"; // logfmt | json
  std::string log_level = "info";    // debug | info | warn | error
};
int CmdRun(const RunArgs& args);                       // app/cmd_run.cc

// Hidden: `tickd plugin-host PATH`, one plugin run in a child of the daemon (the run's
// parameters in the environment; see jobs/plugin_execution.h). Does not return: it
// _exit()s with the plugin's status.
struct PluginHostArgs {
  std::string plugin_path;
  bool check = false;  // --check: only load and check it (jobs::RunPluginCheck)
};
int CmdPluginHost(const PluginHostArgs& args);         // app/cmd_plugin_host.cc

// Hidden: `tickd lease-guard --log-format F`, the daemon's helper that SIGKILLs a run
// whose lease ended while the daemon could not (app/lease_guard.h).
struct LeaseGuardArgs {
  std::string log_format = "logfmt";
};

struct StatusArgs {
  std::string config_path;
  std::string job;                   // "" = every job
  int last = 10;                     // ticks per job
  bool json = false;
  bool runs = false;                 // --runs: the last runs of `job` with their output
  int limit = 5;                     // runs shown with --runs
};
int CmdStatus(const StatusArgs& args);                 // app/cmd_status.cc

struct TriggerArgs {
  std::string config_path;
  std::string job;
  std::string node_id;               // as for run
  std::string log_format = "logfmt";
};
int CmdTrigger(const TriggerArgs& args);               // app/cmd_trigger.cc

struct LocksArgs {
  std::string config_path;
  std::string release_job;           // --release JOB: free its running claim whose holder is gone
  bool yes = false;                  // required with --release
  bool json = false;
};
int CmdLocks(const LocksArgs& args);                   // app/cmd_locks.cc

// `tickd pause` and `tickd resume` (the same arguments; resume ignores until/reason).
struct PauseArgs {
  std::string config_path;
  std::vector<std::string> jobs;     // the jobs, or
  bool all = false;                  // every job
  std::string until;                 // RFC 3339 or a duration from now; "" = until resumed
  std::string reason;                // shown by status and in the daemons' pause lines
  std::string node_id;               // who paused (default as for run)
};
int CmdPause(const PauseArgs& args);                   // app/cmd_pause.cc
int CmdResume(const PauseArgs& args);                  // app/cmd_pause.cc

}  // namespace tickd::app
