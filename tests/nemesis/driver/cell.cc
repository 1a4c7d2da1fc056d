#include "tests/nemesis/driver/cell.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/e2e/harness.h"
#include "tests/nemesis/driver/injectors.h"
#include "tests/nemesis/driver/lease_watch.h"
#include "tests/nemesis/driver/sentinel.h"
#include "tests/support/server_process.h"

namespace tickd::e2e {
// The fixtures compiled into the driver (tests/nemesis/driver/CMakeLists.txt).
std::unique_ptr<BackendFixture> MakeRedisFixture();
#ifdef TICKD_NEMESIS_HAVE_ETCD
std::unique_ptr<BackendFixture> MakeEtcdFixture();
#endif
#ifdef TICKD_NEMESIS_HAVE_POSTGRES
std::unique_ptr<BackendFixture> MakePostgresFixture();
#endif
#ifdef TICKD_NEMESIS_HAVE_ZOOKEEPER
std::unique_ptr<BackendFixture> MakeZookeeperFixture();
#endif
}  // namespace tickd::e2e

namespace tickd::nemesis {

namespace {

namespace fs = std::filesystem;
using e2e::BackendFixture;
using e2e::Cluster;
using e2e::LogLine;
using e2e::Replica;
using std::chrono::milliseconds;

constexpr const char* kStoreVar = "NEMESIS_STORE";

// Runs `fn` at scope end, whatever happened (every process and mount the cell made).
class ScopeGuard {
 public:
  explicit ScopeGuard(std::function<void()> fn) : fn_(std::move(fn)) {}
  ~ScopeGuard() {
    try {
      if (fn_) fn_();
    } catch (...) {
    }
  }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  std::function<void()> fn_;
};

std::int64_t NowMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

void SleepS(double seconds) {
  std::this_thread::sleep_for(milliseconds(static_cast<long long>(seconds * 1000)));
}

// "2026-11-21T14:00:00.003Z" → unix ms; -1 when not in that shape.
std::int64_t TsMs(const std::string& ts) {
  std::tm tm{};
  const char* rest = ::strptime(ts.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return -1;
  std::int64_t ms = static_cast<std::int64_t>(::timegm(&tm)) * 1000;
  if (*rest == '.') ms += std::atoi(std::string(rest + 1, 3).c_str());
  return ms;
}

// Whether every thread of `pid` is stopped (state T/t in /proc).
bool Stopped(pid_t pid) {
  if (pid <= 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() &&
         (line[close + 2] == 'T' || line[close + 2] == 't');
}

std::unique_ptr<BackendFixture> MakeFixture(const std::string& backend) {
  if (backend == "sqlite") return e2e::MakeSqliteFixture();
  if (backend == "redis") return e2e::MakeRedisFixture();
  if (backend == "redis-sentinel") return SentinelFixture::Make();
#ifdef TICKD_NEMESIS_HAVE_ETCD
  if (backend == "etcd") return e2e::MakeEtcdFixture();
#endif
#ifdef TICKD_NEMESIS_HAVE_POSTGRES
  if (backend == "postgres") return e2e::MakePostgresFixture();
#endif
#ifdef TICKD_NEMESIS_HAVE_ZOOKEEPER
  if (backend == "zookeeper") return e2e::MakeZookeeperFixture();
#endif
  throw std::runtime_error("backend " + backend + " is not built into this driver");
}

// A troubled line of `replica` (warn/error level, or a tick/run with outcome=error)
// among the lines after the first `skip`; its text, or "".
std::string TroubleAfter(const Replica& replica, std::size_t skip) {
  const auto lines = replica.Lines();
  for (std::size_t i = skip; i < lines.size(); ++i) {
    const LogLine& l = lines[i];
    if (l.level == "warn" || l.level == "error" || l.Get("outcome") == "error") return l.raw;
  }
  return "";
}

std::string JobFileText(const std::string& lock_yaml, double lease_s, const fs::path& socket,
                        const std::string& write_bin) {
  std::ostringstream out;
  out << "version: 1\nlock:\n"
      << lock_yaml << "  lease: " << static_cast<int>(std::lround(lease_s * 1000))
      << "ms\n"
      // A short grace: the long job's run still going at the end is cut, not awaited.
      << "shutdown_grace: 2s\n"
      << "defaults:\n  timezone: UTC\n  timeout: 30s\n  kill_grace: 1s\njobs:\n";
  for (const JobPlan& j : NemesisJobs()) {
    out << "  - name: " << j.name << "\n"
        << "    schedule: \"@every " << j.every_s << "s\"\n"
        << "    concurrency: " << (j.forbid ? "forbid" : "allow") << "\n"
        << "    recover: " << (j.recover ? "true" : "false") << "\n"
        << "    run: [\"" << write_bin << "\", \"--socket\", \"" << socket.string()
        << "\", \"--hold-ms\", \"" << j.hold_ms << "\"";
    if (j.write_every_ms > 0) out << ", \"--write-every-ms\", \"" << j.write_every_ms << "\"";
    out << "]\n";
  }
  return out.str();
}

// The resource (nemesis_resource) of one cell; SIGTERM at scope end.
class Resource {
 public:
  Resource(const std::string& binary, const fs::path& socket, const fs::path& journal,
           const fs::path& log) {
    pid_ = testing::SpawnServer(
        {binary, "--socket", socket.string(), "--journal", journal.string()}, log.string());
    const bool up = testing::WaitUntilServing(
        pid_, [&] { return fs::exists(socket); }, milliseconds(5000));
    if (!up) throw std::runtime_error("nemesis_resource did not start (see " + log.string() + ")");
  }
  ~Resource() { Stop(); }
  void Stop() { testing::StopServer(pid_, SIGTERM); }

 private:
  pid_t pid_ = -1;
};

// A tmpfs mounted at `dir` (root only); unmounted at scope end.
class Tmpfs {
 public:
  Tmpfs(const fs::path& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir);
    const auto [status, out] =
        e2e::RunCommand({"/bin/mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", dir.string()});
    if (status != 0) throw std::runtime_error("mount tmpfs at " + dir.string() + ": " + out);
  }
  ~Tmpfs() { e2e::RunCommand({"/bin/umount", "-l", dir_.string()}); }

 private:
  fs::path dir_;
};

// Fills the file system of `file` until it has no space left; bytes written.
std::uint64_t FillDisk(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 0;
  std::vector<char> block(1 << 16, 'x');
  std::uint64_t total = 0;
  for (int i = 0; i < 100'000; ++i) {  // bounded: 6.4 GB at most
    const ssize_t n = ::write(fd, block.data(), block.size());
    if (n <= 0) break;
    total += static_cast<std::uint64_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  return total;
}

// Makes `file` read-only (or writable again); how: "chattr" (root: immutable, which
// also stops descriptors already open) or "chmod" (new opens only).
std::string SetReadOnly(const fs::path& file, bool read_only) {
  if (::geteuid() == 0) {
    const auto [status, out] =
        e2e::RunCommand({"/usr/bin/chattr", read_only ? "+i" : "-i", file.string()});
    if (status == 0) return "chattr";
  }
  std::error_code ec;
  fs::permissions(file,
                  read_only ? fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read
                            : fs::perms::owner_read | fs::perms::owner_write,
                  ec);
  return "chmod";
}

// Waits (≤ 8 s) for `replica`'s next `event` line with outcome `outcome` ("" = any)
// after the first `skip` lines, polling every 5 ms: the point a replica fault hits.
bool WaitForPoint(const Replica& replica, std::size_t skip, const std::string& event,
                  const std::string& outcome) {
  return Cluster::WaitUntil(
      [&] {
        const auto lines = replica.Lines();
        for (std::size_t i = skip; i < lines.size(); ++i) {
          if (lines[i].event == event && (outcome.empty() || lines[i].Get("outcome") == outcome))
            return true;
        }
        return false;
      },
      milliseconds(8000));
}

constexpr const char* kLongJob = "w-long";

// Waits (≤ 25 s) until a run of the long job has gone on for 1–4 s (its tick line
// `won`, no `run` line yet): the index of the replica running it, and *tick its T;
// -1 when none did.
int LongRunHolder(Cluster& cluster, std::int64_t* tick) {
  int holder = -1;
  Cluster::WaitUntil(
      [&] {
        const std::int64_t now = NowMs();
        for (std::size_t i = 0; i < cluster.replicas().size() && holder < 0; ++i) {
          const auto lines = cluster.replicas()[i]->Lines();
          for (const LogLine& l : lines) {
            if (l.event != "tick" || l.Get("job") != kLongJob || l.Get("outcome") != "won")
              continue;
            const std::int64_t t = TsMs(l.Get("tick"));
            if (t < 0 || now < t + 1000 || now > t + 4000) continue;
            const bool ended = std::any_of(lines.begin(), lines.end(), [&](const LogLine& r) {
              return r.event == "run" && r.Get("job") == kLongJob && r.Get("tick") == l.Get("tick");
            });
            if (!ended) {
              holder = static_cast<int>(i);
              *tick = t / 1000;
            }
          }
        }
        return holder >= 0;
      },
      milliseconds(25000));
  return holder;
}

// SIGTERM (after SIGCONT), then a new process of the same node on the same log.
void RestartReplica(Replica& replica) {
  if (replica.running()) {
    replica.Signal(SIGCONT);
    replica.Signal(SIGTERM);
    if (!replica.Wait(milliseconds(15000))) {
      replica.Signal(SIGKILL);
      replica.Wait(milliseconds(5000));
    }
  }
  replica.Start();
}

void StopReplicas(Cluster& cluster) {
  for (auto& r : cluster.replicas()) {
    if (!r->running()) continue;
    r->Signal(SIGCONT);
    r->Signal(SIGTERM);
  }
  for (auto& r : cluster.replicas()) {
    if (r->running() && !r->Wait(milliseconds(15000))) {
      r->Signal(SIGKILL);
      r->Wait(milliseconds(5000));
    }
  }
}

// Appends a second accepted write of the journal's first accepted (job, tick), from a
// replica that does not exist: the checker must call it a duplicate.
void PlantDuplicate(const fs::path& journal) {
  std::optional<nlohmann::json> first;
  std::uint64_t last_seq = 0;
  for (const std::string& line : e2e::ReadLines(journal)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    last_seq = std::max<std::uint64_t>(last_seq, j.value("seq", 0ULL));
    const std::string job = j.value("job", "");
    bool recover = false;  // a recover job's re-runs are forgiven: plant elsewhere
    for (const JobPlan& p : NemesisJobs()) recover = recover || (p.name == job && p.recover);
    if (!first && j.value("accepted", false) && !recover) first = j;
  }
  if (!first) return;
  nlohmann::json& j = *first;
  j["replica"] = "planted";
  j["fence"] = j.value("fence", 0ULL) + 1'000'000;
  j["last_fence"] = j.value("fence", 0ULL) - 1;
  j["seq"] = last_seq + 1;  // decided after every real attempt
  std::ofstream(journal, std::ios::app) << j.dump() << "\n";
}

}  // namespace

const std::vector<JobPlan>& NemesisJobs() {
  // Forbid and allow, a hold longer than the period (busy ticks, overlapping runs of
  // the allow job), a two-second schedule, and one job that recovers interrupted ticks.
  static const std::vector<JobPlan> jobs = {
      {"w-forbid", 1, true, false, 200},
      {"w-allow", 1, false, false, 300},
      {"w-busy", 1, true, false, 1500},
      {"w-every2", 2, true, false, 400},
      {"w-overlap", 1, false, false, 1300},
      {"w-recover", 1, true, true, 100},
      // Runs for several leases, writing every 100 ms: a run that outlives its lease
      // (its holder cut off, the store paused) shows as late writes.
      {"w-long", 1, true, false, 10'000, 100},
  };
  return jobs;
}

CellResult RunCell(const std::string& backend, const CellPlan& plan, const CellOptions& options) {
  CellResult result;
  result.backend = backend;
  result.plan = plan;
  const auto began = std::chrono::steady_clock::now();
  const FaultKind* kind = FindFault(plan.fault);
  if (kind == nullptr) {
    result.status = "error";
    result.why = "no fault kind " + plan.fault;
    return result;
  }
  if (std::string why = NotApplicable(*kind, backend); !why.empty()) {
    result.status = "n/a";
    result.why = why;
    return result;
  }
  if (kind->needs_root && ::geteuid() != 0) {
    result.status = "skipped";
    result.why = "needs root (network namespaces, mounts)";
    return result;
  }
  // long-run-* kinds inject their base fault; clock-step-*-1h are clock steps.
  const std::string& f = BaseFault(plan.fault);
  const bool partition = f.rfind("partition-", 0) == 0;
  if (backend == "redis-sentinel" && !SentinelFixture::Available()) {
    result.status = "skipped";
    result.why = "redis-server or redis-sentinel is not installed";
    return result;
  }
  if (partition) {
    if (std::string why = PartitionsUnavailable(); !why.empty()) {
      result.status = "skipped";
      result.why = why;
      return result;
    }
  }

  try {
    std::unique_ptr<BackendFixture> fixture = MakeFixture(backend);
    Cluster cluster(*fixture);
    if (options.keep) cluster.KeepDir();
    const fs::path dir = cluster.dir();
    result.dir = dir.string();
    const fs::path socket = dir / "resource.sock";
    const fs::path journal = dir / "journal.jsonl";
    const fs::path windows = dir / "faults.jsonl";

    // The store's way for each replica (direct, through a proxy, from a namespace).
    // A proxy in front of the target's store connection; of every replica's when the
    // target is the long job's holder, known only once the fault begins.
    std::vector<std::unique_ptr<StoreProxy>> proxies(static_cast<std::size_t>(options.replicas));
    std::unique_ptr<Partitions> partitions;
    std::unique_ptr<ReplicaClock> clock;
    std::unique_ptr<Tmpfs> tmpfs;
    std::string lock_yaml;
    const fs::path db_dir = dir / "db";
    if (backend == "sqlite") {
      if (plan.fault == "sqlite-disk-full") tmpfs = std::make_unique<Tmpfs>(db_dir, "16m");
      fs::create_directories(db_dir);
      lock_yaml = "  backend: sqlite\n  url: sqlite://./db/tickd.db\n";
    } else if (fixture->Address().empty()) {
      lock_yaml = fixture->LockYaml(dir);  // Sentinel: the sentinels' addresses, no one store
    } else {
      lock_yaml = fixture->LockYamlVia(dir, "${" + std::string(kStoreVar) + "}");
    }
    for (std::size_t i = 0; i < proxies.size() && f.rfind("proxy-", 0) == 0; ++i) {
      if (plan.on_long_run || static_cast<int>(i) == plan.target)
        proxies.at(i) = MakeProxy(fixture->Address());
    }
    if (partition) partitions = MakePartitions(options.replicas, fixture->Address());
    if (f.rfind("clock-", 0) == 0) clock = MakeClock((dir / "clock").string());

    Resource resource(options.bin.resource, socket, journal, dir / "resource.log");
    const fs::path job_file = cluster.WriteJobFileText(
        JobFileText(lock_yaml, options.lease_s, socket, options.bin.write));
    ScopeGuard stop_replicas([&] { StopReplicas(cluster); });
    for (int i = 0; i < options.replicas; ++i) {
      std::vector<std::string> env;
      std::vector<std::string> prefix;
      std::string store = fixture->Address();
      if (partitions) {
        prefix = partitions->ExecPrefix(i);
        store = partitions->store_address();
      } else if (const auto& p = proxies.at(static_cast<std::size_t>(i)); p) {
        store = p->address();
      }
      if (!store.empty()) env.push_back(std::string(kStoreVar) + "=" + store);
      if (clock && i == plan.target) {
        for (const std::string& kv : clock->Env()) env.push_back(kv);
      }
      cluster.StartReplica("n" + std::to_string(i + 1), env, prefix);
    }
    const std::int64_t started_ms = NowMs();
    std::vector<std::string> watch_env = fixture->Env();
    if (!fixture->Address().empty()) watch_env.push_back(kStoreVar + ("=" + fixture->Address()));
    StoreLeaseWatch watch(TICKD_BINARY, job_file, watch_env, dir / "store_leases.jsonl");
    SleepS(options.warmup_s);

    // Inject, gather the evidence that it took, hold, heal.
    int target_i = plan.target;
    std::ostringstream evidence;
    if (plan.on_long_run) {
      std::int64_t long_tick = 0;
      target_i = LongRunHolder(cluster, &long_tick);
      if (target_i < 0) throw std::runtime_error("no run of the long job was going in 25 s");
      evidence << "n" << target_i + 1 << " running " << kLongJob << " tick " << long_tick
               << " since " << (NowMs() - long_tick * 1000) << " ms; ";
      if (f.rfind("store-", 0) == 0) target_i = plan.target;  // the store's fault
    }
    Replica& target = *cluster.replicas().at(static_cast<std::size_t>(target_i));
    StoreProxy* proxy = proxies[static_cast<std::size_t>(target_i)].get();
    const std::size_t target_lines = target.Lines().size();
    std::vector<std::size_t> lines_before;
    for (auto& r : cluster.replicas()) lines_before.push_back(r->Lines().size());
    auto any_trouble = [&] {
      for (std::size_t i = 0; i < cluster.replicas().size(); ++i) {
        if (auto t = TroubleAfter(*cluster.replicas()[i], lines_before[i]); !t.empty()) return t;
      }
      return std::string();
    };
    std::string target_name = "n" + std::to_string(target_i + 1);
    std::int64_t fault_start = NowMs();
    bool took = false;
    if (partition) {
      const auto direction = f == "partition-both"       ? Partitions::Direction::kBoth
                             : f == "partition-to-store" ? Partitions::Direction::kToStore
                                                         : Partitions::Direction::kFromStore;
      partitions->Partition(target_i, direction);
      SleepS(plan.hold_s);
      const std::string trouble = TroubleAfter(target, target_lines);
      took = !trouble.empty();
      evidence << "target log: " << (took ? trouble : "no error line");
      partitions->Heal(target_i);
    } else if (proxy) {
      const std::uint64_t dropped0 = proxy->bytes_dropped();
      const std::uint64_t held0 = proxy->bytes_held();
      if (f == "proxy-delay") proxy->Delay(static_cast<int>(plan.magnitude));
      if (f == "proxy-stall") proxy->Stall();
      if (f == "proxy-drop-replies") proxy->DropReplies();
      SleepS(plan.hold_s);
      const std::uint64_t dropped = proxy->bytes_dropped() - dropped0;
      const std::uint64_t held = proxy->bytes_held() - held0;
      const std::string trouble = TroubleAfter(target, target_lines);
      // Delay and stall act when the target's traffic was held up (its requests did
      // not reach the store in time); an error line of the target says so too.
      took =
          f == "proxy-drop-replies" ? dropped > 0 : (dropped > 0 || held > 0 || !trouble.empty());
      evidence << "proxy bytes dropped " << dropped << ", held " << held
               << "; target log: " << (trouble.empty() ? "no error line" : trouble);
      proxy->Pass();
      proxy->Reset();
    } else if (clock) {
      if (f == "clock-drift") {
        clock->Drift(plan.magnitude);
      } else {
        clock->Step(plan.magnitude);
      }
      SleepS(plan.hold_s);
      // The target's lines since the fault carry its faked time: skewed by at least a
      // third of the step (or of the drift's gain) from the real clock.
      const double skew_s =
          f == "clock-drift" ? (plan.magnitude - 1) * plan.hold_s : plan.magnitude;
      const std::int64_t now = NowMs();
      const auto lines = target.Lines();
      for (std::size_t i = target_lines; i < lines.size() && !took; ++i) {
        const std::int64_t ts = TsMs(lines[i].ts);
        const double off_s =
            ts > now ? (ts - now) / 1000.0 : (ts < fault_start ? (ts - fault_start) / 1000.0 : 0);
        if (std::fabs(off_s) >= std::fabs(skew_s) / 3 && std::fabs(off_s) > 0.1) {
          took = true;
          evidence << "target logged " << lines[i].ts << " (" << off_s << " s off)";
        }
      }
      if (!took) evidence << "no line of the target shows a skew of " << skew_s << " s";
      if (f == "clock-drift") clock->Drift(1.0);
      clock->Step(-clock->offset());  // real time again: a step back (or forward)
    } else if (f == "store-pause-half-lease" || f == "store-pause-twice-lease") {
      fixture->Pause();
      bool all = true;
      for (pid_t pid : fixture->ServerPids()) all = all && Stopped(pid);
      took = all && !fixture->ServerPids().empty();
      evidence << "server pid(s) stopped: " << (took ? "yes" : "no");
      SleepS(plan.hold_s);
      fixture->Resume();
    } else if (f == "store-kill-restart") {
      fixture->Kill();
      const std::string address = fixture->Address();
      const int port = std::stoi(address.substr(address.rfind(':') + 1));
      took = !testing::AcceptsOnLoopback(port);
      evidence << "store port " << port << (took ? " refuses" : " still accepts");
      SleepS(plan.hold_s);
      fixture->Start();
    } else if (f == "sentinel-failover") {
      std::string why;
      took = dynamic_cast<SentinelFixture&>(*fixture).FailOver(plan.hold_s, &why);
      evidence << why;
    } else if (f == "store-restart-without-data") {
      fixture->RestartWithoutData();
      took = true;
      evidence << "store restarted without its data";
      SleepS(plan.hold_s);
    } else if (f == "replica-sigkill" || f == "replica-sigstop") {
      const bool after_won = plan.point == "after-won";
      const bool at_point = after_won ? WaitForPoint(target, target_lines, "tick", "won")
                                      : WaitForPoint(target, target_lines, "run", "");
      fault_start = NowMs();
      if (f == "replica-sigkill") {
        target.Signal(SIGKILL);
        const auto status = target.Wait(milliseconds(5000));
        took = status && *status == 128 + SIGKILL;
        evidence << "target " << (took ? "killed" : "not killed") << " "
                 << (at_point ? plan.point : "(point not seen in 8 s)");
        SleepS(plan.hold_s);
        target.Start();
      } else {
        target.Signal(SIGSTOP);
        SleepS(0.05);
        took = Stopped(target.pid());
        evidence << "target " << (took ? "stopped" : "not stopped") << " "
                 << (at_point ? plan.point : "(point not seen in 8 s)");
        SleepS(plan.hold_s);
        target.Signal(SIGCONT);
      }
      target_name = target.node();
    } else if (f == "sqlite-disk-full") {
      const std::uint64_t filled = FillDisk(db_dir / "filler");
      SleepS(plan.hold_s);
      const std::string trouble = any_trouble();
      took = !trouble.empty();
      evidence << "filler " << filled << " bytes; " << (took ? trouble : "no error line");
      fs::remove(db_dir / "filler");
    } else if (f == "sqlite-readonly") {
      // Root ignores file modes, and open files stay writable after a chmod: as root
      // the database and its WAL are made immutable (chattr +i), which fails writes
      // through descriptors already open too. Not the -shm file: it is mapped, and a
      // write fault on it would be a SIGBUS, not an error tickd can answer.
      const std::vector<fs::path> files = {db_dir / "tickd.db", db_dir / "tickd.db-wal"};
      std::string how;
      for (const fs::path& file : files) {
        if (fs::exists(file)) how = SetReadOnly(file, true);
      }
      ScopeGuard heal([&] {  // also when something throws: the folder must be removable
        for (const fs::path& file : files) {
          if (fs::exists(file)) SetReadOnly(file, false);
        }
      });
      SleepS(plan.hold_s);
      const std::string trouble = any_trouble();
      took = !trouble.empty();
      evidence << how << "; " << (took ? trouble : "no error line");
    } else if (f == "sqlite-dir-removed") {
      // Running replicas keep their open (now unlinked) files and notice nothing; a
      // replica that starts meanwhile finds no folder. Healing recreates the folder
      // empty and restarts every replica on it: the claims and fences are gone, as
      // after a restart without data.
      std::error_code ec;
      fs::remove_all(db_dir, ec);
      RestartReplica(target);
      SleepS(plan.hold_s);
      const std::string trouble = any_trouble();
      took = !trouble.empty();
      evidence << (took ? trouble : "no error line");
      fs::create_directories(db_dir, ec);
      for (auto& r : cluster.replicas()) RestartReplica(*r);
    }
    const std::int64_t fault_end = NowMs();
    SleepS(options.settle_s);
    const std::int64_t end_ms = NowMs();
    watch.Stop();
    evidence << "; store leases read " << watch.polls() << " times";
    StopReplicas(cluster);
    resource.Stop();

    const bool replica_side = partition || proxy || clock || f.rfind("replica-", 0) == 0;
    nlohmann::json window = {{"fault", plan.fault},
                             {"target", replica_side ? target_name : std::string("store")},
                             {"start_ms", fault_start},
                             {"end_ms", fault_end},
                             {"effect", took ? kind->effect : std::string("none")},
                             {"took_effect", took}};
    std::ofstream(windows) << window.dump() << "\n";
    if (options.plant_duplicate) PlantDuplicate(journal);

    CheckInput in;
    in.journal = journal;
    for (auto& r : cluster.replicas()) in.logs.push_back(dir / (r->node() + ".log"));
    in.fault_windows = windows;
    in.store_leases = dir / "store_leases.jsonl";
    in.jobs = NemesisJobs();
    in.lease_s = options.lease_s;
    // What the store's clock check lets a clock ahead start early (DESIGN §1 rule 15):
    // lock.clock_tolerance (250 ms, the default the job file keeps); on etcd up to 1 s
    // more (its Date has whole seconds); SQLite checks nothing.
    in.clock_tolerance_ms = backend == "sqlite" ? 0 : backend == "etcd" ? 1250 : 250;
    // Ticks from when every replica had surely started to before the shutdown began
    // (the longest hold, 1.5 s, must end before SIGTERM).
    in.window_start_ms = (started_ms / 1000 + 3) * 1000;
    in.window_end_ms = (end_ms / 1000 - 2) * 1000;
    result.check = RunCheck(in);
    result.injected = took ? 1 : 0;
    result.evidence = evidence.str();
    result.status = result.check.error.empty() ? "ran" : "error";
    if (!result.check.error.empty()) result.why = "checker: " + result.check.error;
  } catch (const std::exception& e) {
    result.status = "error";
    result.why = e.what();
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return result;
}

}  // namespace tickd::nemesis
