// Bad job files: `tickd validate` and `tickd run` both exit 2 and name the place.
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/e2e/harness.h"

namespace tickd::e2e {
namespace {

struct BadFile {
  const char* what;
  const char* text;
  const char* place;    // expected "FILE:LINE:COL" suffix after the path
  const char* message;  // a part of the message
};

const BadFile kBadFiles[] = {
    {"syntax error", "version: 1\njobs:\n  - name: a\n    schedule: [\n", ":5:1", ""},
    {"unknown key", "version: 1\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n    shel: true\n",
     ":5:5", "did you mean 'shell'"},
    {"bad schedule",
     "version: 1\njobs:\n  - name: a\n    schedule: \"61 * * * *\"\n    shell: true\n", ":4:15",
     "field 1 (minute)"},
    {"duplicate name",
     "version: 1\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n    shell: true\n"
     "  - name: a\n    schedule: \"* * * * *\"\n    shell: true\n",
     ":6:11", "duplicate"},
    {"H in a list",
     "version: 1\njobs:\n  - name: a\n    schedule: \"H,5 * * * *\"\n    shell: true\n", ":4:15",
     "'H' cannot be combined with other values in a list"},
    {"H range backwards",
     "version: 1\njobs:\n  - name: a\n    schedule: \"H(30-10) * * * *\"\n    shell: true\n",
     ":4:15", "range 30-10 goes backwards"},
    {"jitter not below the deadline",
     "version: 1\njobs:\n  - name: a\n    schedule: \"@every 30s\"\n    jitter: 45s\n"
     "    shell: true\n",
     ":5:13", "jitter: 45s must be shorter than the job's starting_deadline (30s)"},
    {"jitter not a duration",
     "version: 1\njobs:\n  - name: a\n    schedule: \"H * * * *\"\n    jitter: -5s\n"
     "    shell: true\n",
     ":5:13", "jobs[0].jitter: "},
    {"retries below 0",
     "version: 1\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n    retries: -1\n"
     "    shell: true\n",
     ":5:14", "jobs[0].retries: -1 is out of range 0-999"},
    {"retry_backoff not a duration",
     "version: 1\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n    retries: 2\n"
     "    retry_backoff: soon\n    shell: true\n",
     ":6:20", "jobs[0].retry_backoff: "},
    {"retry_backoff with the older retries form",
     "version: 1\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n"
     "    retries: {attempts: 3}\n    retry_backoff: 5s\n    shell: true\n",
     ":6:20", "cannot be combined with the older form"},
    {"http job with a file: URL",
     "version: 1\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n"
     "    http: {url: \"file:///etc/passwd\"}\n",
     ":5:17", "jobs[0].http.url: 'file:///etc/passwd' is not an http:// or https:// URL"},
    {"http job expecting a status that is none",
     "version: 1\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n"
     "    http: {url: \"http://127.0.0.1/\", expect_status: 2xy}\n",
     ":5:53", "jobs[0].http.expect_status: '2xy' is not an HTTP status"},
    {"notifier with two targets",
     "version: 1\ndefaults:\n  on_failure: {shell: \"x\", http: \"http://127.0.0.1/\"}\n"
     "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    shell: true\n",
     ":3:15", "defaults.on_failure: set exactly one of shell, http"},
    {"notifier timeout of 0s",
     "version: 1\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n    shell: true\n"
     "    on_miss: {http: {url: \"http://127.0.0.1/\", timeout: 0s}}\n",
     ":6:57", "jobs[0].on_miss.http.timeout: must be longer than 0s"},
};

fs::path WriteFile(const fs::path& dir, const std::string& text, mode_t mode) {
  fs::path file = dir / "jobs.yaml";
  std::ofstream(file) << text;
  ::chmod(file.c_str(), mode);
  return file;
}

TEST_CASE("bad job files exit 2 with FILE:LINE:COL", "[e2e]") {
  const fs::path dir = fs::temp_directory_path() / ("tickd-bad-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const BadFile& bad : kBadFiles) {
    const fs::path file = WriteFile(dir, bad.text, 0644);
    for (const char* cmd : {"validate", "run"}) {
      INFO(bad.what << " via tickd " << cmd);
      auto [status, output] = RunCommand({TICKD_BINARY, cmd, "-c", file.string()});
      INFO(output);
      CHECK(status == 2);
      CHECK(output.find(file.string() + bad.place + ":") != std::string::npos);
      CHECK(output.find(bad.message) != std::string::npos);
    }
  }
  SECTION("a job file writable by others is refused, saying how to fix it") {
    const fs::path file = WriteFile(
        dir, "version: 1\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n    shell: true\n",
        0666);
    for (const char* cmd : {"validate", "run"}) {
      auto [status, output] = RunCommand({TICKD_BINARY, cmd, "-c", file.string()});
      INFO(output);
      CHECK(status == 2);
      CHECK(output.find(file.string() + ":") != std::string::npos);
      CHECK(output.find("chmod") != std::string::npos);
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("pause and resume: bad arguments exit 2 saying what is wrong, and change nothing",
          "[e2e]") {
  const fs::path dir = fs::temp_directory_path() / ("tickd-pause-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = WriteFile(
      dir, "version: 1\njobs:\n  - name: a\n    schedule: \"* * * * *\"\n    shell: true\n", 0644);
  const std::string f = file.string();
  struct Bad {
    std::vector<std::string> args;
    const char* message;
  };
  const Bad bad[] = {
      {{"pause", "-c", f}, "name the jobs, or --all"},
      {{"pause", "-c", f, "--all", "a"}, "name the jobs, or --all"},
      {{"pause", "-c", f, "nosuchjob"}, "no job named nosuchjob (jobs: a)"},
      {{"pause", "-c", f, "--until", "tomorrow", "a"}, "neither an RFC 3339 instant"},
      {{"pause", "-c", f, "--until", "2020-01-01T00:00:00Z", "a"}, "not in the future"},
      {{"resume", "-c", f, "nosuchjob"}, "no job named nosuchjob"},
      {{"resume", "-c", f}, "name the jobs, or --all"},
  };
  for (const Bad& b : bad) {
    std::vector<std::string> argv = {TICKD_BINARY};
    argv.insert(argv.end(), b.args.begin(), b.args.end());
    auto [status, output] = RunCommand(argv);
    INFO(output);
    CHECK(status == 2);
    CHECK(output.find(b.message) != std::string::npos);
  }
  // Nothing was paused by any of them.
  auto [status, output] = RunCommand({TICKD_BINARY, "status", "-c", f});
  INFO(output);
  CHECK(status == 0);
  CHECK(output.find("PAUSED") == std::string::npos);
  fs::remove_all(dir);
}

// docs/design.md §4: a reload that fails validation is rejected whole and the jobs
// go on. The real daemon, its file watch and its plugin check: a syntax error, then a
// plugin whose constructor crashes the process that loads it (it crashed the daemon
// before the check moved to a child, jobs::CheckPluginInHost), then a good file.
TEST_CASE("a daemon reloading a bad file, or a plugin that crashes on load, keeps its jobs",
          "[e2e]") {
  auto sqlite = MakeSqliteFixture();
  Cluster cluster(*sqlite);
  const fs::path runs = cluster.dir() / "runs.txt";
  const std::string beat = "  - name: beat\n    schedule: \"* * * * * *\"\n"
                           "    shell: echo $TICKD_JOB >> " + runs.string() + "\n";
  cluster.WriteJobFile("jobs:\n" + beat);
  Replica& replica = cluster.StartReplica("node-a", {"TICKD_TEST_HOSTILE=crash"});
  const auto lines_with = [&](const std::string& event, const std::string& outcome) {
    std::size_t n = 0;
    for (const LogLine& l : replica.Lines()) n += l.event == event && l.Get("outcome") == outcome;
    return n;
  };
  const auto beats_go_on = [&] {
    const std::size_t before = ReadLines(runs).size();
    return Cluster::WaitUntil([&] { return ReadLines(runs).size() >= before + 2; },
                              std::chrono::seconds(20));
  };
  REQUIRE(beats_go_on());

  const std::vector<std::string> bad_bodies = {
      "jobs:\n" + beat + "  - name: broken\n    schedule: [\n",
      "jobs:\n" + beat + "  - name: hostile\n    schedule: \"* * * * *\"\n"
          "    plugin: {path: " + std::string(HOSTILE_PLUGIN) + "}\n",
  };
  for (std::size_t i = 0; i < bad_bodies.size(); ++i) {
    INFO("bad file " << i);
    cluster.WriteJobFile(bad_bodies[i]);  // the daemon sees the change within a second
    REQUIRE(Cluster::WaitUntil([&] { return lines_with("reload", "rejected") == i + 1; },
                               std::chrono::seconds(20)));
    CHECK_FALSE(replica.Wait(milliseconds(0)).has_value());  // still running
    CHECK(beats_go_on());
  }
  CHECK(replica.LogText().find("loading it crashed the check (SIGSEGV)") != std::string::npos);
  CHECK(lines_with("reload", "applied") == 0);

  cluster.WriteJobFile("jobs:\n" + beat + "  - name: added\n    schedule: \"* * * * * *\"\n"
                       "    shell: echo $TICKD_JOB >> " + runs.string() + "\n");
  REQUIRE(Cluster::WaitUntil([&] { return lines_with("reload", "applied") == 1; },
                             std::chrono::seconds(20)));
  CHECK(Cluster::WaitUntil(
      [&] {
        const auto all = ReadLines(runs);
        return std::count(all.begin(), all.end(), "added") >= 1;
      },
      std::chrono::seconds(20)));
  CHECK(lines_with("reload", "rejected") == 2);
}

}  // namespace
}  // namespace tickd::e2e
