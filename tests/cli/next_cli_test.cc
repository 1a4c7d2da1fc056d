// `tickd next` through the real executable (docs/design.md §3): what it prints, its exit
// status, and that every expression a peer library rejects is rejected here too
// (exit 2, one line on stderr) unless tickd's dialect deliberately accepts it.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cron/schedule.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;  // -1 when the process did not exit normally
  int signal = 0;      // the signal that ended it, 0 when it exited
  std::string out;
  std::string err;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A scratch directory for the children's stdout/stderr files, removed at exit.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "tickd-cli-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) FAIL("mkdtemp failed");
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Runs `tickd <args>` once per element of `runs`, up to `parallel` at a time, with
// stdout and stderr sent to files (so no pipe can fill up and stall a child).
std::vector<RunResult> RunTickdMany(const std::vector<std::vector<std::string>>& runs,
                                    int parallel) {
  ScratchDir scratch;
  std::vector<RunResult> results(runs.size());
  std::map<pid_t, size_t> running;

  auto reap_one = [&] {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    REQUIRE(pid > 0);
    const auto it = running.find(pid);
    REQUIRE(it != running.end());
    RunResult& r = results[it->second];
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
    r.out = ReadFile(scratch.path() / (std::to_string(it->second) + ".out"));
    r.err = ReadFile(scratch.path() / (std::to_string(it->second) + ".err"));
    running.erase(it);
  };

  for (size_t i = 0; i < runs.size(); ++i) {
    while (static_cast<int>(running.size()) >= parallel) reap_one();
    std::vector<std::string> argv_strings = {TICKD_BINARY};
    argv_strings.insert(argv_strings.end(), runs[i].begin(), runs[i].end());
    std::vector<char*> argv;
    for (auto& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);

    const std::string out_path = (scratch.path() / (std::to_string(i) + ".out")).string();
    const std::string err_path = (scratch.path() / (std::to_string(i) + ".err")).string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    REQUIRE(rc == 0);
    running.emplace(pid, i);
  }
  while (!running.empty()) reap_one();
  return results;
}

RunResult RunTickd(const std::vector<std::string>& args) { return RunTickdMany({args}, 1)[0]; }

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Bad input, per docs/design.md §3: status 2, nothing on stdout, exactly one line on stderr.
void CheckBadInput(const RunResult& r) {
  CHECK(r.signal == 0);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(!r.err.empty());
  CHECK(r.err.find("internal error") == std::string::npos);
}

void CheckOneLineError(const RunResult& r) {
  CheckBadInput(r);
  CHECK(Lines(r.err).size() == 1);
}

// Runs `tickd next <args>` and checks that it succeeds, quietly, printing `expected`.
void CheckNext(const std::vector<std::string>& args, const std::vector<std::string>& expected) {
  std::vector<std::string> argv = {"next"};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r = RunTickd(argv);
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(Lines(r.out) == expected);
}

TEST_CASE("next prints five instants strictly after --from by default", "[cli]") {
  CheckNext({"--from", "2026-01-01T00:00:00Z", "*/15 * * * *"},
            {"2026-01-01T00:15:00+00:00", "2026-01-01T00:30:00+00:00", "2026-01-01T00:45:00+00:00",
             "2026-01-01T01:00:00+00:00", "2026-01-01T01:15:00+00:00"});
}

TEST_CASE("next without --from starts at the current time", "[cli]") {
  const auto r = RunTickd({"next", "-n", "2", "0 0 1 1 *"});
  REQUIRE(r.exit_code == 0);
  const auto lines = Lines(r.out);
  REQUIRE(lines.size() == 2);
  const auto first = tickd::cron::ParseRfc3339(lines[0]);
  REQUIRE(first.has_value());
  const auto now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  CHECK(*first > now - std::chrono::hours(24));
  CHECK(*first <= now + std::chrono::hours(24 * 367));
}

TEST_CASE("next -n sets the count, -n 0 prints nothing", "[cli]") {
  CheckNext(
      {"-n", "3", "--from", "2026-01-01T00:00:00Z", "@daily"},
      {"2026-01-02T00:00:00+00:00", "2026-01-03T00:00:00+00:00", "2026-01-04T00:00:00+00:00"});
  CheckNext({"-n", "0", "--from", "2026-01-01T00:00:00Z", "@daily"}, {});
}

TEST_CASE("next is strictly after --from, which may carry an offset", "[cli]") {
  // 2026-03-01T12:00:00+01:00 is 11:00Z, itself a firing: it must not be printed.
  CheckNext({"-n", "2", "--from", "2026-03-01T12:00:00+01:00", "0 * * * *"},
            {"2026-03-01T12:00:00+00:00", "2026-03-01T13:00:00+00:00"});
}

TEST_CASE("next in Europe/Berlin across the 2026 spring-forward gap", "[cli][dst]") {
  // 02:30 does not exist on 2026-03-29: the default policy fires at 03:00+02:00.
  CheckNext(
      {"-n", "3", "--tz", "Europe/Berlin", "--from", "2026-03-28T00:00:00Z", "30 2 * * *"},
      {"2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"});
  // --dst-gap skip drops that day (Quartz's behaviour).
  CheckNext({"-n", "2", "--tz", "Europe/Berlin", "--dst-gap", "skip", "--from",
             "2026-03-28T12:00:00Z", "30 2 * * *"},
            {"2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00"});
}

TEST_CASE("next in Europe/Berlin across the 2026 fall-back overlap", "[cli][dst]") {
  // 02:30 happens twice on 2026-10-25. Fixed-time: once, the first (+02:00) pass;
  // every-hour: both passes; --dst-overlap both forces both for the fixed time.
  CheckNext({"-n", "2", "--tz", "Europe/Berlin", "--from", "2026-10-24T12:00:00Z", "30 2 * * *"},
            {"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"});
  CheckNext(
      {"-n", "3", "--tz", "Europe/Berlin", "--from", "2026-10-25T00:00:00Z", "30 * * * *"},
      {"2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00", "2026-10-25T03:30:00+01:00"});
  CheckNext({"-n", "2", "--tz", "Europe/Berlin", "--dst-overlap", "both", "--from",
             "2026-10-24T12:00:00Z", "30 2 * * *"},
            {"2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00"});
}

TEST_CASE("next in the quartz and spring dialects", "[cli]") {
  CheckNext({"-n", "2", "--dialect", "quartz", "--from", "2026-01-01T00:00:00Z", "0 0 12 ? * 6L"},
            {"2026-01-30T12:00:00+00:00", "2026-02-27T12:00:00+00:00"});
  CheckNext({"-n", "2", "--dialect", "spring", "--from", "2026-01-01T00:00:00Z", "0 0 0 13 * FRI"},
            {"2026-02-13T00:00:00+00:00", "2026-03-13T00:00:00+00:00"});
}

TEST_CASE("next stops at the 2199 horizon with fewer lines and exit 0", "[cli]") {
  CheckNext({"--from", "2198-06-01T00:00:00Z", "0 0 0 1 1 * 2199"}, {"2199-01-01T00:00:00+00:00"});
  CheckNext({"--from", "2199-01-01T00:00:00Z", "0 0 0 1 1 * 2199"}, {});
  CheckNext({"-n", "3", "--from", "2199-12-30T00:00:00Z", "@daily"}, {"2199-12-31T00:00:00+00:00"});
}

TEST_CASE("next names the field and column of an invalid expression", "[cli]") {
  const auto r = RunTickd({"next", "--", "61 * * * *"});
  CheckOneLineError(r);
  CHECK(r.err.rfind("61 * * * *: field 1 (minute) at column 1: ", 0) == 0);
}

TEST_CASE("next rejects a bad --tz, --from, -n or option with status 2", "[cli]") {
  const std::vector<std::vector<std::string>> runs = {
      {"next", "--tz", "Mars/Olympus_Mons", "* * * * *"},
      {"next", "--from", "yesterday", "* * * * *"},
      {"next", "--from", "2026-13-01T00:00:00Z", "* * * * *"},
      {"next", "-n", "-1", "* * * * *"},
      {"next", "-n", "lots", "* * * * *"},
      {"next", "--dialect", "vixie", "* * * * *"},
      {"next", "--dst-gap", "maybe", "* * * * *"},
      {"next", "--frobnicate", "* * * * *"},
      {"next"},
      {"next", "* * * * *", "extra"},
      {},
  };
  const auto results = RunTickdMany(runs, 4);
  for (size_t i = 0; i < runs.size(); ++i) {
    INFO("run " << i << " stderr: " << results[i].err);
    CheckBadInput(results[i]);
  }
  // The options checked by CmdNext itself name the option at fault in one line.
  CheckOneLineError(results[0]);
  CHECK(results[0].err.rfind("--tz Mars/Olympus_Mons: ", 0) == 0);
  CheckOneLineError(results[1]);
  CHECK(results[1].err.rfind("--from yesterday: ", 0) == 0);
}

// H hashes "<job>:<field>" (FNV-1a 64); "cleanup-orders:minute" mod 15 = 5. The jitter
// offset hashes "<job>@<T in unix ms>": mod 30000 that is 24096 ms for 00:05 and 4568 ms
// for 00:20 (docs/design.md §2; pinned: every replica and other tools compute the same).
TEST_CASE("next --job computes H, --jitter the due instants", "[cli][spread]") {
  CheckNext({"-n", "2", "--from", "2026-01-01T00:00:00Z", "--job", "cleanup-orders",
             "H/15 * * * *"},
            {"2026-01-01T00:05:00+00:00", "2026-01-01T00:20:00+00:00"});
  const std::vector<std::string> due = {
      "2026-01-01T00:05:24.096+00:00 tick=2026-01-01T00:05:00+00:00",
      "2026-01-01T00:20:04.568+00:00 tick=2026-01-01T00:20:00+00:00"};
  CheckNext({"-n", "2", "--from", "2026-01-01T00:00:00Z", "--job", "cleanup-orders", "--jitter",
             "30s", "H/15 * * * *"},
            due);

  // The same from a job file: its schedule, options and jitter.
  ScratchDir dir;
  const std::string file = (dir.path() / "jobs.yaml").string();
  std::ofstream(file) << "version: 1\njobs:\n  - name: cleanup-orders\n"
                         "    schedule: \"H/15 * * * *\"\n    jitter: 30s\n    shell: \"true\"\n";
  CheckNext({"-n", "2", "--from", "2026-01-01T00:00:00Z", "-c", file, "--job", "cleanup-orders"},
            due);

  const std::vector<std::vector<std::string>> bad = {
      {"next", "H * * * *"},                                    // H without --job
      {"next", "--jitter", "30s", "0 * * * *"},                 // jitter without --job
      {"next", "--job", "a", "--jitter", "soon", "0 * * * *"},  // not a duration
      {"next", "-c", file},                                     // -c without --job
      {"next", "-c", file, "--job", "nosuch"},                  // not in the file
      {"next", "-c", file, "--job", "cleanup-orders", "* * * * *"},  // both
      {"next", "-c", file, "--job", "cleanup-orders", "--tz", "UTC"},  // options from the file
      {"next", "-c", (dir.path() / "missing.yaml").string(), "--job", "a"},
  };
  const auto results = RunTickdMany(bad, 4);
  for (size_t i = 0; i < bad.size(); ++i) {
    INFO("run " << i << " stderr: " << results[i].err);
    CheckBadInput(results[i]);
  }
  CheckOneLineError(results[0]);
  CHECK(results[0].err.rfind("H * * * *: field 1 (minute) at column 1: 'H' needs a job name", 0) ==
        0);
  CHECK(results[1].err == "--jitter needs --job NAME\n");
  CHECK(results[2].err.rfind("--jitter soon: ", 0) == 0);
  CHECK(results[4].err == "--job nosuch: no such job in " + file + "\n");
}

// node.id's rules hold for the flag too (docs/design.md §3): it names the replica in
// logfmt lines, the ledger and the stores' keys. The job file does not exist: the
// flag is refused before it is read.
TEST_CASE("--node-id is refused with status 2 where node.id would be", "[cli]") {
  std::vector<std::vector<std::string>> runs;
  for (const std::string& id :
       std::vector<std::string>{"a=b", "a b", "a\"b", "tab\there", std::string(129, 'n'), "a\xff"}) {
    runs.push_back({"run", "-c", "/nonexistent/jobs.yaml", "--node-id", id});
    runs.push_back({"trigger", "-c", "/nonexistent/jobs.yaml", "--node-id", id, "job"});
    runs.push_back({"pause", "-c", "/nonexistent/jobs.yaml", "--node-id", id, "--all"});
    runs.push_back({"resume", "-c", "/nonexistent/jobs.yaml", "--node-id", id, "--all"});
  }
  const auto results = RunTickdMany(runs, 4);
  for (size_t i = 0; i < runs.size(); ++i) {
    INFO("run " << i << " stderr: " << results[i].err);
    CheckBadInput(results[i]);
    CHECK(results[i].err.rfind("tickd: --node-id: must be at most 128 characters of UTF-8 text",
                               0) == 0);
  }
}

TEST_CASE("pause --reason must be UTF-8 text of at most 4096 bytes", "[cli]") {
  const auto results = RunTickdMany(
      {{"pause", "-c", "/nonexistent/jobs.yaml", "--all", "--reason", "bad \xff"},
       {"pause", "-c", "/nonexistent/jobs.yaml", "--all", "--reason", std::string(4097, 'r')}},
      2);
  for (const RunResult& r : results) {
    INFO(r.err);
    CheckBadInput(r);
    CHECK(r.err.rfind("tickd: --reason: must be at most 4096 bytes of UTF-8 text", 0) == 0);
  }
}

TEST_CASE("--help and --version exit 0", "[cli]") {
  auto r = RunTickd({"--version"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("tickd ") != std::string::npos);
  r = RunTickd({"next", "--help"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("--dst-gap") != std::string::npos);
}

// The daemon and `tickd next` share Schedule::Next: the CLI must print exactly the
// chain the library computes, for every expression of the benchmark set.
TEST_CASE("next prints what Schedule::Next computes", "[cli]") {
  std::ifstream set(std::string(TICKD_SOURCE_DIR) + "/bench/data/cron_set.txt");
  REQUIRE(set.good());
  std::vector<std::vector<std::string>> runs;
  std::vector<std::string> expected;
  const std::string from = "2026-01-01T00:00:00Z";
  for (std::string line; std::getline(set, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cols;
    std::istringstream in(line);
    for (std::string col; std::getline(in, col, '\t');) cols.push_back(col);
    REQUIRE(cols.size() == 4);
    tickd::cron::ScheduleOptions options;
    options.dialect = *tickd::cron::DialectFromName(cols[1]);
    options.timezone = cols[2];
    auto schedule = tickd::cron::Schedule::Parse(cols[3], options);
    REQUIRE(schedule.has_value());
    std::string text;
    tickd::cron::Instant at = *tickd::cron::ParseRfc3339(from);
    for (int i = 0; i < 20; ++i) {
      const auto next = schedule->Next(at);
      if (!next) break;
      text += tickd::cron::FormatRfc3339(*next, schedule->zone()) + "\n";
      at = *next;
    }
    expected.push_back(text);
    runs.push_back(
        {"next", "-n", "20", "--dialect", cols[1], "--tz", cols[2], "--from", from, "--", cols[3]});
  }
  REQUIRE(runs.size() >= 10);
  const auto results = RunTickdMany(runs, 4);
  for (size_t i = 0; i < runs.size(); ++i) {
    INFO(runs[i].back());
    CHECK(results[i].exit_code == 0);
    CHECK(results[i].out == expected[i]);
  }
}

// ---- every `valid: false` conformance vector, through the CLI ----

struct InvalidVector {
  std::string file;
  std::string source;
  std::string peer_dialect;
  std::string expr;  // as the peer wrote it
  std::string tickd_dialect;
  std::string tickd_expr;  // the same expression in tickd's field layout
};

// How each peer's dialect maps onto tickd's (conformance/cron/README.md). Returns
// false for a peer dialect with no tickd counterpart.
bool MapToTickd(const nlohmann::json& row, InvalidVector& v) {
  v.tickd_expr = v.expr;
  const std::string& d = v.peer_dialect;
  if (d == "quartz" || d == "croncpp-quartz" || d == "croncpp-oracle") {
    v.tickd_dialect = "quartz";
  } else if (d == "spring" || d == "ccronexpr") {
    v.tickd_dialect = "spring";
  } else if (d == "croniter") {
    v.tickd_dialect = "cron";
    if (row.contains("expr_secfirst")) v.tickd_expr = row["expr_secfirst"].get<std::string>();
  } else if (d == "gorhill") {
    v.tickd_dialect = "cron";
    // gorhill's 6-field form is minute..dow + year: seconds go in front.
    std::istringstream in(v.expr);
    int fields = 0;
    for (std::string f; in >> f;) ++fields;
    if (fields == 6) v.tickd_expr = "0 " + v.expr;
  } else if (d == "robfig" || d == "robfig-seconds" || d == "robfig-custom" ||
             d == "supertinycron" || d == "croncpp-standard") {
    v.tickd_dialect = "cron";
  } else {
    return false;
  }
  return true;
}

// Peer-invalid rows that tickd accepts on purpose, keyed "file|expr" (the peer's
// spelling), each with why. tests/cron/conformance_exclusions.txt gives the same
// reasons for the engine-level runner.
const std::map<std::string, std::string>& Exclusions() {
  static const std::map<std::string, std::string> exclusions = {
      // robfig's custom parser has only minute+hour and no descriptors.
      {"robfig.jsonl|@every 1m", "tickd's cron dialect accepts @every (DESIGN.md §2)"},
      // Lists mixing L/W/# with plain values: tickd accepts them (as Quartz's day of
      // month and Spring do); these peers reject them.
      {"croncpp.jsonl|0 30 23 ? * 5#2,6#3", "tickd accepts lists of L/W/#"},
      {"croncpp.jsonl|0 30 23 ? * 5L,6L", "tickd accepts lists of L/W/#"},
      {"croncpp.jsonl|0 30 23 1,15W * ?", "tickd accepts lists of L/W/#"},
      {"croncpp.jsonl|0 30 23 L,1 * ?", "tickd accepts lists of L/W/#"},
      {"croniter.jsonl|0 0 * * 5,6#3", "tickd accepts lists of L/W/#"},
      {"croniter.jsonl|0 9 15W,16 * *", "tickd accepts lists of L/W/#"},
      {"croniter.jsonl|0 9 1,15W * *", "tickd accepts lists of L/W/#"},
      {"supertinycron.jsonl|0 0 12 ? * 1#1,3#3,5#5", "tickd accepts lists of L/W/#"},
      // Numbering and ranges that tickd's cron dialect defines more widely.
      {"croncpp.jsonl|* * * * * 7", "croncpp DOW is 0-6; tickd cron reads 7 as Sunday"},
      {"croncpp.jsonl|0 15 10 * * ", "croncpp needs 6 fields; 5 is standard cron in tickd"},
      {"croncpp.jsonl|0 15 10 * * ? 2100", "croncpp's years end at 2099, tickd's at 2199"},
      {"croncpp.jsonl|0 15 10 * * ? 2090-2110", "croncpp's years end at 2099, tickd's at 2199"},
      // Oracle months are 0-11: its "1" is February (no 31st); in quartz it is January.
      {"croncpp.jsonl|0 0 5 31 1 ?", "croncpp-oracle month 1 = February; quartz's = January"},
  };
  return exclusions;
}

std::vector<InvalidVector> LoadInvalidVectors() {
  std::vector<InvalidVector> vectors;
  const fs::path dir = fs::path(TICKD_TEST_DATA_DIR) / "conformance" / "cron";
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".jsonl") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      const auto row = nlohmann::json::parse(line);
      if (!row.contains("valid") || row["valid"] != false) continue;
      InvalidVector v;
      v.file = path.filename().string();
      v.source = row.value("source", "");
      v.peer_dialect = row.value("dialect", "");
      v.expr = row.value("expr", "");
      if (!MapToTickd(row, v)) FAIL("no tickd dialect for " << v.peer_dialect << " in " << v.file);
      vectors.push_back(v);
    }
  }
  return vectors;
}

TEST_CASE("next rejects every invalid conformance vector with status 2", "[cli][conformance]") {
  const auto vectors = LoadInvalidVectors();
  REQUIRE(vectors.size() >= 400);
  std::vector<std::vector<std::string>> runs;
  for (const auto& v : vectors) {
    runs.push_back({"next", "--dialect", v.tickd_dialect, "--from", "2026-01-01T00:00:00Z", "--",
                    v.tickd_expr});
  }
  const auto results = RunTickdMany(runs, 4);

  // One summary assertion keeps a regression readable: every offending vector is
  // listed with what tickd printed.
  std::set<std::string> excluded_seen;
  std::vector<std::string> problems;
  for (size_t i = 0; i < vectors.size(); ++i) {
    const auto& v = vectors[i];
    const auto& r = results[i];
    const std::string key = v.file + "|" + v.expr;
    std::string problem;
    if (r.signal != 0) {
      problem = "killed by signal " + std::to_string(r.signal);  // never a crash
    } else if (Exclusions().count(key) != 0) {
      excluded_seen.insert(key);
      // Accepted on purpose: a normal answer or, should the engine tighten, a clean
      // rejection — nothing else.
      if (r.exit_code != 0 && r.exit_code != 2) problem = "excluded row exited otherwise";
    } else if (r.exit_code != 2) {
      problem = "accepted (exit " + std::to_string(r.exit_code) + ")";
    } else if (!r.out.empty() || Lines(r.err).size() != 1) {
      problem = "not exactly one line on stderr and nothing on stdout";
    } else if (r.err.rfind(v.tickd_expr + ":", 0) != 0) {
      problem = "message does not start with the expression";  // docs/design.md §3
    }
    if (!problem.empty()) {
      problems.push_back(v.source + " [" + v.peer_dialect + " -> " + v.tickd_dialect + "] '" +
                         v.tickd_expr + "': " + problem + "\n  stdout: " + r.out +
                         "  stderr: " + r.err);
    }
  }
  std::string report;
  for (const auto& p : problems) report += p + "\n";
  INFO(report);
  CHECK(problems.empty());
  // A stale exclusion (its row no longer exists) is a mistake in this list.
  for (const auto& [key, why] : Exclusions()) {
    INFO(key << " (" << why << ")");
    CHECK(excluded_seen.count(key) == 1);
  }
  WARN(vectors.size() << " invalid vectors: every one rejected with status 2 but "
                      << excluded_seen.size() << " excluded (accepted on purpose)");
}

}  // namespace
