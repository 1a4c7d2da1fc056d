// Job files that load: every key lands in its field, defaults apply and are
// overridden per job, paths resolve against the file's folder, ConfigHash is stable.
#include "config/config.h"

#include <cstdlib>

#include <catch2/catch.hpp>

#include "tests/config/load.h"

namespace tickd::config {
namespace {

using std::chrono::milliseconds;
using testing::LoadText;
using testing::MustLoad;
using testing::TempDir;
using testing::TestOptions;

const Job& FindJob(const Config& c, const std::string& name) {
  for (const Job& j : c.jobs) {
    if (j.name == name) return j;
  }
  FAIL("no job " << name);
  std::abort();
}

TEST_CASE("every key of the job file is parsed", "[config]") {
  TempDir dir;
  dir.Write("plugins/libstock.so", "not really a library");
  const std::string file = dir.Write("jobs.yaml", R"(version: 1
node:
  id: node-a
lock:
  backend: sqlite
  url: sqlite://./state/tickd.db
  lease: 20s
  password_env: TICKD_TEST_PASSWORD
  op_timeout: 500ms
  retention: 1d
http:
  listen: 0.0.0.0:9464
max_concurrent_runs: 8
shutdown_grace: 45s
jobs:
  - name: full
    schedule: "0 */5 * * * ?"
    shell: ./bin/cleanup --older-than 30m
    dialect: quartz
    timezone: Europe/Berlin
    timeout: 2h
    kill_grace: 5s
    env: {LEVEL: debug, COUNT: 3}
    workdir: ./work
    concurrency: allow
    misfire: run-once
    starting_deadline: 30s
    recover: true
    on_lease_lost: continue
    retries: {attempts: 3, backoff: 10s}
    dst_gap: skip
    dst_overlap: both
    enabled: false
  - name: argv
    schedule: "@every 30s"
    run: [/usr/local/bin/report, --day, yesterday]
    retries: 4
    retry_backoff: 2s
  - name: restore-stock
    schedule: "@hourly"
    plugin:
      path: ./plugins/libstock.so
      isolation: none
      config: {batch: 500, ratio: 0.5, name: "x", flags: [true, null], quoted: "12"}
)");
  // The plugin file is a stand-in: loading it (dlopen) is tested in tests/plugins.
  LoadOptions options = TestOptions();
  options.check_plugins = false;
  const Config c = MustLoad(file, options);
  const std::string folder = dir.path().string();
  CHECK(c.version == 1);
  CHECK(c.path == file);
  CHECK(c.node_id == "node-a");
  CHECK(c.lock.backend == "sqlite");
  CHECK(c.lock.url == "sqlite://" + folder + "/state/tickd.db");
  CHECK(c.lock.lease == milliseconds(20'000));
  CHECK(c.lock.password_env == "TICKD_TEST_PASSWORD");
  CHECK(c.lock.op_timeout == milliseconds(500));
  CHECK(c.lock.retention == milliseconds(86'400'000));
  CHECK(c.http.listen == "0.0.0.0:9464");
  CHECK(c.max_concurrent_runs == 8);
  CHECK(c.shutdown_grace == milliseconds(45'000));
  REQUIRE(c.jobs.size() == 3);

  const Job& full = c.jobs[0];
  CHECK(full.name == "full");
  CHECK(full.line == 16);
  CHECK(full.schedule_text == "0 */5 * * * ?");
  CHECK(full.shell == std::optional<std::string>("./bin/cleanup --older-than 30m"));
  CHECK(full.argv.empty());
  CHECK_FALSE(full.plugin.has_value());
  CHECK(full.schedule_options.dialect == cron::Dialect::kQuartz);
  CHECK(full.schedule_options.timezone == "Europe/Berlin");
  CHECK(full.schedule_options.dst_gap == cron::DstGap::kSkip);
  CHECK(full.schedule_options.dst_overlap == cron::DstOverlap::kBoth);
  CHECK(full.timeout == milliseconds(7'200'000));
  CHECK(full.kill_grace == milliseconds(5'000));
  CHECK(full.env == std::map<std::string, std::string>{{"LEVEL", "debug"}, {"COUNT", "3"}});
  CHECK(full.workdir == folder + "/work");
  CHECK(full.concurrency == Concurrency::kAllow);
  CHECK(full.misfire == Misfire::kRunOnce);
  CHECK(full.starting_deadline == milliseconds(30'000));
  CHECK(full.recover);
  CHECK(full.on_lease_lost == OnLeaseLost::kContinue);
  CHECK(full.retries.attempts == 3);  // the older form: tries in all, a fixed backoff
  CHECK(full.retries.backoff == milliseconds(10'000));
  CHECK_FALSE(full.retries.doubling);
  CHECK_FALSE(full.enabled);

  const Job& argv = c.jobs[1];
  CHECK(argv.argv == std::vector<std::string>{"/usr/local/bin/report", "--day", "yesterday"});
  CHECK_FALSE(argv.shell.has_value());
  CHECK(argv.retries.attempts == 5);          // a bare integer is the retries after the first try
  CHECK(argv.retries.backoff == milliseconds(2'000));
  CHECK(argv.retries.doubling);
  CHECK(argv.workdir == folder);              // not set: the job file's folder
  CHECK(argv.enabled);

  const Job& plugin = c.jobs[2];
  REQUIRE(plugin.plugin.has_value());
  CHECK(plugin.plugin->path == folder + "/plugins/libstock.so");
  CHECK(plugin.plugin->isolation == Isolation::kNone);
  CHECK(plugin.plugin->config_json ==
        R"({"batch":500,"flags":[true,null],"name":"x","quoted":"12","ratio":0.5})");
}

TEST_CASE("built-in defaults when keys are absent", "[config]") {
  TempDir dir;
  const std::string file = dir.Write("jobs.yaml", R"(version: 1
jobs:
  - name: a
    schedule: "* * * * *"
    shell: "true"
  - name: p
    schedule: "@daily"
    plugin: ./lib.so
)");
  LoadOptions options = TestOptions();
  options.check_plugins = false;
  const Config c = MustLoad(file, options);
  CHECK(c.node_id.empty());
  CHECK(c.lock.backend == "sqlite");
  CHECK(c.lock.url == "sqlite://" + dir.path().string() + "/tickd.db");
  CHECK(c.lock.lease == milliseconds(15'000));
  CHECK(c.lock.claim_lead == milliseconds(200));
  CHECK(c.lock.clock_tolerance == milliseconds(250));
  CHECK(c.lock.history.output_bytes == 16 * 1024);
  CHECK(c.lock.history.runs == 50);
  CHECK(c.http.listen.empty());
  CHECK(c.max_concurrent_runs == 64);
  CHECK(c.shutdown_grace == milliseconds(30'000));
  const Job& a = c.jobs[0];
  CHECK(a.schedule_options.dialect == cron::Dialect::kCron);
  CHECK(a.schedule_options.timezone == "UTC");
  CHECK(a.timeout == milliseconds(3'600'000));
  CHECK(a.kill_grace == milliseconds(10'000));
  CHECK(a.concurrency == Concurrency::kForbid);
  CHECK(a.misfire == Misfire::kSkip);
  CHECK_FALSE(a.recover);
  CHECK(a.on_lease_lost == OnLeaseLost::kTerminate);
  CHECK(a.retries.attempts == 1);
  CHECK(a.enabled);
  REQUIRE(c.jobs[1].plugin.has_value());
  CHECK(c.jobs[1].plugin->config_json == "{}");
  CHECK(c.jobs[1].plugin->isolation == Isolation::kProcess);
}

TEST_CASE("defaults apply to every job and each job may override them", "[config]") {
  TempDir dir;
  const std::string file = dir.Write("jobs.yaml", R"(version: 1
defaults:
  timezone: Europe/Berlin
  timeout: 5m
  env: {REGION: eu, LEVEL: info}
  retries: {attempts: 2, backoff: 3s}
  shell: echo default
jobs:
  - name: inherits
    schedule: "0 3 * * *"
  - name: overrides
    schedule: "0 3 * * *"
    timezone: America/New_York
    timeout: 10s
    env: {LEVEL: debug}
    retries: 5
    run: [/bin/true]
)");
  const Config c = MustLoad(file);
  const Job& inherits = FindJob(c, "inherits");
  CHECK(inherits.schedule_options.timezone == "Europe/Berlin");
  CHECK(inherits.timeout == milliseconds(300'000));
  CHECK(inherits.env == std::map<std::string, std::string>{{"LEVEL", "info"}, {"REGION", "eu"}});
  CHECK(inherits.shell == std::optional<std::string>("echo default"));
  const Job& overrides = FindJob(c, "overrides");
  CHECK(overrides.schedule_options.timezone == "America/New_York");
  CHECK(overrides.timeout == milliseconds(10'000));
  // env merges per variable; retries per field; the job's own command replaces the default.
  CHECK(overrides.env == std::map<std::string, std::string>{{"LEVEL", "debug"}, {"REGION", "eu"}});
  CHECK(inherits.retries.attempts == 2);
  CHECK_FALSE(inherits.retries.doubling);
  CHECK(overrides.retries.attempts == 6);  // `retries: 5`: five retries after the first try
  CHECK(overrides.retries.backoff == milliseconds(3'000));
  CHECK(overrides.retries.doubling);
  CHECK_FALSE(overrides.shell.has_value());
  CHECK(overrides.argv == std::vector<std::string>{"/bin/true"});
}

TEST_CASE("${VAR} and ${VAR:-default} expand in values", "[config][expand]") {
  ::setenv("TICKD_CFG_TEST_HOST", "db7", 1);
  ::setenv("TICKD_CFG_TEST_LEASE", "9s", 1);
  ::unsetenv("TICKD_CFG_TEST_UNSET");
  TempDir dir;
  const std::string file = dir.Write("jobs.yaml", R"(version: 1
node:
  id: ${TICKD_CFG_TEST_UNSET:-}
lock:
  backend: redis
  url: redis://${TICKD_CFG_TEST_HOST}:6379/0
  lease: ${TICKD_CFG_TEST_LEASE}
jobs:
  - name: a
    schedule: "* * * * *"
    shell: echo $TICKD_FENCE $$ $${HOME} ${TICKD_CFG_TEST_UNSET:-none}
    env: {TARGET: "${TICKD_CFG_TEST_HOST}"}
)");
  const Config c = MustLoad(file);
  CHECK(c.node_id.empty());
  CHECK(c.lock.url == "redis://db7:6379/0");
  CHECK(c.lock.lease == milliseconds(9'000));
  CHECK(c.jobs[0].shell == std::optional<std::string>("echo $TICKD_FENCE $$ ${HOME} none"));
  CHECK(c.jobs[0].env.at("TARGET") == "db7");
}

TEST_CASE("starting_deadline defaults to min(60s, the period)", "[config][deadline]") {
  TempDir dir;
  const std::string file = dir.Write("jobs.yaml", R"(version: 1
defaults:
  shell: "true"
jobs:
  - {name: every-minute, schedule: "* * * * *"}
  - {name: every-2s, schedule: "*/2 * * * * *"}
  - {name: every-30s, schedule: "@every 30s"}
  - {name: uneven, schedule: "0,45 * * * * *"}
  - {name: weekdays, schedule: "0 9 * * 1-5"}
  - {name: explicit, schedule: "*/5 * * * *", starting_deadline: 2m}
)");
  const Config c = MustLoad(file);
  CHECK(FindJob(c, "every-minute").starting_deadline == milliseconds(60'000));
  CHECK(FindJob(c, "every-2s").starting_deadline == milliseconds(2'000));
  CHECK(FindJob(c, "every-30s").starting_deadline == milliseconds(30'000));
  CHECK(FindJob(c, "uneven").starting_deadline == milliseconds(15'000));  // smallest gap
  CHECK(FindJob(c, "weekdays").starting_deadline == milliseconds(60'000));
  CHECK(FindJob(c, "explicit").starting_deadline == milliseconds(120'000));
}

TEST_CASE("a starting_deadline from defaults is clamped to each job's period",
          "[config][deadline]") {
  TempDir dir;
  const std::string file = dir.Write("jobs.yaml", R"(version: 1
defaults:
  shell: "true"
  starting_deadline: 5m
jobs:
  - {name: fast, schedule: "@every 10s"}
  - {name: slow, schedule: "@hourly"}
)");
  const Config c = MustLoad(file);
  CHECK(FindJob(c, "fast").starting_deadline == milliseconds(10'000));
  CHECK(FindJob(c, "slow").starting_deadline == milliseconds(300'000));
}

TEST_CASE("lock url: relative sqlite paths resolve, the scheme may name the backend", "[config]") {
  TempDir dir;
  auto load_lock = [&dir](const std::string& lock) {
    const std::string file = dir.Write(
        "jobs.yaml", "version: 1\nlock:\n" + lock + "jobs: []\n");
    return MustLoad(file).lock;
  };
  const std::string folder = dir.path().string();
  CHECK(load_lock("  url: sqlite://./a/../b.db?mode=wal\n").url ==
        "sqlite://" + folder + "/b.db?mode=wal");
  CHECK(load_lock("  url: sqlite:///var/lib/tickd.db\n").url == "sqlite:///var/lib/tickd.db");
  const LockSettings redis = load_lock("  url: redis://h:6379/0\n");
  CHECK(redis.backend == "redis");
  CHECK(redis.url == "redis://h:6379/0");
  CHECK(load_lock("  url: postgresql://u@h/db\n").backend == "postgres");
  CHECK(load_lock("  url: redis-sentinel://h1:26379,h2:26379/m/0\n").backend == "redis");
  CHECK(load_lock("  backend: redis\n  url: redis-sentinel://h1/m\n").url ==
        "redis-sentinel://h1/m");
  const LockSettings none = load_lock("  backend: none\n");
  CHECK(none.backend == "none");
  CHECK(none.url.empty());
  CHECK(load_lock("  backend: memory\n").backend == "memory");
}

TEST_CASE("backend none loads with a warning; http.listen defaults to loopback", "[config]") {
  TempDir dir;
  const std::string file = dir.Write("jobs.yaml", R"(version: 1
lock: {backend: none}
http: {listen: ":9464"}
jobs: []
)");
  const Config c = MustLoad(file);
  CHECK(c.http.listen == "127.0.0.1:9464");
  const std::string warnings = [&c] {
    std::string out;
    for (const ConfigError& w : c.warnings) out += w.ToString() + "\n";
    return out;
  }();
  CHECK(warnings.find(file + ":2:7: lock.backend: none runs every job") != std::string::npos);
}

TEST_CASE("lock.stop_grace: lease/5 unless written; past lease/3 an error; an op_timeout "
          "that cannot be answered before it a warning", "[config]") {
  TempDir dir;
  auto load_lock = [&dir](const std::string& lock) {
    return LoadText(dir, "version: 1\nlock:\n" + lock +
                             "jobs:\n  - {name: a, schedule: \"* * * * *\", shell: \"true\"}\n");
  };
  const Config defaults = MustLoad(load_lock("  lease: 15s\n").file);
  CHECK_FALSE(defaults.lock.stop_grace.has_value());
  CHECK(DefaultStopGrace(defaults.lock.lease) == milliseconds(3'000));
  CHECK(defaults.warnings.empty());
  const Config set = MustLoad(load_lock("  lease: 15s\n  stop_grace: 5s\n").file);
  CHECK(set.lock.stop_grace == milliseconds(5'000));
  CHECK(MustLoad(load_lock("  stop_grace: 0s\n").file).lock.stop_grace == milliseconds(0));

  auto too_long = load_lock("  lease: 15s\n  stop_grace: 5001ms\n");
  CHECK_ERROR(too_long, "FILE:4:15: lock.stop_grace: 5001ms is longer than lease/3 (5s)");
  auto bad = load_lock("  stop_grace: soon\n");
  CHECK_ERROR(bad, "FILE:3:15: lock.stop_grace: ");

  // lease 3 s, op_timeout 2 s: a renewal sent at 1 s may be answered at 3 s, after the
  // stop at 2.968 − 0.6 s.
  const Config slow = MustLoad(load_lock("  lease: 3s\n  op_timeout: 2s\n").file);
  REQUIRE(slow.warnings.size() == 1);
  CHECK(slow.warnings[0].ToString().find(":4:15: lock.op_timeout: a renewal sent lease/3 (1s)") !=
        std::string::npos);
  CHECK(MustLoad(load_lock("  lease: 3s\n  op_timeout: 1s\n").file).warnings.empty());
}

TEST_CASE(
    "lock.retention against the store: a warning when the ticks it keeps outgrow "
    "etcd's default quota or ZooKeeper's heap",
    "[config]") {
  TempDir dir;
  const auto load = [&dir](const std::string& url, const std::string& retention,
                           const std::string& schedule, int jobs) {
    std::string text = "version: 1\nlock:\n  url: " + url + "\n";
    if (!retention.empty()) text += "  retention: " + retention + "\n";
    text += "jobs:\n";
    for (int j = 0; j < jobs; ++j) {
      text += "  - {name: j" + std::to_string(j) + ", schedule: \"" + schedule +
              "\", shell: \"true\"}\n";
    }
    return MustLoad(LoadText(dir, text).file).warnings;
  };
  const auto said = [](const std::vector<ConfigError>& warnings, const std::string& part) {
    return std::any_of(warnings.begin(), warnings.end(), [&](const ConfigError& w) {
      return w.ToString().find(part) != std::string::npos;
    });
  };
  // 300 jobs every 10 s keep 300 × 60,480 = ~18.1 million job-ticks in 7 days.
  const auto etcd = load("etcd://127.0.0.1:2379", "", "*/10 * * * * *", 300);
  REQUIRE(etcd.size() == 1);
  CHECK(said(etcd, ":5:26: jobs: lock.retention (7d) keeps ~18.1 million job-ticks"));
  CHECK(said(etcd, "(the most, jobs[0]: ~60480)"));
  CHECK(said(etcd, "--quota-backend-bytes"));
  // 100 jobs every minute: ~1 million, below etcd's 2 million; 300 every 10 s for 12 h:
  // ~1.3 million.
  CHECK(load("etcd://127.0.0.1:2379", "", "* * * * *", 100).empty());
  CHECK(load("etcd://127.0.0.1:2379", "12h", "*/10 * * * * *", 300).empty());
  // ZooKeeper's heap: ~1.3 million is past its million.
  const auto zk = load("zookeeper://127.0.0.1:2181", "12h", "*/10 * * * * *", 300);
  REQUIRE(zk.size() == 1);
  CHECK(said(zk, "keeps ~1.3 million job-ticks"));
  CHECK(said(zk, "-Xmx"));
  CHECK(load("zookeeper://127.0.0.1:2181", "", "* * * * *", 90).empty());  // ~0.9 million
  // Stores that expire ticks themselves (Redis) or keep them on disk say nothing.
  CHECK(load("redis://127.0.0.1:6379", "", "* * * * * *", 300).empty());
  CHECK(load("postgres://u@127.0.0.1/db", "", "* * * * * *", 300).empty());
}

TEST_CASE("ConfigHash is stable and changes with what runs", "[config][hash]") {
  const std::string base = R"(version: 1
jobs:
  - name: a
    schedule: "*/5 * * * *"
    shell: ./bin/clean
    workdir: ./w
)";
  TempDir dir1;
  TempDir dir2;
  const Job a1 = MustLoad(dir1.Write("jobs.yaml", base)).jobs.at(0);
  const Job a2 = MustLoad(dir2.Write("jobs.yaml", "# a comment moves the job down\n" + base))
                     .jobs.at(0);
  CHECK(a1.ConfigHash().size() == 16);
  CHECK(a1.ConfigHash() == a1.ConfigHash());
  // Same definition in another folder, at another line: same hash.
  CHECK(a1.ConfigHash() == a2.ConfigHash());

  Job changed = a1;
  changed.shell = "./bin/clean --all";
  CHECK(changed.ConfigHash() != a1.ConfigHash());
  changed = a1;
  changed.schedule_options.timezone = "Europe/Berlin";
  CHECK(changed.ConfigHash() != a1.ConfigHash());
  changed = a1;
  changed.concurrency = Concurrency::kAllow;
  CHECK(changed.ConfigHash() != a1.ConfigHash());
  changed = a1;
  changed.env["X"] = "1";
  CHECK(changed.ConfigHash() != a1.ConfigHash());
  changed = a1;
  changed.starting_deadline = milliseconds(1'000);
  CHECK(changed.ConfigHash() != a1.ConfigHash());
  changed = a1;
  changed.jitter = milliseconds(10'000);
  CHECK(changed.ConfigHash() != a1.ConfigHash());
  changed.jitter = milliseconds(0);  // no jitter: the hash a tickd without jitter computed
  CHECK(changed.ConfigHash() == a1.ConfigHash());
}

TEST_CASE("jitter and H: per job or from defaults", "[config][spread]") {
  TempDir dir;
  const std::string file = dir.Write("jobs.yaml", R"(version: 1
defaults:
  shell: "true"
  jitter: 20s
jobs:
  - {name: hashed, schedule: "H H(0-5) * * *"}
  - {name: own, schedule: "@every 1m", jitter: 45s}
  - {name: none, schedule: "@every 1m", jitter: 0s}
)");
  const Config c = MustLoad(file);
  CHECK(FindJob(c, "hashed").jitter == milliseconds(20'000));
  // What `H` hashes is the job's name, set by the loader.
  CHECK(FindJob(c, "hashed").schedule_options.job_name == "hashed");
  CHECK(FindJob(c, "own").jitter == milliseconds(45'000));
  CHECK(FindJob(c, "none").jitter == milliseconds(0));
}

TEST_CASE("jobs.example.yaml at the repo root is valid", "[config][example]") {
  LoadOptions options = TestOptions();
  options.check_permissions = false;  // a checkout's mode follows the umask
  const std::string file = std::string(TICKD_SOURCE_DIR) + "/jobs.example.yaml";
  const Config c = MustLoad(file, options);
  CHECK(c.lock.backend == "sqlite");
  CHECK(c.lock.lease == milliseconds(15'000));
  CHECK(c.jobs.size() >= 4);
  bool has_argv = false;
  bool has_berlin = false;
  for (const Job& j : c.jobs) {
    has_argv = has_argv || !j.argv.empty();
    has_berlin = has_berlin || j.schedule_options.timezone == "Europe/Berlin";
  }
  CHECK(has_argv);
  CHECK(has_berlin);
  CHECK(c.warnings.empty());
}

TEST_CASE("node.clock_skew_warning sets the skew threshold; 1s by default, 0s turns it off",
          "[config]") {
  TempDir dir;
  const std::string head = "version: 1\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n"
                           "    shell: \"true\"\n";
  CHECK(MustLoad(dir.Write("default.yaml", head)).clock_skew_warning == milliseconds(1'000));
  CHECK(MustLoad(dir.Write("set.yaml", head + "node: {clock_skew_warning: 2500ms}\n"))
            .clock_skew_warning == milliseconds(2'500));
  CHECK(MustLoad(dir.Write("off.yaml", head + "node:\n  id: n1\n  clock_skew_warning: 0s\n"))
            .clock_skew_warning == milliseconds(0));
}


TEST_CASE("retries: N retries with retry_backoff doubling up to a cap; the older form waits the "
          "same each time", "[config]") {
  Retries doubling{4, milliseconds(1'000), true};
  CHECK(doubling.BackoffBefore(2) == milliseconds(1'000));
  CHECK(doubling.BackoffBefore(3) == milliseconds(2'000));
  CHECK(doubling.BackoffBefore(4) == milliseconds(4'000));
  CHECK(doubling.BackoffBefore(30) == Retries::kMaxDoubledBackoff);
  Retries long_base{3, milliseconds(3'600'000), true};  // longer than the cap: kept as is
  CHECK(long_base.BackoffBefore(3) == milliseconds(3'600'000));
  Retries fixed{5, milliseconds(5'000), false};
  CHECK(fixed.BackoffBefore(5) == milliseconds(5'000));

  TempDir dir;
  const std::string file = dir.Write("jobs.yaml", R"(version: 1
defaults:
  retry_backoff: 10s
jobs:
  - name: inherits-backoff
    schedule: "0 3 * * *"
    shell: x
    retries: 2
  - name: bare
    schedule: "0 3 * * *"
    shell: x
    retries: 0
  - name: hashed
    schedule: "0 3 * * *"
    shell: x
    retries: {attempts: 3, backoff: 10s}
)");
  const Config c = MustLoad(file);
  CHECK(FindJob(c, "inherits-backoff").retries.attempts == 3);
  CHECK(FindJob(c, "inherits-backoff").retries.backoff == milliseconds(10'000));
  CHECK(FindJob(c, "inherits-backoff").retries.doubling);
  CHECK(FindJob(c, "bare").retries.attempts == 1);
  CHECK(c.warnings.empty());  // retry_backoff set (inherited): no warning about the meaning
  // The older form keeps the hash it had; the new one hashes differently.
  Job older = FindJob(c, "hashed");
  Job newer = older;
  newer.retries.doubling = true;
  CHECK(older.ConfigHash() != newer.ConfigHash());
}

TEST_CASE("retries: a bare number without retry_backoff warns that it counts retries now",
          "[config]") {
  TempDir dir;
  const std::string file = dir.Write("jobs.yaml", R"(version: 1
jobs:
  - name: a
    schedule: "0 3 * * *"
    shell: x
    retries: 3
)");
  const Config c = MustLoad(file);
  CHECK(c.jobs[0].retries.attempts == 4);
  REQUIRE(c.warnings.size() == 1);
  CHECK(c.warnings[0].ToString().find(file + ":6:14: jobs[0].retries: 3 means 3 retries after "
                                      "the first try (4 tries in all") != std::string::npos);
}

}  // namespace
}  // namespace tickd::config
