// Job files that do not load: every problem is reported, each as FILE:LINE:COL.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "config/config.h"
#include "tests/config/load.h"

namespace tickd::config {
namespace {

using testing::LoadText;
using testing::MustLoad;
using testing::TempDir;
using testing::TestOptions;

const char kJobHead[] = "version: 1\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n";

TEST_CASE("a YAML syntax error names its place", "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, "version: 1\njobs:\n  - name: a\n    schedule: [\n");
  REQUIRE(r.errors.size() == 1);
  CHECK_ERROR(r, "FILE:5:1: YAML syntax error: ");
  auto tab = LoadText(dir, "version: 1\njobs:\n\t- name: a\n");
  REQUIRE(tab.errors.size() == 1);
  CHECK(tab.errors[0].rfind(tab.file + ":3:", 0) == 0);
}

// yaml-cpp refuses nesting beyond its depth guard with the message "bad file".
TEST_CASE("a file nested too deep says so, at its place", "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, "version: 1\njobs: " + std::string(2000, '[') + std::string(2000, ']') +
                             "\n");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].rfind(r.file + ":2:", 0) == 0);
  CHECK(r.errors[0].find("YAML syntax error: nested too deep") != std::string::npos);
}

TEST_CASE("a second YAML document is an error at its place", "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, std::string(kJobHead) + "    shell: true\n---\nversion: 1\n");
  REQUIRE(r.errors.size() == 1);
  CHECK_ERROR(r, "FILE:7:1: only one YAML document is allowed");
}

// yaml-cpp 0.7's parser reports empty documents forever after these (jbeder/yaml-cpp
// #1040): the load must end, with an error naming the file. The first input is the
// one the fuzzer found (fuzz/config_load_fuzz.cc); before the fix it never returned.
TEST_CASE("a stray ',' ends the load with an error", "[config][errors]") {
  TempDir dir;
  for (const char* text : {",- sh9223372timeout:5807utb\n;", ",\n", "version: 1\n,\n"}) {
    INFO(text);
    auto r = LoadText(dir, text);
    REQUIRE_FALSE(r.errors.empty());
    CHECK(r.errors[0].rfind(r.file + ":", 0) == 0);
  }
}

TEST_CASE("unknown keys are errors, with a did-you-mean when one is close", "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, std::string(kJobHead) + "    shel: \"true\"\n    timout: 5m\n"
                                                 "    colour: red\n");
  CHECK_ERROR(r, "FILE:5:5: jobs[0].shel: unknown key; did you mean 'shell'?");
  CHECK_ERROR(r, "FILE:6:5: jobs[0].timout: unknown key; did you mean 'timeout'?");
  CHECK_ERROR(r, "FILE:7:5: jobs[0].colour: unknown key");
  auto top = LoadText(dir, "version: 1\nlok: {}\nbackend: redis\ntimezone: UTC\n"
                           "lock: {lease: 1s, leese: 2s}\njobs: []\n");
  CHECK_ERROR(top, "FILE:2:1: lok: unknown key; did you mean 'lock'?");
  CHECK_ERROR(top, "FILE:3:1: backend: unknown key; did you mean 'lock.backend'?");
  CHECK_ERROR(top, "FILE:4:1: timezone: unknown key; job keys go inside a job");
  CHECK_ERROR(top, "FILE:5:19: lock.leese: unknown key; did you mean 'lease'?");
  auto merge = LoadText(dir, "version: 1\nx: &common {timeout: 1m}\njobs:\n"
                             "  - name: a\n    <<: *common\n");
  CHECK_ERROR(merge, "FILE:5:5: jobs[0].<<: unknown key; YAML merge keys are not supported");
}

TEST_CASE("duplicate job names and duplicate keys", "[config][errors]") {
  TempDir dir;
  auto r =
      LoadText(dir, std::string(kJobHead) + "    shell: \"true\"\n" +
                        "  - name: a\n    schedule: \"* * * * *\"\n    shell: x\n    shell: y\n");
  CHECK_ERROR(r, "FILE:6:11: jobs[1].name: duplicate job name 'a' (first at line 3)");
  CHECK_ERROR(r, "FILE:9:5: jobs[1].shell: duplicate key (first at line 8)");
}

TEST_CASE("job names: allowed characters, length, presence", "[config][errors]") {
  TempDir dir;
  const std::string long_name(65, 'x');
  auto r = LoadText(dir, "version: 1\ndefaults: {shell: x}\njobs:\n"
                         "  - {name: Bad Name, schedule: \"* * * * *\"}\n"
                         "  - {name: " + long_name + ", schedule: \"* * * * *\"}\n"
                         "  - {name: " + std::string(64, 'y') + ", schedule: \"* * * * *\"}\n"
                         "  - {schedule: \"* * * * *\"}\n"
                         "  - {name: no-schedule}\n"
                         "  - just a string\n");
  CHECK_ERROR(r, "FILE:4:12: jobs[0].name: 'Bad Name' must be 1-64 characters of a-z, 0-9");
  CHECK_ERROR(r, "FILE:5:12: jobs[1].name: '" + long_name + "' must be 1-64 characters");
  CHECK_ERROR(r, "FILE:7:5: jobs[3]: missing 'name'");
  CHECK_ERROR(r, "FILE:8:5: jobs[4]: missing 'schedule'");
  CHECK_ERROR(r, "FILE:9:5: jobs[5]: must be a mapping");
  CHECK(r.errors.size() == 5);  // the 64-character name is fine
}

TEST_CASE("exactly one of shell, run, plugin, http", "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, std::string(kJobHead) + "  - name: b\n    schedule: \"* * * * *\"\n"
                                                 "    shell: x\n    run: [y]\n"
                                                 "  - name: c\n    schedule: \"@daily\"\n"
                                                 "    run: /bin/not-a-list\n");
  CHECK_ERROR(r, "FILE:3:5: jobs[0]: missing the command: set one of shell, run, plugin, http");
  CHECK_ERROR(
      r, "FILE:5:5: jobs[1]: set exactly one of shell, run, plugin, http (found shell and run)");
  CHECK_ERROR(r, "FILE:11:10: jobs[2].run: takes a list");
  CHECK(r.errors.size() == 3);
}

TEST_CASE("a bad enum value lists the allowed values", "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, std::string(kJobHead) +
                             "    shell: x\n    concurrency: forbidd\n    misfire: never\n"
                             "    on_lease_lost: stop\n    dst_gap: maybe\n    dst_overlap: x\n"
                             "    dialect: vixie\n    recover: sometimes\n"
                             "lock:\n  backend: mysql\n");
  CHECK_ERROR(r, "FILE:6:18: jobs[0].concurrency: 'forbidd' is not one of forbid or allow; "
                 "did you mean 'forbid'?");
  CHECK_ERROR(r, "FILE:7:14: jobs[0].misfire: 'never' is not one of skip or run-once");
  CHECK_ERROR(r, "FILE:8:20: jobs[0].on_lease_lost: 'stop' is not one of terminate or continue");
  CHECK_ERROR(r, "FILE:9:14: jobs[0].dst_gap: 'maybe' is not one of run or skip");
  CHECK_ERROR(r, "FILE:10:18: jobs[0].dst_overlap: 'x' is not one of auto, first or both");
  CHECK_ERROR(r, "FILE:11:14: jobs[0].dialect: 'vixie' is not one of cron, quartz or spring");
  CHECK_ERROR(r, "FILE:12:14: jobs[0].recover: 'sometimes' is not one of true, false");
  CHECK_ERROR(r, "FILE:14:12: lock.backend: 'mysql' is not one of sqlite, redis, etcd, postgres, "
                 "zookeeper, none or memory");
  CHECK(r.errors.size() == 8);
}

TEST_CASE("a bad schedule embeds the cron parser's message", "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, "version: 1\njobs:\n  - name: a\n    schedule: \"61 * * * *\"\n"
                         "    shell: x\n");
  REQUIRE(r.errors.size() == 1);
  CHECK_ERROR(r, "FILE:4:15: jobs[0].schedule: ");
  CHECK(r.errors[0].find("field 1 (minute)") != std::string::npos);
}

TEST_CASE("an unknown time zone is an error and its schedule is not parsed", "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, std::string(kJobHead) + "    shell: x\n    timezone: Mars/Olympus\n");
  REQUIRE(r.errors.size() == 1);
  CHECK_ERROR(r, "FILE:6:15: jobs[0].timezone: unknown time zone 'Mars/Olympus'");
}

TEST_CASE("bad durations, numbers and versions", "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, "version: 2\nmax_concurrent_runs: many\nshutdown_grace: 30x\n"
                         "lock: {lease: 0s}\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n"
                         "    shell: x\n    timeout:\n    retries: {attempts: 0}\n");
  CHECK_ERROR(r, "FILE:1:10: version: 2 is not supported (this tickd reads version 1)");
  CHECK_ERROR(r, "FILE:2:22: max_concurrent_runs: 'many' is not a whole number");
  CHECK_ERROR(r, "FILE:3:17: shutdown_grace: 30x: unknown unit 'x'");
  CHECK_ERROR(r, "FILE:4:15: lock.lease: must be longer than 0s");
  CHECK_ERROR(r, "FILE:9:5: jobs[0].timeout: needs a value");
  CHECK_ERROR(r, "FILE:10:25: jobs[0].retries.attempts: 0 is out of range 1-1000");
  CHECK(r.errors.size() == 6);
}

TEST_CASE("retries and retry_backoff: bad values and the two forms mixed name their place",
          "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, std::string(kJobHead) +
                             "    shell: x\n    retries: -1\n    retry_backoff: soon\n"
                             "  - name: b\n    schedule: \"* * * * *\"\n    shell: x\n"
                             "    retries: {attempts: 3}\n    retry_backoff: 5s\n"
                             "  - name: c\n    schedule: \"* * * * *\"\n    shell: x\n"
                             "    retries: [3]\n    retry_backoff: -5s\n");
  CHECK_ERROR(r, "FILE:6:14: jobs[0].retries: -1 is out of range 0-999");
  CHECK_ERROR(r, "FILE:7:20: jobs[0].retry_backoff: ");
  CHECK_ERROR(r, "FILE:12:20: jobs[1].retry_backoff: cannot be combined with the older form "
                 "jobs[1].retries: {attempts, backoff}; write jobs[1].retries: N");
  CHECK_ERROR(r, "FILE:16:14: jobs[2].retries: must be a number of retries");
  CHECK_ERROR(r, "FILE:17:20: jobs[2].retry_backoff: ");
  CHECK(r.errors.size() == 5);
}

TEST_CASE("lock.claim_lead: 0s claims at T; 1s or more is an error at its place",
          "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, "version: 1\nlock: {claim_lead: 1s}\njobs:\n  - name: a\n"
                         "    schedule: \"* * * * *\"\n    shell: x\n");
  CHECK_ERROR(r, "FILE:2:20: lock.claim_lead: must be shorter than 1s");
  CHECK(r.errors.size() == 1);
  r = LoadText(dir, "version: 1\nlock: {claim_lead: 0s}\njobs:\n  - name: a\n"
                    "    schedule: \"* * * * *\"\n    shell: x\n");
  CHECK(r.errors.empty());
}

TEST_CASE("lock.claim_lead_max: claim_lead to 60s; else an error at its place",
          "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, "version: 1\nlock: {claim_lead_max: 61s}\njobs:\n  - name: a\n"
                         "    schedule: \"* * * * *\"\n    shell: x\n");
  CHECK_ERROR(r, "FILE:2:24: lock.claim_lead_max: must be at most 60s");
  CHECK(r.errors.size() == 1);
  r = LoadText(dir, "version: 1\nlock: {claim_lead: 500ms, claim_lead_max: 400ms}\njobs:\n"
                    "  - name: a\n    schedule: \"* * * * *\"\n    shell: x\n");
  CHECK_ERROR(r, "FILE:2:43: lock.claim_lead_max: must be at least lock.claim_lead (500ms)");
  CHECK(r.errors.size() == 1);
  r = LoadText(dir, "version: 1\nlock: {claim_lead_max: 200ms}\njobs:\n  - name: a\n"
                    "    schedule: \"* * * * *\"\n    shell: x\n");
  CHECK(r.errors.empty());
  CHECK(MustLoad(r.file).lock.claim_lead_max == milliseconds(200));
  r = LoadText(dir, "version: 1\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n    shell: x\n");
  CHECK(MustLoad(r.file).lock.claim_lead_max == milliseconds(30'000));
}

TEST_CASE("lock.clock_tolerance: 0s to 10s; more, or not a duration, is an error at its place",
          "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, "version: 1\nlock: {clock_tolerance: 11s}\njobs:\n  - name: a\n"
                         "    schedule: \"* * * * *\"\n    shell: x\n");
  CHECK_ERROR(r, "FILE:2:25: lock.clock_tolerance: must be at most 10s");
  CHECK(r.errors.size() == 1);
  r = LoadText(dir, "version: 1\nlock: {clock_tolerance: soon}\njobs:\n  - name: a\n"
                    "    schedule: \"* * * * *\"\n    shell: x\n");
  CHECK_ERROR(r, "FILE:2:25: lock.clock_tolerance: ");
  r = LoadText(dir, "version: 1\nlock: {clock_tolerance: 0s}\njobs:\n  - name: a\n"
                    "    schedule: \"* * * * *\"\n    shell: x\n");
  CHECK(r.errors.empty());
}

TEST_CASE("lock.history: sizes up to 64KB, runs 1-10000, each error at its place",
          "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir,
                    "version: 1\nlock:\n  history: {output: 65KB, runs: 0}\njobs:\n  - name: a\n"
                    "    schedule: \"* * * * *\"\n    shell: x\n");
  CHECK_ERROR(r, "FILE:3:21: lock.history.output: '65KB' is out of range: 0 (keep nothing) or "
                 "1KB-64KB");
  CHECK_ERROR(r, "FILE:3:33: lock.history.runs: 0 is out of range 1-10000");
  CHECK(r.errors.size() == 2);
  r = LoadText(dir, "version: 1\nlock:\n  history: {output: 16MB, keep: 3}\njobs:\n  - name: a\n"
                    "    schedule: \"* * * * *\"\n    shell: x\n");
  CHECK_ERROR(r, "FILE:3:21: lock.history.output: '16MB' is not a size (e.g. 16KB, 512B, 0)");
  CHECK(r.errors.size() == 2);  // and the unknown key `keep`
  r = LoadText(dir, "version: 1\nlock:\n  history: {output: 100}\njobs:\n  - name: a\n"
                    "    schedule: \"* * * * *\"\n    shell: x\n");
  CHECK_ERROR(r, "FILE:3:21: lock.history.output: '100' is out of range: 0 (keep nothing) or "
                 "1KB-64KB");
  r = LoadText(dir, "version: 1\nlock:\n  history: 16KB\njobs:\n  - name: a\n"
                    "    schedule: \"* * * * *\"\n    shell: x\n");
  CHECK(r.errors.size() == 1);
  for (const char* ok : {"0", "1KB", "64KB", "64KiB", "2048", "4096B", "8K"}) {
    r = LoadText(dir, std::string("version: 1\nlock:\n  history: {output: ") + ok +
                          ", runs: 10000}\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n"
                          "    shell: x\n");
    INFO(ok);
    CHECK(r.errors.empty());
  }
}

TEST_CASE("an unset ${VAR} names the variable and the place", "[config][errors]") {
  ::unsetenv("TICKD_CFG_TEST_MISSING");
  TempDir dir;
  auto r = LoadText(dir, std::string(kJobHead) + "    shell: echo ${TICKD_CFG_TEST_MISSING}\n");
  REQUIRE(r.errors.size() == 1);
  CHECK_ERROR(r,
              "FILE:5:12: jobs[0].shell: environment variable TICKD_CFG_TEST_MISSING is not set");
}

TEST_CASE("env: names must be variable names and not TICKD_*", "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, std::string(kJobHead) + "    shell: x\n    env:\n      1X: a\n"
                                                 "      TICKD_FENCE: b\n      OK: c\n");
  CHECK_ERROR(r, "FILE:7:7: jobs[0].env.1X: not an environment variable name");
  CHECK_ERROR(r, "FILE:8:7: jobs[0].env.TICKD_FENCE: TICKD_* variables are set by tickd");
  CHECK(r.errors.size() == 2);
}

TEST_CASE("an explicit starting_deadline longer than the period is an error", "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, "version: 1\njobs:\n  - name: a\n    schedule: \"@every 30s\"\n"
                         "    shell: x\n    starting_deadline: 1m\n");
  REQUIRE(r.errors.size() == 1);
  CHECK_ERROR(r, "FILE:6:24: jobs[0].starting_deadline: 1m is longer than the schedule's period "
                 "(30s); use at most 30s");
}

TEST_CASE("jitter must be shorter than the starting deadline", "[config][errors][spread]") {
  TempDir dir;
  auto r = LoadText(dir, "version: 1\njobs:\n  - name: a\n    schedule: \"@every 30s\"\n"
                         "    shell: x\n    jitter: 30s\n");
  REQUIRE(r.errors.size() == 1);
  CHECK_ERROR(r, "FILE:6:13: jobs[0].jitter: 30s must be shorter than the job's "
                 "starting_deadline (30s)");
  // Inherited from defaults: an error too (at the defaults' line), not clamped.
  auto d = LoadText(dir, "version: 1\ndefaults:\n  jitter: 2m\njobs:\n  - name: a\n"
                         "    schedule: \"@hourly\"\n    shell: x\n");
  REQUIRE(d.errors.size() == 1);
  CHECK_ERROR(d, "FILE:3:11: jobs[0].jitter: 2m (from defaults) must be shorter than the job's "
                 "starting_deadline (1m)");
  auto bad = LoadText(dir, std::string(kJobHead) + "    shell: x\n    jitter: soon\n");
  REQUIRE(bad.errors.size() == 1);
  CHECK_ERROR(bad, "FILE:6:13: jobs[0].jitter: ");
}

TEST_CASE("a bad H form is an error at the schedule", "[config][errors][spread]") {
  TempDir dir;
  auto r = LoadText(dir, "version: 1\njobs:\n  - name: a\n    schedule: \"H,5 * * * *\"\n"
                         "    shell: x\n");
  REQUIRE(r.errors.size() == 1);
  CHECK_ERROR(r, "FILE:4:15: jobs[0].schedule: H,5 * * * *: field 1 (minute) at column 1: 'H' "
                 "cannot be combined with other values in a list");
}

TEST_CASE("lock url must match the backend; network backends need one", "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, "version: 1\nlock:\n  backend: sqlite\n  url: redis://h\njobs: []\n");
  CHECK_ERROR(r, "FILE:4:8: lock.url: must start with sqlite://");
  auto etcd = LoadText(dir, "version: 1\nlock:\n  backend: etcd\njobs: []\n");
  CHECK_ERROR(etcd, "FILE:3:3: lock.url: required for backend etcd");
}

TEST_CASE("plugins: the file must exist and be a regular file", "[config][errors]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "plugdir");
  const std::string text = std::string(kJobHead) + "    plugin: {path: ./missing.so}\n" +
                           "  - name: b\n    schedule: \"@daily\"\n    plugin: ./plugdir\n";
  auto r = LoadText(dir, text);
  CHECK_ERROR(r, "FILE:5:20: jobs[0].plugin: " + dir.path().string() +
                     "/missing.so: No such file or directory");
  CHECK_ERROR(r, "FILE:8:13: jobs[1].plugin: " + dir.path().string() +
                     "/plugdir is not a regular file");
  CHECK(r.errors.size() == 2);
  LoadOptions no_plugin_check = TestOptions();
  no_plugin_check.check_plugins = false;
  CHECK(LoadText(dir, text, no_plugin_check).errors.empty());
}

TEST_CASE("plugins: a library shared by jobs is checked once per load, its error at each",
          "[config][errors]") {
  TempDir dir;
  dir.Write("shared.so", "not a library: the check below decides");
  std::string text = "version: 1\njobs:\n";
  for (const char* name : {"a", "b", "c"}) {
    text += std::string("  - name: ") + name +
            "\n    schedule: \"@daily\"\n    plugin: {path: ./shared.so}\n";
  }
  int checks = 0;
  LoadOptions counted = TestOptions();
  counted.plugin_check = [&checks](const std::string& path) -> Result<void> {
    ++checks;
    return MakeError(path, "refused by the test");
  };
  auto r = LoadText(dir, text, counted);
  CHECK(checks == 1);
  CHECK(r.errors.size() == 3);
  CHECK_ERROR(r, "FILE:5:20: jobs[0].plugin: " + dir.path().string() +
                     "/shared.so: refused by the test");
  CHECK_ERROR(r, "FILE:11:20: jobs[2].plugin: " + dir.path().string() +
                     "/shared.so: refused by the test");
}

TEST_CASE("every error in a file is reported, not just the first", "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, "version: 1\nlock: {lease: 5x}\njobs:\n"
                         "  - {name: A, schedule: \"* * * * *\", shell: x}\n"
                         "  - {name: b, schedule: \"* * * * *\", shell: x, timeout: -1s}\n"
                         "  - {name: c, schedule: \"* * * * *\", shell: x, enabeld: true}\n");
  CHECK(r.errors.size() == 4);
}

TEST_CASE("empty files, non-mapping files and missing jobs", "[config][errors]") {
  TempDir dir;
  CHECK_ERROR(LoadText(dir, ""), "FILE: the file is empty");
  CHECK_ERROR(LoadText(dir, "# only a comment\n---\n"), "FILE: the file is empty");
  // yaml-cpp loads a lone ',' as an empty document: the message points at it.
  CHECK_ERROR(LoadText(dir, ",\n"), "FILE:1:1: the job file must be a mapping with 'version: 1' "
                                      "and 'jobs:', found only ','");
  CHECK_ERROR(LoadText(dir, "# c\n\n  ,\n"), "FILE:3:3: the job file must be a mapping");
  // libtickd's try_lock claims ticks of the job "lock.<key>": no job file job may be one.
  CHECK_ERROR(LoadText(dir, "version: 1\njobs:\n  - name: lock.cleanup\n"
                            "    schedule: \"* * * * *\"\n    shell: x\n"),
              "FILE:3:11: jobs[0].name: 'lock.cleanup' is reserved");
  CHECK_ERROR(LoadText(dir, "- a\n- b\n"), "FILE:1:1: the job file must be a mapping");
  CHECK_ERROR(LoadText(dir, "version: 1\n"), "FILE:1:1: jobs: missing");
  CHECK_ERROR(LoadText(dir, "version: 1\njobs: {a: 1}\n"), "FILE:2:7: jobs: must be a list");
  auto missing = LoadConfig((dir.path() / "nope.yaml").string(), TestOptions());
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error()[0].ToString().find("No such file") != std::string::npos);
}

TEST_CASE("a job file writable by group or others is refused", "[config][security]") {
  TempDir dir;
  const std::string text = std::string(kJobHead) + "    shell: x\n";
  for (mode_t mode : {0666, 0646, 0664, 0620}) {
    const std::string file = dir.Write("jobs.yaml", text, mode);
    auto r = LoadConfig(file, TestOptions());
    INFO("mode " << std::oct << mode);
    REQUIRE_FALSE(r.has_value());
    REQUIRE(r.error().size() == 1);
    CHECK(r.error()[0].ToString().rfind(file + ": refused: writable by group or others", 0) == 0);
    CHECK(r.error()[0].message.find("chmod go-w " + file) != std::string::npos);
    LoadOptions unchecked = TestOptions();
    unchecked.check_permissions = false;
    CHECK(LoadConfig(file, unchecked).has_value());
  }
  CHECK(LoadConfig(dir.Write("jobs.yaml", text, 0644), TestOptions()).has_value());
  CHECK(LoadConfig(dir.Write("jobs.yaml", text, 0600), TestOptions()).has_value());
}

TEST_CASE("a job file owned by another user is refused", "[config][security]") {
  if (::geteuid() != 0) {
    WARN("not root: cannot chown a file to another user; skipped");
    return;
  }
  TempDir dir;
  const std::string file = dir.Write("jobs.yaml", std::string(kJobHead) + "    shell: x\n");
  REQUIRE(::chown(file.c_str(), 12345, 12345) == 0);
  auto r = LoadConfig(file, TestOptions());
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error()[0].message.find("refused: owned by uid 12345") != std::string::npos);
  CHECK(r.error()[0].message.find("fix: chown") != std::string::npos);
  LoadOptions unchecked = TestOptions();
  unchecked.check_permissions = false;
  CHECK(LoadConfig(file, unchecked).has_value());
}


TEST_CASE("errors in defaults are reported once, where they are written", "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, "version: 1\ndefaults:\n  name: x\n  timezone: Nowhere/City\n"
                         "  shell: a\n  run: [b]\njobs:\n"
                         "  - {name: a, schedule: \"* * * * *\"}\n"
                         "  - {name: b, schedule: \"* * * * *\"}\n");
  CHECK_ERROR(
      r, "FILE:3:3: defaults: set at most one of shell, run, plugin, http (found shell and run)");
  CHECK_ERROR(r, "FILE:3:9: defaults.name: a job name cannot have a default");
  CHECK_ERROR(r, "FILE:4:13: defaults.timezone: unknown time zone 'Nowhere/City'");
  CHECK(r.errors.size() == 3);
}

TEST_CASE("http.listen needs a port", "[config][errors]") {
  TempDir dir;
  auto r = LoadText(dir, "version: 1\nhttp:\n  listen: localhost\njobs: []\n");
  CHECK_ERROR(r, "FILE:3:11: http.listen: 'localhost' needs a port 1-65535");
  auto big = LoadText(dir, "version: 1\nhttp:\n  listen: 127.0.0.1:70000\njobs: []\n");
  CHECK_ERROR(big, "FILE:3:11: http.listen: '127.0.0.1:70000' needs a port");
}

TEST_CASE("node.clock_skew_warning is checked like every duration", "[config][errors]") {
  TempDir dir;
  auto bad = LoadText(dir, std::string(kJobHead) + "    shell: x\n"
                                                   "node: {clock_skew_warning: 2 secs}\n");
  CHECK_ERROR(bad, "FILE:6:28: node.clock_skew_warning: ");
  REQUIRE(bad.errors.size() == 1);
  auto typo = LoadText(dir, std::string(kJobHead) + "    shell: x\n"
                                                    "node: {clock_skew_warnign: 2s}\n");
  CHECK_ERROR(typo, "FILE:6:8: node.clock_skew_warnign: unknown key; did you mean "
                    "'clock_skew_warning'?");
  auto top = LoadText(dir, std::string(kJobHead) + "    shell: x\nclock_skew_warning: 2s\n");
  CHECK_ERROR(top, "FILE:6:1: clock_skew_warning: unknown key; did you mean "
                   "'node.clock_skew_warning'?");
}

}  // namespace
}  // namespace tickd::config
