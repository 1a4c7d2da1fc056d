// The job file (docs/design.md §4) as typed, validated values. yaml-cpp never leaves
// this folder: everything outside sees only these structs.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "cron/schedule.h"
#include "lock/tls_files.h"

namespace tickd::config {

using std::chrono::milliseconds;

enum class Concurrency { kForbid, kAllow };
enum class Misfire { kSkip, kRunOnce };
enum class OnLeaseLost { kTerminate, kContinue };
enum class Isolation { kProcess, kNone };

// Tries of one tick's run (docs/design.md §1 rule 14, §4): `retries: N` (N retries after
// the first try) with `retry_backoff: D` (waits D, 2D, 4D …, see BackoffBefore), or the
// older `retries: {attempts: A, backoff: D}` (A tries in all, D before each retry).
struct Retries {
  int attempts = 1;                  // total tries including the first (1 = no retry)
  milliseconds backoff{1'000};       // wait before the first retry
  bool doubling = false;             // each further wait doubles (the `retries: N` form)

  // The longest wait that doubling reaches (a longer `backoff` is kept as it is).
  static constexpr milliseconds kMaxDoubledBackoff{600'000};
  // The wait before try `attempt` (2 = the first retry): `backoff`, then with
  // `doubling` twice the previous wait each time, up to max(backoff,
  // kMaxDoubledBackoff).
  milliseconds BackoffBefore(int attempt) const;
};

struct PluginSpec {
  std::string path;                  // resolved against the job file's folder
  std::string config_json = "{}";    // `plugin.config` as JSON
  Isolation isolation = Isolation::kProcess;
};

// An inclusive range of HTTP statuses: 204 is {204, 204}, `2xx` is {200, 299}.
using StatusRange = std::pair<int, int>;

// `http:` — a job that is one HTTP request per attempt (docs/design.md §4).
struct HttpJobSpec {
  std::string method = "GET";        // GET POST PUT PATCH DELETE HEAD
  std::string url;                   // http:// or https:// only
  // Sent as written, after ${VAR} expansion (secrets come from the environment);
  // header values are never logged nor printed.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;                  // "" = none
  milliseconds timeout{30'000};      // of the request; the job's `timeout` still caps the run
  std::vector<StatusRange> expect_status{{200, 299}};  // what counts as `done`
};

// `on_failure:` / `on_success:` / `on_miss:` — where one notification goes
// (docs/design.md §4 "Notifications"). Exactly one of shell / url is set.
struct Notifier {
  std::optional<std::string> shell;  // run via /bin/sh -c, the JSON on stdin
  std::string url;                   // `http:` — POSTed the JSON; "" when shell is set
  std::vector<std::pair<std::string, std::string>> headers;  // never logged
  milliseconds timeout{5'000};       // of one try (HTTP request or shell command)
  int attempts = 3;                  // tries in all, 1 s, 2 s, 4 s… apart (1–10)
};

// One job, with `defaults` already applied.
struct Job {
  std::string name;                  // [a-z0-9._-], unique, ≤ 64 chars
  std::string schedule_text;         // the expression as written
  cron::ScheduleOptions schedule_options;  // dialect, timezone, dst_gap, dst_overlap
  // Exactly one of shell / argv / plugin / http is set.
  std::optional<std::string> shell;  // run via /bin/sh -c
  std::vector<std::string> argv;     // `run:` — no shell
  std::optional<PluginSpec> plugin;
  std::optional<HttpJobSpec> http;   // one HTTP request per attempt
  milliseconds timeout{3'600'000};   // SIGTERM to the group after this
  milliseconds kill_grace{10'000};   // SIGKILL this long after SIGTERM
  std::map<std::string, std::string> env;  // added to the job's environment
  std::string workdir;               // resolved against the job file's folder (absolute);
                                     // that folder when not set
  Concurrency concurrency = Concurrency::kForbid;
  Misfire misfire = Misfire::kSkip;
  // Always set after LoadConfig: the explicit value, or min(60s, the job's period).
  // A value set on the job itself that is longer than the period is an error; one
  // inherited from `defaults` is clamped to the period.
  std::optional<milliseconds> starting_deadline;
  bool recover = false;              // at-least-once: re-claim a tick whose holder died
  OnLeaseLost on_lease_lost = OnLeaseLost::kTerminate;
  Retries retries;
  // Spreads the runs of one tick over [T, T + jitter): tick T stays the claim key, the
  // run is due at T + cron::JitterOffset(name, T, jitter), the same on every replica
  // (docs/design.md §2). 0 = due at T. Always shorter than starting_deadline.
  milliseconds jitter{0};
  bool enabled = true;
  // Notifications (not part of ConfigHash: they change nothing that runs or is claimed).
  std::optional<Notifier> on_failure;  // the winner, once per tick: any outcome but done
  std::optional<Notifier> on_success;  // the winner, once per tick: outcome done
  std::optional<Notifier> on_miss;     // one replica, once per missed tick
  int line = 0;                      // where the job starts in the file (1-based), for messages
  std::string config_dir;            // the job file's folder (absolute); ConfigHash() hashes
                                     // paths below it relative to it, so replicas that keep
                                     // the same file in different folders still agree

  // A stable hash (hex) of everything above that changes what runs or how it is
  // claimed; replicas compare it to detect different job files (config-mismatch).
  std::string ConfigHash() const;
};

// lock.history: the tail of what each run printed, kept with its tick in the store
// (docs/design.md §4). Older outputs go with their ticks (lock.retention) or, beyond
// the newest `runs` of a job, on their own.
struct HistorySettings {
  std::size_t output_bytes = 16 * 1024;  // kept per run (1KB–64KB); 0: nothing is kept
  int runs = 50;                         // per job: the newest runs that printed keep it
};

struct LockSettings {
  std::string backend = "sqlite";    // sqlite | redis | etcd | postgres | zookeeper | none | memory
  std::string url;                   // default sqlite://<job file folder>/tickd.db; a relative
                                     // sqlite path is resolved against that folder
                                     // ("sqlite:///abs/dir/tickd.db"); "" for none/memory
  // Authentication (network backends). The password comes from password_file or
  // password_env (never both); a password in the URL wins over either (with a
  // warning). The config keeps where the password is, never the password itself:
  // ReadLockPassword() reads it when the store is opened.
  std::string username;              // "" = the URL's user, if any (a different one is an error)
  std::string password_file;         // absolute; its content minus trailing newlines
  std::string password_env;          // name of an environment variable holding the password
  lock::TlsFiles tls;                // lock.tls: {ca_file, cert_file, key_file} (etcd, postgres)
  milliseconds lease{15'000};        // renewed every lease/3 while a job runs
  // How long before the end of its lease (LeaseValidity) a run that has no renewal
  // confirmed is told to stop (SIGTERM, an in-process call's stop token); SIGKILL at
  // the end (docs/design.md §1 rule 2). nullopt: DefaultStopGrace(lease). ≤ lease/3.
  std::optional<milliseconds> stop_grace;
  // How long before T the ticks of an instant are claimed and their processes made
  // ready (docs/design.md §1 "Early claims"); 0: at T. Below 1 s.
  milliseconds claim_lead{200};
  // The longest lead an instant's claims get when claim_lead is too short for all of
  // them at the store's measured pace (docs/design.md §1 "Adaptive lead"); the process
  // is still made ready only claim_lead before T. claim_lead–60 s; = claim_lead: fixed.
  milliseconds claim_lead_max{30'000};
  // How far ahead of the store's clock a claim may come beyond claim_lead (docs/design.md
  // §1 rule 15): a claim further ahead is refused `early` by the store. 0–10 s.
  milliseconds clock_tolerance{250};
  milliseconds op_timeout{2'000};    // every backend call answers within this
  milliseconds retention{7LL * 24 * 3'600'000};  // how long finished ticks are remembered
  HistorySettings history;           // lock.history: {output, runs}
};

// The part of a lease its holder counts on, from when the claim or renewal was sent:
// lease − 1 % − 2 ms (clock drift and the stores' rounding; docs/design.md §1 rule 2).
// node.id, --node-id and libtickd's SchedulerOptions::node: at most 128 bytes of UTF-8
// text, none a space, a control character, '"' or '=' (logfmt, the ledger and the
// stores' keys and JSON records carry it). "" when `id` is one, else what is wrong; "" itself is one (the default).
std::string NodeIdProblem(std::string_view id);

milliseconds LeaseValidity(milliseconds lease);

// lock.stop_grace when the job file does not say: lease/5.
milliseconds DefaultStopGrace(milliseconds lease);

struct HttpSettings {
  std::string listen;                // "" = off; "127.0.0.1:9464"; "9464" and ":9464" are
                                     // normalized to loopback "127.0.0.1:9464"
};

// One problem in a job file: "FILE:LINE:COL: message" ("FILE: message" when line == 0).
struct ConfigError {
  std::string file;                  // the path as the user gave it
  int line = 0;                      // 1-based; 0 when not about a place
  int column = 0;                    // 1-based
  std::string message;               // "key.path: what is wrong", e.g. "jobs[0].timeout: ..."
  std::string ToString() const;
};

struct Config {
  int version = 1;
  std::string path;                  // the job file, absolute
  std::string node_id;               // "" = <hostname>-<pid> (decided by app/)
  // node.clock_skew_warning: measured skew to a peer beyond this logs `clock-skew`;
  // 0 = never warn (the tickd_clock_skew_seconds metric is still exported).
  milliseconds clock_skew_warning{1'000};
  LockSettings lock;
  HttpSettings http;
  int max_concurrent_runs = 64;      // per replica; a tick beyond it is logged and skipped
  milliseconds shutdown_grace{30'000};  // SIGTERM: how long running jobs may finish
  std::vector<Job> jobs;
  // Things worth telling the operator that do not reject the file (e.g. a schedule
  // whose last firing is already past, backend none). Same format as errors.
  std::vector<ConfigError> warnings;
};

struct LoadOptions {
  bool check_permissions = true;     // refuse group/other-writable files and foreign owners
  bool check_plugins = true;         // check that plugin files exist, are regular files, are
                                     // not group/other-writable (with check_permissions) and
                                     // load: dlopen, tickd_plugin_v1, abi_version
  // Where that load is made: nullptr in this process (a crashing constructor ends the
  // validator); tickd's commands make it in a child (app::PluginCheckInChild).
  std::function<Result<void>(const std::string& path)> plugin_check;
  // The instant used to derive each job's period (starting_deadline default) and the
  // "last firing is past" warnings; nullopt = the real clock. For tests.
  std::optional<cron::Instant> now;
};

// The password of `lock` from its password_file or password_env ("" when neither is
// set, or the variable is unset). The error names the key and the file, never the
// content. Read when the store is opened, so a rotated file is picked up by a restart.
tl::expected<std::string, std::string> ReadLockPassword(const LockSettings& lock);

// Reads, expands ${VAR}/${VAR:-default} and validates the job file. Returns every
// error found (not just the first), or the config. Never throws.
tl::expected<Config, std::vector<ConfigError>> LoadConfig(const std::string& path,
                                                          const LoadOptions& options = {});

// LoadConfig after the read: `text` is taken as the content of the job file `path`,
// which is not opened (no owner/mode checks); it names the file in messages and its
// folder is what relative paths resolve against. LoadConfig itself ends here, so
// the two agree on everything but the file checks. For the fuzzer and for tests.
tl::expected<Config, std::vector<ConfigError>> LoadConfigFromString(
    const std::string& text, const std::string& path, const LoadOptions& options = {});

}  // namespace tickd::config
