// The end-to-end harness: real `tickd run` processes (replicas) sharing one job
// file and one lock store, their logs parsed back into fields, and the signals an
// operator (or a crash) sends them. Every scenario runs against any backend: a
// BackendFixture supplies the `lock:` section (and starts/stops its server).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tickd::e2e {

using std::chrono::milliseconds;
namespace fs = std::filesystem;

// One log line of DESIGN §6: "<ts> <level> <event> key=value ...".
struct LogLine {
  std::string ts;
  std::string level;
  std::string event;
  std::map<std::string, std::string> fields;
  std::string raw;

  std::string Get(const std::string& key) const;
};

// Parses one logfmt line; nullopt when it is not in the DESIGN §6 shape.
std::optional<LogLine> ParseLogLine(std::string_view line);

// A tick as the logs write it (UTC, seconds): "2026-11-21T14:00:00Z".
std::string TickText(long long unix_s);

// The `event` lines of `job` among `lines`, in order; of tick `tick` alone when it is
// not empty (TickText's spelling).
std::vector<LogLine> Events(const std::vector<LogLine>& lines, const std::string& event,
                            const std::string& job, const std::string& tick = "");

// A lock store for the scenarios. Start() runs before the replicas, Stop() after.
class BackendFixture {
 public:
  virtual ~BackendFixture() = default;
  virtual std::string name() const = 0;
  // The `lock:` section of the job file (YAML, indented by two spaces under lock:).
  virtual std::string LockYaml(const fs::path& dir) const = 0;
  // Extra environment for replicas (e.g. the password variable).
  virtual std::vector<std::string> Env() const { return {}; }
  // Kills and restarts the server (scenarios that need it skip backends without one).
  virtual bool CanRestart() const { return false; }
  virtual void Restart() {}

  // What the nemesis (tests/nemesis) needs beyond the scenarios. A fixture that cannot
  // do one says so through its Can*() / Address(); the others then do nothing.
  // Failures throw std::runtime_error (these fixtures run outside Catch too).
  //
  // The server's "127.0.0.1:PORT" that LockYaml() names; "" when there is no server
  // (SQLite), so no proxy or partition can be put in front of it.
  virtual std::string Address() const { return ""; }
  // LockYaml() with Address() replaced by `address`: a proxy's "127.0.0.1:PORT", or
  // "${VAR}" that each replica's environment expands to its own way to the store.
  std::string LockYamlVia(const fs::path& dir, const std::string& address) const;
  // SIGSTOP / SIGCONT of every server process: a store that stops answering without
  // closing connections. ServerPids(): the processes (evidence that the pause took).
  virtual bool CanPause() const { return false; }
  virtual void Pause() {}
  virtual void Resume() {}
  virtual std::vector<pid_t> ServerPids() const { return {}; }
  // Restart() in two steps, with the store down in between (REQUIRES: CanRestart()).
  virtual void Kill() {}
  virtual void Start() {}
  // Kill, forget every claim and fence (Redis: no AOF left; etcd: a fresh data dir;
  // PostgreSQL: the database dropped and recreated; ZooKeeper: a wiped dataDir), start.
  virtual bool CanRestartWithoutData() const { return false; }
  virtual void RestartWithoutData() {}
};

std::unique_ptr<BackendFixture> MakeSqliteFixture();
// A redis-server of its own (tests/e2e/redis_fixture.cc); the password reaches the
// replicas through lock.password_env. CanRestart(): kill -9 and restart, same AOF.
std::unique_ptr<BackendFixture> MakeRedisFixture();
// A ZooKeeper shared by the test binary, a chroot per fixture
// (tests/e2e/zookeeper_fixture.cc). CanRestart(): kill -9 and restart, same dataDir.
std::unique_ptr<BackendFixture> MakeZookeeperFixture();
// A PostgreSQL 15 of its own (tests/e2e/postgres_fixture.cc); the password reaches the
// replicas through lock.password_env. CanRestart(): SIGKILL of every server process,
// then a restart on the same port and data folder (crash recovery).
std::unique_ptr<BackendFixture> MakePostgresFixture();
// A one-member etcd of its own (tests/e2e/etcd_fixture.cc). CanRestart(): kill -9 and
// restart on the same ports and data folder.
std::unique_ptr<BackendFixture> MakeEtcdFixture();

// A tickd replica: `tickd run -c FILE --node-id NODE`, stdout+stderr to a log file.
class Replica {
 public:
  // `prefix`: argv run before tickd (e.g. `ip netns exec NAME`), empty for none.
  Replica(std::string node, fs::path config, fs::path log, std::vector<std::string> env,
          std::vector<std::string> prefix = {});
  ~Replica();  // SIGKILLs a replica still running
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  void Start();
  void Signal(int sig) const;
  // Waits for the process to exit; its exit status, or nullopt on timeout.
  std::optional<int> Wait(milliseconds timeout);
  bool running() const { return pid_ > 0; }
  const std::string& node() const { return node_; }
  pid_t pid() const { return pid_; }
  std::vector<LogLine> Lines() const;
  std::string LogText() const;

 private:
  std::string node_;
  fs::path config_;
  fs::path log_;
  std::vector<std::string> env_;
  std::vector<std::string> prefix_;
  pid_t pid_ = -1;
};

// A temporary folder with a job file and replicas.
class Cluster {
 public:
  explicit Cluster(BackendFixture& backend);
  ~Cluster();  // stops replicas, removes the folder (kept when TICKD_E2E_KEEP is set)

  const fs::path& dir() const { return dir_; }
  // Writes jobs.yaml: `version: 1`, the backend's lock section with `extra_lock` lines
  // appended (e.g. "lease: 2s"), then `body` (top-level keys: jobs:, defaults:, …).
  fs::path WriteJobFile(const std::string& body, const std::string& extra_lock = "");
  // Writes jobs.yaml as given, whole (a lock section of the caller's own).
  fs::path WriteJobFileText(const std::string& text);
  // Adds and starts a replica; `env` is added (e.g. faketime variables), `prefix` runs
  // before tickd (e.g. `ip netns exec NAME`).
  Replica& StartReplica(const std::string& node, std::vector<std::string> env = {},
                        std::vector<std::string> prefix = {});
  std::vector<std::unique_ptr<Replica>>& replicas() { return replicas_; }
  std::vector<LogLine> AllLines() const;
  // Polls `done` every 50 ms until it holds or `timeout` passes; returns whether it held.
  static bool WaitUntil(const std::function<bool()>& done, milliseconds timeout);
  void KeepDir() { keep_ = true; }

 private:
  BackendFixture& backend_;
  fs::path dir_;
  fs::path job_file_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  bool keep_ = false;
};

// Environment that runs a replica with its wall clock shifted by `offset_seconds`
// (libfaketime, monotonic clock untouched).
std::vector<std::string> FakeTimeEnv(double offset_seconds);

// Lines of a file (e.g. the runs file a job appends to).
std::vector<std::string> ReadLines(const fs::path& file);

// Runs a command to completion, with `env` added to its environment; returns (exit
// status, stdout+stderr).
std::pair<int, std::string> RunCommand(const std::vector<std::string>& argv,
                                       const std::vector<std::string>& env = {});

}  // namespace tickd::e2e
